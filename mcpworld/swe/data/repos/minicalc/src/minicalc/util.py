"""Input checks shared by the minicalc modules."""

from numbers import Real


def require_numbers(values, what="values"):
    """Return `values` as a list, raising ValueError if it is empty or holds a non-number."""
    items = list(values)
    if not items:
        raise ValueError(f"{what} must not be empty")
    for item in items:
        if isinstance(item, bool) or not isinstance(item, Real):
            raise ValueError(f"{what} must be numbers, got {item!r}")
    return items
