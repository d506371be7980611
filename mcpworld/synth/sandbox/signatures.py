"""Typed proxy signatures from JSON Schema, so a tool whose code lives in a worker still validates here.

`build_tool` derives a tool's schema from type hints; a proxy gets hints rebuilt from the real tool's JSON
Schema (enums as Literal, formats as dates, optional as `| None`), so the server refuses bad arguments
with the same messages before any worker is involved.
"""

from __future__ import annotations

import inspect
import keyword
import re
from collections.abc import Callable
from datetime import date, datetime
from typing import Annotated, Any, Literal, Union

from pydantic import Field
from sqlmodel import Session

from mcpworld.core.blocking import BLOCKING_ATTR, call_abandoned
from mcpworld.core.schemas import definitions, resolve_ref
from mcpworld.worlds.world import ToolError, tool

# A backstop above the workers' own wall-clock limits (10-20 s), which stop a runaway first with a clearer message
PROXY_CALL_TIMEOUT_S = 60.0

_TYPES: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool, "object": dict[str, Any],
                          "null": type(None)}
_FORMATS: dict[str, Any] = {"date": date, "date-time": datetime}


def annotation(schema: dict[str, Any], defs: dict[str, Any] | None = None) -> Any:
    """A Python type for a JSON Schema (the subset tools use); unknown shapes become Any."""
    defs = defs or {}
    schema = resolve_ref(schema, defs)
    enum = schema.get("enum")
    if enum and all(isinstance(e, (str, int)) and not isinstance(e, bool) for e in enum):
        return Literal[tuple(enum)]  # type: ignore[valid-type]
    if "const" in schema and isinstance(schema["const"], (str, int)):
        return Literal[schema["const"]]  # type: ignore[valid-type]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [annotation(o, defs) for o in schema[key]]
            return Union[tuple(options)] if len(options) > 1 else options[0]  # noqa: UP007
    kind = schema.get("type")
    if isinstance(kind, list):
        options = [annotation({**schema, "type": k}, defs) for k in kind]
        return Union[tuple(options)] if len(options) > 1 else options[0]  # noqa: UP007
    if kind == "array":
        items = schema.get("items")
        return list[annotation(items, defs)] if items else list[Any]  # type: ignore[misc]
    if kind == "string" and schema.get("format") in _FORMATS:
        return _FORMATS[schema["format"]]
    return _TYPES.get(kind, Any)


def param_name(name: str) -> str:
    """A JSON property name as a Python parameter name (`from` -> `from_`)."""
    clean = re.sub(r"\W", "_", name)
    if not clean or clean[0].isdigit():
        clean = f"p_{clean}"
    return clean + "_" if keyword.iskeyword(clean) or clean == "db" else clean


def proxy_tool(name: str, description: str, schema: dict[str, Any], call: Callable[[Session, dict[str, Any]], Any],
               *, writes: bool, destructive: bool | None = None, idempotent: bool | None = None,
               title: str | None = None, timeout_s: float = PROXY_CALL_TIMEOUT_S) -> Callable[..., Any]:
    """A @tool named `name` whose arguments follow `schema` and whose body is `call(db, arguments)`.

    `arguments` reach `call` under their original JSON names, without the ones left unset (None). The tool
    is marked as blocking (`call` waits on a worker): a world server runs it off its event loop and gives up
    after `timeout_s` with a tool error, so one hung worker cannot freeze the other worlds in the process.
    """
    defs = definitions(schema)
    required = set(schema.get("required") or [])
    params = [inspect.Parameter("db", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Session)]
    annotations: dict[str, Any] = {"db": Session, "return": Any}
    renamed: dict[str, str] = {}
    for prop, prop_schema in (schema.get("properties") or {}).items():
        pname = param_name(prop)
        renamed[pname] = prop
        extra = {k: prop_schema[k] for k in ("pattern", "format") if k in prop_schema}
        if "default" in prop_schema and prop_schema["default"] is not None:
            extra["default"] = prop_schema["default"]
        bounds = {k: prop_schema[j] for k, j in (("ge", "minimum"), ("le", "maximum")) if j in prop_schema}
        info = Field(description=prop_schema.get("description"), json_schema_extra=extra or None, **bounds)
        hint = annotation(prop_schema, defs)
        if prop in required:
            annotations[pname] = Annotated[hint, info]
            params.append(inspect.Parameter(pname, inspect.Parameter.KEYWORD_ONLY, annotation=annotations[pname]))
        else:
            annotations[pname] = Annotated[Union[hint, None], info]  # noqa: UP007
            params.append(inspect.Parameter(pname, inspect.Parameter.KEYWORD_ONLY, default=None,
                                            annotation=annotations[pname]))

    def proxy(db: Session, **kwargs: Any) -> Any:
        value = call(db, {renamed[k]: v for k, v in kwargs.items() if v is not None})
        if call_abandoned():  # the server already answered "timed out": the error rolls the late changes back
            raise ToolError(f"{name} answered after its call had timed out; its changes were discarded")
        return value

    proxy.__name__ = param_name(name)
    proxy.__qualname__ = proxy.__name__
    proxy.__doc__ = description or name
    proxy.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    proxy.__annotations__ = annotations
    setattr(proxy, BLOCKING_ATTR, timeout_s)
    return tool(proxy, writes=writes, destructive=destructive, idempotent=idempotent, name=name, title=title)
