"""textkit: string helpers."""

from textkit.case import snake_case
from textkit.slug import slugify
from textkit.wrap import truncate

__all__ = ["slugify", "snake_case", "truncate"]
