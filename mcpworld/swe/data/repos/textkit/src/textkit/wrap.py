"""Shortening text for display."""


def truncate(text, width, suffix="..."):
    """`text` cut to at most `width` characters, ending with `suffix` when it was cut."""
    if width < len(suffix):
        raise ValueError("width must leave room for the suffix")
    if len(text) <= width:
        return text
    return text[:width] + suffix
