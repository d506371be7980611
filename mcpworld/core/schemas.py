"""JSON Schema helpers shared by every layer: `$ref`s followed, Optional[...] unwrapped, values that satisfy a tool's
input schema. The one place that knows how a tool schema points into its `$defs`."""

from __future__ import annotations

import random
from typing import Any

__all__ = ["definitions", "random_value", "resolve_property", "resolve_ref"]


def definitions(schema: dict[str, Any]) -> dict[str, Any]:
    """The named subschemas a schema's `$ref`s point to (`$defs`, or draft-7's `definitions`)."""
    return schema.get("$defs") or schema.get("definitions") or {}


def resolve_ref(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """The subschema a `$ref` names, followed until it is not a `$ref` (an unknown or circular name: `{}`)."""
    seen: set[str] = set()
    while "$ref" in schema:
        name = str(schema["$ref"]).split("/")[-1]
        if name in seen:
            return {}
        seen.add(name)
        schema = defs.get(name, {})
    return schema


def resolve_property(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """A property's schema as a form or an attack reads it: its `$ref` followed, and an Optional[...] (anyOf/oneOf
    whose only non-null option is one schema) replaced by that option, merged over the property's own keys."""
    schema = resolve_ref(schema, defs)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [resolve_property(o, defs) for o in schema[key] if o.get("type") != "null"]
            if len(options) == 1:
                return {**{k: v for k, v in schema.items() if k != key}, **options[0]}
    return schema


def random_value(schema: dict[str, Any], rng: random.Random, defs: dict[str, Any] | None = None) -> Any:
    """A value that satisfies a (simple) JSON Schema: enums, types, anyOf, objects, arrays."""
    defs = defs if defs is not None else definitions(schema)
    if "$ref" in schema:
        return random_value(resolve_ref(schema, defs), rng, defs)
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
