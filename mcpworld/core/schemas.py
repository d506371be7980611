"""JSON Schema helpers shared by every layer: values that satisfy a tool's input schema."""

from __future__ import annotations

import random
from typing import Any

__all__ = ["random_value"]


def random_value(schema: dict[str, Any], rng: random.Random, defs: dict[str, Any] | None = None) -> Any:
    """A value that satisfies a (simple) JSON Schema: enums, types, anyOf, objects, arrays."""
    defs = defs if defs is not None else schema.get("$defs", {})
    if "$ref" in schema:
        return random_value(defs.get(schema["$ref"].split("/")[-1], {}), rng, defs)
    if "enum" in schema:
        return rng.choice(schema["enum"])
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [s for s in schema[key] if s.get("type") != "null"] or schema[key]
            return random_value(rng.choice(options), rng, defs)
    kind = schema.get("type", "string")
    if isinstance(kind, list):
        kind = rng.choice([k for k in kind if k != "null"] or ["null"])
    if kind == "integer":
        return rng.randint(int(schema.get("minimum", 0)), int(schema.get("maximum", 10)))
    if kind == "number":
        return round(rng.uniform(float(schema.get("minimum", 0)), float(schema.get("maximum", 500))), 2)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "array":
        return [random_value(schema.get("items", {}), rng, defs) for _ in range(rng.randint(0, 2))]
    if kind == "object":
        props = schema.get("properties", {})
        return {k: random_value(v, rng, defs) for k, v in props.items()
                if k in schema.get("required", []) or rng.random() < 0.5}
    if kind == "null":
        return None
    if schema.get("format") == "date":
        return f"2026-06-{rng.randint(1, 28):02d}"
    return rng.choice(["C001", "ZFA04Y", "MW101-0603", "test", "1", "ada@example.com", ""])
