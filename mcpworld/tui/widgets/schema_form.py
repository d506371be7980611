"""A form generated from a tool's JSON Schema: one compact row per property.

Covers what tool schemas use in practice (strings, numbers, booleans, enums, Optional[...] as anyOf with
null, $ref to $defs); anything richer (arrays, objects) is typed as JSON in its field. Empty optional
fields are left out of the arguments, so the server applies its defaults.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.css.query import NoMatches
from textual.widgets import Input, Label, Select, Static

from mcpworld.core.schemas import definitions, resolve_property
from mcpworld.tui.errors import UserError


class FormError(UserError, ValueError):
    """A field's value is missing or cannot be parsed; the message names the field."""


@dataclass
class Field:
    name: str
    kind: str  # string | integer | number | boolean | enum | json
    required: bool
    schema: dict[str, Any]
    enum: list[Any] | None = None

    @property
    def hint(self) -> str:
        bits = [self.kind if self.kind != "enum" else "choice"]
        if "default" in self.schema:
            bits.append(f"default {json.dumps(self.schema['default'])}")
        if self.schema.get("format"):
            bits.append(self.schema["format"])
        return ", ".join(bits)


def fields_of(schema: dict[str, Any]) -> list[Field]:
    """The form's fields, in the schema's property order."""
    defs = definitions(schema)
    required = set(schema.get("required") or [])
    out = []
    for name, raw in (schema.get("properties") or {}).items():
        prop = resolve_property(raw if isinstance(raw, dict) else {}, defs)
        kind = prop.get("type")
        if isinstance(kind, list):
            kinds = [k for k in kind if k != "null"]
            kind = kinds[0] if len(kinds) == 1 else None
        if "enum" in prop:
            out.append(Field(name, "enum", name in required, prop, list(prop["enum"])))
        elif kind in ("string", "integer", "number", "boolean"):
            out.append(Field(name, kind, name in required, prop))
        else:
            out.append(Field(name, "json", name in required, prop))
    return out


class SchemaForm(VerticalScroll):
    """Inputs for one tool's arguments; `values()` turns them into a JSON object (or raises FormError)."""

    def __init__(self, schema: dict[str, Any] | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.schema = schema or {}
        self.fields = fields_of(self.schema)

    def compose(self) -> ComposeResult:
        if not self.fields:
            yield Static("This tool takes no arguments.", classes="empty")
        for i, f in enumerate(self.fields):
            with Horizontal(classes="row"):
                yield Label(("*" if f.required else " ") + f.name[:17], markup=False)
                yield self._widget(f, f"field-{i}")

    def widget_for(self, name: str) -> Input | Select:
        """The input of the property `name` (KeyError if the schema has none)."""
        index = next((i for i, f in enumerate(self.fields) if f.name == name), None)
        if index is None:
            raise KeyError(name)
        try:
            return self.query_one(f"#field-{index}")  # type: ignore[return-value]
        except NoMatches:
            raise FormError("the form is still being built; try again") from None

    def _widget(self, f: Field, wid: str) -> Input | Select:
        placeholder = f"{f.hint}" + ("" if f.required else " (optional)")
        if f.kind == "enum":
            options = [(json.dumps(v) if not isinstance(v, str) else v, i) for i, v in enumerate(f.enum or [])]
            return Select(options, id=wid, prompt=placeholder, compact=True, allow_blank=True)
        if f.kind == "boolean":
            return Select([("true", True), ("false", False)], id=wid, prompt=placeholder, compact=True)
        input_type = {"integer": "integer", "number": "number"}.get(f.kind, "text")
        return Input(id=wid, placeholder=placeholder, type=input_type, compact=True)  # type: ignore[arg-type]

    def values(self) -> dict[str, Any]:
        """The arguments as a dict; empty optional fields are omitted."""
        out: dict[str, Any] = {}
        for f in self.fields:
            widget = self.widget_for(f.name)
            if isinstance(widget, Select):
                if widget.value is Select.NULL:
                    if f.required:
                        raise FormError(f"{f.name} is required: pick a value")
                    continue
                out[f.name] = (f.enum or [])[widget.value] if f.kind == "enum" else widget.value  # type: ignore[index]
                continue
            text = widget.value.strip() if isinstance(widget, Input) else ""
            if not text:
                if f.required:
                    raise FormError(f"{f.name} is required")
                continue
            out[f.name] = self._parse(f, text)
        return out

    @staticmethod
    def _parse(f: Field, text: str) -> Any:
        try:
            if f.kind == "integer":
                return int(text)
            if f.kind == "number":
                return float(text)
            if f.kind == "json":
                return json.loads(text)
        except ValueError:
            raise FormError(f"{f.name}: {text!r} is not a valid {f.kind}"
                            + (" (type JSON, e.g. [1, 2] or {\"a\": 1})" if f.kind == "json" else "")) from None
        return text

    def set_values(self, values: dict[str, Any]) -> None:
        """Fill the form from an arguments object (unknown keys are ignored)."""
        for f in self.fields:
            widget = self.widget_for(f.name)
            value = values.get(f.name)
            if isinstance(widget, Select):
                if f.name not in values:
                    widget.clear()
                elif f.kind == "enum" and value in (f.enum or []):
                    widget.value = (f.enum or []).index(value)
                elif f.kind == "boolean" and isinstance(value, bool):
                    widget.value = value
            elif isinstance(widget, Input):
                if f.name not in values or value is None:
                    widget.value = ""
                else:
                    widget.value = value if f.kind == "string" and isinstance(value, str) else json.dumps(value)
