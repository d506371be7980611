"""URL slugs."""

import re
import unicodedata

_NOT_WORD = re.compile(r"[^a-z0-9]+")


def slugify(text, sep="-"):
    """Lower-case ASCII words of `text` joined by `sep`: "Hello, World!" -> "hello-world"."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return _NOT_WORD.sub(sep, ascii_text.lower())
