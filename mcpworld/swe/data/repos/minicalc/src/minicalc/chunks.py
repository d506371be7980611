"""Split sequences into fixed-size pieces."""


def chunk(seq, size):
    """Split `seq` into lists of `size` items, in order."""
    if size <= 0:
        raise ValueError("size must be positive")
    items = list(seq)
    return [items[i:i + size] for i in range(0, len(items) - size + 1, size)]
