"""τ² tools as mcpworld tools: raw arguments in, τ²'s exact text out, errors that keep their partial writes.

Descriptions are read at import time from the docstrings of the user's own τ² source (`src/tau2/domains/<domain>/
tools.py` beside the data folder), never copied into this project; without that source a short description of our
own is used. Argument schemas are our own, written from τ²'s signatures (`airline_schemas`): τ² only advertises
them, it does not validate against them, and neither do we.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlmodel import Session

from mcpworld.synth.importers.tau2.docs import Docs, render
from mcpworld.worlds.world import KeptError, raw_tool


def run_tool(toolkit: type, name: str, db: Session, arguments: dict[str, Any]) -> str:
    """One τ² call on the episode's records: its result text, or `KeptError("Error: ...")` after its writes."""
    docs = Docs(db)
    try:
        value = getattr(toolkit(docs), name)(**arguments)
    except Exception as exc:  # τ²: any exception is the call's result text, and nothing is undone
        docs.flush()
        raise KeptError(f"Error: {exc}") from None
    docs.flush()
    return render(value)


def make_tools(run: Callable[[str, Session, dict[str, Any]], str], definitions: list[dict[str, Any]],
               kinds: dict[str, str]) -> list[Any]:
    """The world's tools: one raw tool per definition (`name`, `description`, `inputSchema`), each answered by
    `run(name, db, arguments)`."""
    out = []
    for d in definitions:
        name = d["name"]

        def fn(db: Session, arguments: dict[str, Any], _name: str = name) -> str:
            return run(_name, db, arguments)

        out.append(raw_tool(name, d["description"], d["inputSchema"], fn, writes=kinds[name] == "write"))
    return out


def read_docstrings(source: Path) -> dict[str, tuple[str, dict[str, str]]]:
    """The tools' docstrings in a τ² toolkit source file: name -> (description, {argument: description}).

    Only methods decorated `@is_tool(...)` count. The description is the docstring up to its `Args:` section
    (τ²'s short and long description); argument descriptions are that section's `name: text` entries.
    """
    tree = ast.parse(source.read_text(encoding="utf-8"))
    found: dict[str, tuple[str, dict[str, str]]] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        if not any(isinstance(d, ast.Call) and getattr(d.func, "id", "") == "is_tool" for d in node.decorator_list):
            continue
        doc = inspect.cleandoc(ast.get_docstring(node, clean=False) or "")
        head, args, section = [], {}, None
        current = None
        for line in doc.splitlines():
            stripped = line.strip()
            if stripped.rstrip(":") in {"Args", "Returns", "Raises", "Example", "Examples"} and stripped.endswith(":"):
                section = stripped[:-1]
                continue
            if section is None:
                head.append(line)
            elif section == "Args" and stripped:
                indent = len(line) - len(line.lstrip())
                name, sep, text = stripped.partition(":")
                if sep and indent <= 4 and name.isidentifier():
                    current = name
                    args[name] = text.strip()
                elif current:
                    args[current] += " " + stripped
        found[node.name] = ("\n".join(head).strip(), args)
    return found


def definitions(schemas: dict[str, dict[str, Any]], source: Path | None) -> tuple[list[dict[str, Any]], bool]:
    """Tool definitions for a domain: τ²'s docstrings where its source is at hand, else our own short words.
    Returns them and whether τ²'s docstrings were used."""
    docs = read_docstrings(source) if source is not None and source.is_file() else {}
    out = []
    for name, schema in schemas.items():
        description, args = docs.get(name, ("", {}))
        properties = {k: ({**v, "description": args[k]} if args.get(k) else v)
                      for k, v in schema.get("properties", {}).items()}
        out.append({"name": name, "description": description or name.replace("_", " ").capitalize() + ".",
                    "inputSchema": {**schema, "properties": properties}})
    return out, bool(docs)


def _string(enum: list[str] | None = None) -> dict[str, Any]:
    return {"type": "string", **({"enum": enum} if enum else {})}


def _obj(**props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(props)}


def _array(item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": item}


INTEGER = {"type": "integer"}
CABIN = _string(["business", "economy", "basic_economy"])

AIRLINE_SCHEMAS: dict[str, dict[str, Any]] = {
    "book_reservation": _obj(
        user_id=_string(), origin=_string(), destination=_string(), flight_type=_string(["round_trip", "one_way"]),
        cabin=CABIN, flights=_array(_obj(flight_number=_string(), date=_string())),
        passengers=_array(_obj(first_name=_string(), last_name=_string(), dob=_string())),
        payment_methods=_array(_obj(payment_id=_string(), amount=INTEGER)), total_baggages=INTEGER,
        nonfree_baggages=INTEGER, insurance=_string(["yes", "no"])),
    "calculate": _obj(expression=_string()),
    "cancel_reservation": _obj(reservation_id=_string()),
    "get_reservation_details": _obj(reservation_id=_string()),
    "get_user_details": _obj(user_id=_string()),
    "list_all_airports": _obj(),
    "search_direct_flight": _obj(origin=_string(), destination=_string(), date=_string()),
    "search_onestop_flight": _obj(origin=_string(), destination=_string(), date=_string()),
    "send_certificate": _obj(user_id=_string(), amount=INTEGER),
    "transfer_to_human_agents": _obj(summary=_string()),
    "update_reservation_baggages": _obj(reservation_id=_string(), total_baggages=INTEGER, nonfree_baggages=INTEGER,
                                        payment_id=_string()),
    "update_reservation_flights": _obj(reservation_id=_string(), cabin=CABIN,
                                       flights=_array(_obj(flight_number=_string(), date=_string())),
                                       payment_id=_string()),
    "update_reservation_passengers": _obj(
        reservation_id=_string(), passengers=_array(_obj(first_name=_string(), last_name=_string(), dob=_string()))),
    "get_flight_status": _obj(flight_number=_string(), date=_string()),
}


ADDRESS = {k: _string() for k in ("address1", "address2", "city", "state", "country", "zip")}
ITEMS = _array(_string())

RETAIL_SCHEMAS: dict[str, dict[str, Any]] = {
    "calculate": _obj(expression=_string()),
    "cancel_pending_order": _obj(order_id=_string(), reason=_string()),
    "exchange_delivered_order_items": _obj(order_id=_string(), item_ids=ITEMS, new_item_ids=ITEMS,
                                           payment_method_id=_string()),
    "find_user_id_by_name_zip": _obj(first_name=_string(), last_name=_string(), zip=_string()),
    "find_user_id_by_email": _obj(email=_string()),
    "get_order_details": _obj(order_id=_string()),
    "get_product_details": _obj(product_id=_string()),
    "get_item_details": _obj(item_id=_string()),
    "get_user_details": _obj(user_id=_string()),
    "list_all_product_types": _obj(),
    "modify_pending_order_address": _obj(order_id=_string(), **ADDRESS),
    "modify_pending_order_items": _obj(order_id=_string(), item_ids=ITEMS, new_item_ids=ITEMS,
                                       payment_method_id=_string()),
    "modify_pending_order_payment": _obj(order_id=_string(), payment_method_id=_string()),
    "modify_user_address": _obj(user_id=_string(), **ADDRESS),
    "return_delivered_order_items": _obj(order_id=_string(), item_ids=ITEMS, payment_method_id=_string()),
    "transfer_to_human_agents": _obj(summary=_string()),
}
