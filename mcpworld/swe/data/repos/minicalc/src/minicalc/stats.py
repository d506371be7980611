"""Summary statistics over sequences of numbers."""

from minicalc.util import require_numbers


def mean(values):
    """The arithmetic mean of `values`."""
    items = require_numbers(values)
    return sum(items) / len(items)


def median(values):
    """The middle value of `values` once sorted."""
    items = sorted(require_numbers(values))
    middle = len(items) // 2
    return items[middle]
