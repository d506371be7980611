"""Naming heuristics shared by graph building and checks: which output fields can feed which parameters.

An `id` inside a `customer` row (or under a `customers` key) is what a `customer_id` parameter wants, so a
field is known by its own name plus aliases built from its container.
"""

from __future__ import annotations

import re

VERBS = ("get", "list", "search", "find", "fetch", "read", "lookup", "query", "show", "describe", "browse",
         "count", "check", "validate", "view", "retrieve")
GENERIC_CONTAINERS = {"data", "results", "result", "records", "rows", "entries", "page", "value",
                      "values", "list", "response", "payload", "meta", "output", "objects"}
NOISE_FIELDS = {"latency_ms", "limit", "offset", "has_more", "next_cursor", "cursor", "page_token",
                "next_page_token", "prev_page_token", "request_id", "etag", "kind", "_id"}


def singular(word: str) -> str:
    """A good-enough English singular for table and key names (`entries` -> `entry`, `boxes` -> `box`)."""
    w = word.lower()
    if w.endswith("ies") and len(w) > 4:
        return w[:-3] + "y"
    if w.endswith(("sses", "shes", "ches", "xes")):
        return w[:-2]
    if w.endswith("s") and not w.endswith(("ss", "us", "is")) and len(w) > 3:
        return w[:-1]
    return w


def snake(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", text).lower()).strip("_")


def tool_noun(tool: str) -> str:
    """What a tool is about: `list_dice_rolls` -> `dice_roll`, `get_model_by_id` -> `model`."""
    parts = snake(tool).split("_")
    while parts and parts[0] in VERBS:
        parts = parts[1:]
    text = "_".join(parts)
    text = re.sub(r"_(by_id|by_name|info|details|detail|by_[a-z]+)$", "", text)
    text = re.sub(r"^(trending|all|my|current)_", "", text)
    return singular(text) if text else "item"


def aliases(field: str, container: str | None = None) -> set[str]:
    """Names a value found under `field` (inside `container`) may be passed as."""
    out = {field}
    if container and container not in GENERIC_CONTAINERS:
        noun = singular(snake(container))
        if field in ("id", "uid", "key", "code"):
            out |= {f"{noun}_id", f"{noun}_{field}", f"{snake(container)}_id"}
        if field in ("name", "title"):
            out |= {f"{noun}_name", f"{noun}_title"}
    return out


def is_read_only_name(tool: str) -> bool:
    """Imported tools carry no annotations: read-only is guessed from the verb."""
    return snake(tool).split("_")[0] in VERBS


def looks_like_id(field: str, value: object) -> bool:
    return field in ("id", "uid", "_id") or field.endswith(("_id", "_ids", "_uid", "_key", "_hash", "_token"))
