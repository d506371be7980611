"""JSON-Schema `$ref`s and Optional[...] (mcpworld/core/schemas.py): the one reading every layer shares."""

from __future__ import annotations

from mcpworld.core.schemas import definitions, resolve_property, resolve_ref

DEFS = {"Seat": {"type": "string", "enum": ["economy", "business"]}, "Alias": {"$ref": "#/$defs/Seat"},
        "Loop": {"$ref": "#/$defs/Loop"}}


def test_refs_are_followed_to_their_target() -> None:
    assert resolve_ref({"$ref": "#/$defs/Alias"}, DEFS) == DEFS["Seat"]
    assert resolve_ref({"$ref": "#/$defs/Missing"}, DEFS) == {}
    assert resolve_ref({"$ref": "#/$defs/Loop"}, DEFS) == {}  # circular: nothing, never a hang
    assert resolve_ref({"type": "integer"}, DEFS) == {"type": "integer"}


def test_an_optional_property_reads_as_its_one_option() -> None:
    prop = {"anyOf": [{"$ref": "#/$defs/Seat"}, {"type": "null"}], "default": None, "description": "cabin"}
    assert resolve_property(prop, DEFS) == {"default": None, "description": "cabin", **DEFS["Seat"]}
    union = {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    assert resolve_property(union, DEFS) == union  # a real union stays one


def test_definitions_come_from_defs_or_draft7_definitions() -> None:
    assert definitions({"$defs": DEFS}) is DEFS
    assert definitions({"definitions": DEFS}) is DEFS
    assert definitions({}) == {}
