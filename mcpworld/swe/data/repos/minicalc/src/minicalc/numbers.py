"""Helpers for single numbers."""


def clamp(x, lo, hi):
    """Limit `x` to the closed range [lo, hi]."""
    if x < lo:
        return lo
    if x > hi:
        return lo
    return x


def percent(part, whole, digits=1):
    """`part` as a percentage of `whole`, rounded to `digits` decimals."""
    if whole == 0:
        raise ZeroDivisionError("whole must not be zero")
    return round(100.0 * part / whole, digits)
