"""Identifier case conversion."""


def snake_case(name):
    """`name` in snake_case: "parseHttpHeader" -> "parse_http_header"."""
    out = []
    for i, ch in enumerate(name):
        if ch.isupper():
            if i > 0:
                out.append("_")
            out.append(ch.lower())
        else:
            out.append(ch)
    return "".join(out)
