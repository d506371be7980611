"""One way to define a tool for every mcpworld server: a typed function whose first parameter is its context.

The context is what the call acts on (a world's database `Session`, a SWE episode, a world-model server); the other
parameters become the tool's arguments: JSON Schema from their type hints (`Annotated[..., Field(...)]` for
descriptions and bounds), validation and argument errors from the same pydantic model, the description from the
docstring unless `@tool(description=...)` gives the text agents were trained on.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from enum import Enum
from typing import Any

import mcp_types as types
from pydantic import BaseModel, ConfigDict, ValidationError, create_model
from pydantic.json_schema import SkipJsonSchema

# `x: str | Absent = None`: an argument that may be left out, advertised as a plain string (not "string or null").
Absent = SkipJsonSchema[None]


@dataclass(frozen=True)
class ToolMeta:
    """What the `tool` decorator records about a function."""

    name: str
    writes: bool
    destructive: bool
    idempotent: bool
    title: str | None = None
    description: str | None = None  # None: the docstring


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    writes: bool = False,
    destructive: bool | None = None,
    idempotent: bool | None = None,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
) -> Any:
    """Mark a function as a tool.

    `writes=False` advertises readOnlyHint; a writing tool is destructive unless said otherwise (the MCP
    default), and idempotent only when declared.
    """

    def mark(f: Callable[..., Any]) -> Callable[..., Any]:
        f.__mcpworld_tool__ = ToolMeta(  # type: ignore[attr-defined]
            name=name or f.__name__,
            writes=writes,
            destructive=writes if destructive is None else destructive,
            idempotent=(not writes) if idempotent is None else idempotent,
            title=title,
            description=description,
        )
        return f

    return mark(fn) if fn is not None else mark


class ArgumentError(ValueError):
    """The arguments did not match the tool's schema; the message names every bad field."""


def _shown_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON Schema as a tool's inputSchema: no model title (a raw tool's own schema keeps its title: an
    AWM import shows FastApiMCP's `<tool>Arguments`), no `null` default a type cannot hold."""
    schema = model.model_json_schema()
    if "title" in schema and schema["title"] in (model.__name__, model.model_config.get("title")):
        del schema["title"]
    for prop in (schema.get("properties") or {}).values():
        if "default" in prop and prop["default"] is None and "type" in prop and "null" not in prop["type"]:
            del prop["default"]  # an `Absent` argument: left out means None, which the schema need not show
    return schema


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    fn: Callable[..., Any]
    meta: ToolMeta
    args_model: type[BaseModel]

    @property
    def input_schema(self) -> dict[str, Any]:
        return _shown_schema(self.args_model)

    def mcp_tool(self) -> types.Tool:
        return types.Tool(
            name=self.name,
            title=self.meta.title,
            description=self.description,
            input_schema=self.input_schema,
            annotations=types.ToolAnnotations(
                read_only_hint=not self.meta.writes,
                destructive_hint=self.meta.destructive if self.meta.writes else None,
                idempotent_hint=self.meta.idempotent,
                open_world_hint=False,
            ),
        )

    def parse(self, arguments: dict[str, Any] | None) -> dict[str, Any]:
        """Validate arguments against the schema; raise ArgumentError naming each bad field."""
        try:
            parsed = self.args_model.model_validate(arguments or {})
        except ValidationError as exc:
            raise ArgumentError(f"invalid arguments for {self.name}: {_problems(exc, arguments or {})}") from None
        return {name: getattr(parsed, name) for name in self.args_model.model_fields}


def _where(loc: tuple[Any, ...], arguments: Any) -> str:
    """The argument path of an error, without pydantic's union-member tags (`timeout.constrained-int`)."""
    parts: list[str] = []
    value = arguments
    for part in loc:
        if isinstance(value, dict):
            parts.append(str(part))
            value = value.get(part)
        elif isinstance(value, list) and isinstance(part, int):
            parts.append(str(part))
            value = value[part] if 0 <= part < len(value) else None
        elif not parts:
            parts.append(str(part))
        # else: the name of the union member that was tried, not a place in the arguments
    return ".".join(parts) or "(arguments)"


def _problems(exc: ValidationError, arguments: dict[str, Any]) -> str:
    """Each bad field once with what is wrong; for an optional argument, not also "should be None"."""
    found: dict[str, list[str]] = {}
    for e in exc.errors():
        found.setdefault(_where(e["loc"], arguments), []).append(e["msg"])
    for where, messages in found.items():
        kept = [m for m in messages if m != "Input should be None"]
        found[where] = list(dict.fromkeys(kept or messages))
    return "; ".join(f"{where}: {message}" for where, messages in found.items() for message in messages)


def build_tool(fn: Callable[..., Any]) -> ToolSpec:
    """Build a ToolSpec from a function decorated with `@tool`."""
    meta: ToolMeta | None = getattr(fn, "__mcpworld_tool__", None)
    if meta is None:
        raise TypeError(f"{fn.__qualname__} is not marked with @tool")
    hints = typing.get_type_hints(fn, include_extras=True)
    params = list(inspect.signature(fn).parameters.values())
    if not params:
        raise TypeError(f"tool {meta.name}: the first parameter must be the call's context (e.g. the episode)")
    fields: dict[str, Any] = {}
    for p in params[1:]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TypeError(f"tool {meta.name}: *args/**kwargs cannot be described as a schema")
        if p.name not in hints:
            raise TypeError(f"tool {meta.name}: parameter {p.name!r} needs a type hint")
        default = ... if p.default is inspect.Parameter.empty else p.default
        fields[p.name] = (hints[p.name], default)
    model = create_model(  # type: ignore[call-overload]
        f"{meta.name}_arguments", __config__=ConfigDict(extra="forbid"), **fields
    )
    description = meta.description or inspect.cleandoc(fn.__doc__ or "").strip() or meta.name
    return ToolSpec(name=meta.name, description=description, fn=fn, meta=meta, args_model=model)


_PLAIN = frozenset({str, int, float, bool, type(None)})


def to_jsonable(value: Any) -> Any:
    """Tool results as JSON: models dumped, dates ISO-formatted, containers walked."""
    if type(value) in _PLAIN:  # most values of a row: answered before the isinstance ladder
        return value
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {str(k): v if type(v) in _PLAIN else to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, Enum):
        return value.value
    return value
