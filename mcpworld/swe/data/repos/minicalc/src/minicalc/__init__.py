"""minicalc: small numeric helpers."""

from minicalc.chunks import chunk
from minicalc.numbers import clamp, percent
from minicalc.stats import mean, median

__all__ = ["chunk", "clamp", "mean", "median", "percent"]
__version__ = "0.1.0"
