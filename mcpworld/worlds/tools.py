"""Turn a typed tool function into an MCP tool: JSON Schema from hints, description from the docstring.

The first parameter of every world tool is the episode's `Session`; the rest become the tool's arguments.
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

from mcpworld.worlds.world import ToolMeta


class ArgumentError(ValueError):
    """The arguments did not match the tool's schema; the message names every bad field."""


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    fn: Callable[..., Any]
    meta: ToolMeta
    args_model: type[BaseModel]

    @property
    def input_schema(self) -> dict[str, Any]:
        schema = self.args_model.model_json_schema()
        schema.pop("title", None)
        return schema

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
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or '(arguments)'}: {e['msg']}" for e in exc.errors()
            )
            raise ArgumentError(f"invalid arguments for {self.name}: {problems}") from None
        return {name: getattr(parsed, name) for name in self.args_model.model_fields}


def build_tool(fn: Callable[..., Any]) -> ToolSpec:
    """Build a ToolSpec from a function decorated with `@tool`."""
    meta: ToolMeta | None = getattr(fn, "__mcpworld_tool__", None)
    if meta is None:
        raise TypeError(f"{fn.__qualname__} is not marked with @tool")
    hints = typing.get_type_hints(fn, include_extras=True)
    params = list(inspect.signature(fn).parameters.values())
    if not params:
        raise TypeError(f"tool {meta.name}: the first parameter must be the episode Session")
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
    description = inspect.cleandoc(fn.__doc__ or "").strip() or meta.name
    return ToolSpec(name=meta.name, description=description, fn=fn, meta=meta, args_model=model)


def to_jsonable(value: Any) -> Any:
    """Tool results as JSON: models dumped, dates ISO-formatted, containers walked."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, Enum):
        return value.value
    return value
