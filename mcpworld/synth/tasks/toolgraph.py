"""The tool graph: which tool's output can feed which tool's parameter, and a pool of real values.

Nodes come from the tool schemas; a value pool from the seeded state; outputs from the SQLModel columns a
tool is annotated to return and from actually calling the read-only tools on forks. An edge A -> B when an
output name of A is a parameter name of B (`customer_id`, or `id` inside a `customer`).
"""

from __future__ import annotations

import json
import random
import typing
from dataclasses import dataclass, field
from typing import Any

from mcpworld.core.schemas import definitions, resolve_property
from mcpworld.synth.tasks.names import aliases, tool_noun
from mcpworld.synth.tasks.results import empty, occurrences, scalar
from mcpworld.worlds.runtime import WorldRuntime

QUERY_PARAMS = ("q", "query", "search", "keyword", "keywords", "term", "text", "summary_contains")


@dataclass
class Node:
    name: str
    description: str
    params: dict[str, dict[str, Any]]
    required: list[str]
    read_only: bool


@dataclass(frozen=True)
class Link:
    """Edge label: B's `param` is fed by output name `field`; observed in a real result or only inferred."""

    param: str
    field: str
    observed: bool
    by_model: bool = False


@dataclass
class Probe:
    tool: str
    args: dict[str, Any]
    result: Any


@dataclass
class ToolGraph:
    nodes: dict[str, Node]
    edges: dict[str, dict[str, list[Link]]] = field(default_factory=dict)
    pool: dict[str, list[Any]] = field(default_factory=dict)
    outputs: dict[str, set[str]] = field(default_factory=dict)
    observed: dict[str, set[str]] = field(default_factory=dict)
    probes: list[Probe] = field(default_factory=list)

    def add_pool(self, name: str, value: Any, limit: int = 60) -> None:
        if not scalar(value) or (isinstance(value, str) and (not value.strip() or len(value) > 200)):
            return
        bucket = self.pool.setdefault(name, [])
        if value not in bucket and len(bucket) < limit:
            bucket.append(value)

    def link(self) -> None:
        """Edges A -> B for every output name of A that is a parameter name of B."""
        self.edges = {a: {} for a in self.nodes}
        for a in self.nodes:
            outs = self.outputs.get(a, set())
            for b, node in self.nodes.items():
                if a == b:
                    continue
                for param in sorted(node.params, key=lambda p: p not in node.required):
                    hit = next((n for n in sorted(link_names(param)) if n in outs), None) or \
                        next((n for n in sorted(outs) if suffix_match(n, param)), None)
                    if hit is not None:
                        self.edges[a].setdefault(b, []).append(
                            Link(param, hit, hit in self.observed.get(a, set())))

    def summary(self) -> dict[str, Any]:
        return {"tools": len(self.nodes), "edges": sum(len(v) for v in self.edges.values()),
                "edge_list": [{"from": a, "to": b, "param": lk.param, "field": lk.field, "observed": lk.observed,
                               "by_model": lk.by_model}
                              for a, bs in self.edges.items() for b, links in bs.items() for lk in links]}


def suffix_match(name: str, param: str) -> bool:
    """`spreadsheet_id` can feed `sheet_id`: compound nouns often keep only their last word."""
    return param.endswith("_id") and len(param) >= 6 and name.endswith(param) and name != param


def link_names(param: str) -> set[str]:
    """Output names that can feed `param` (`video_ids` also takes a `video_id`)."""
    out = {param}
    if param.endswith("_ids"):
        out.add(param[:-1])
    return out


def _return_columns(fn: Any) -> tuple[str, list[str]] | None:
    """The table and columns of the SQLModel a tool is annotated to return (or a list of)."""
    try:
        hint = typing.get_type_hints(fn).get("return")
    except Exception:
        return None
    if typing.get_origin(hint) in (list, typing.List):  # noqa: UP006
        args = typing.get_args(hint)
        hint = args[0] if args else None
    table = getattr(hint, "__table__", None)
    if table is None:
        return None
    return str(table.name), [c.name for c in table.columns]


def state_rows(runtime: WorldRuntime, episode: Any) -> dict[str, list[Any]]:
    """Rows of every table; imported worlds' JSON payloads are decoded (dict tables keep their keys)."""
    layout: dict[str, str] = {}
    if "aw_layout" in runtime.metadata.tables:
        layout = {r["tbl"]: r["shape"] for r in runtime.table_rows(episode, "aw_layout", 1000)}
    out: dict[str, list[Any]] = {}
    for table in runtime.table_names:
        if table == "aw_layout":
            continue
        rows = runtime.table_rows(episode, table, 500)
        if table not in layout:
            out[table] = rows
            continue
        decoded = []
        for row in rows:
            try:
                value = json.loads(row["data"])
            except (TypeError, ValueError):
                continue
            decoded.append({"__key__": row["key"], "__value__": value} if layout[table] == "dict" else value)
        out[table] = decoded
    return out


def build_graph(runtime: WorldRuntime, rng: random.Random, probes_per_tool: int = 3) -> ToolGraph:
    """Nodes from the schemas, a value pool from the seeded state, outputs from annotations and probes."""
    nodes = {}
    for spec in runtime.tools.values():
        schema = spec.input_schema
        nodes[spec.name] = Node(spec.name, spec.description.splitlines()[0] if spec.description else spec.name,
                                _resolve_props(schema), list(schema.get("required", [])), not spec.meta.writes)
    graph = ToolGraph(nodes)
    episode = runtime.fork()
    for table, rows in state_rows(runtime, episode).items():
        for row in rows:
            if isinstance(row, dict) and "__key__" in row:
                for name in aliases("id", table) | aliases("name", table) | {"name"}:
                    graph.add_pool(name, row["__key__"])
                row = row["__value__"]
            for occ in occurrences(row if isinstance(row, list) else [row], table):
                for name in occ.names:
                    graph.add_pool(name, occ.value)
    episode.close()
    for name, spec in runtime.tools.items():
        found = _return_columns(spec.fn)
        if found:
            table, columns = found
            graph.outputs.setdefault(name, set()).update(n for c in columns for n in aliases(c, table))
    order = sorted(nodes.values(), key=lambda n: len(n.required))
    for _round in range(2):  # a second round uses values the first round discovered
        for node in order:
            if not node.read_only:
                continue
            for _ in range(probes_per_tool if _round == 0 else 1):
                args = fill_args(node, graph.pool, rng)
                if args is None:
                    break
                result = call_once(runtime, node.name, args)
                if result is None:
                    continue
                graph.probes.append(Probe(node.name, args, result))
                for occ in occurrences(result, tool_noun(node.name)):
                    graph.outputs.setdefault(node.name, set()).update(occ.names)
                    graph.observed.setdefault(node.name, set()).update(occ.names)
                    for n in occ.names:
                        graph.add_pool(n, occ.value)
    graph.link()
    return graph


def _resolve_props(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each parameter's schema with its `$ref` followed and an Optional[...] unwrapped (enums, types, items)."""
    defs = definitions(schema)
    return {name: resolve_property(prop, defs) for name, prop in (schema.get("properties") or {}).items()}


def call_once(runtime: WorldRuntime, tool: str, args: dict[str, Any], seed: int = 0) -> Any:
    """One call on a fresh fork (seed 0's data, `seed`'s generator); None for an error or an empty result."""
    episode = runtime.fork(seed=seed, vary=False)
    try:
        result = runtime.call(episode, tool, args)
    finally:
        episode.close()
    if result.error is not None or empty(result.value) or error_value(result.value):
        return None
    return result.value


def error_value(value: Any) -> bool:
    return isinstance(value, dict) and set(value) <= {"error", "meta"} and "error" in value


def fill_args(node: Node, pool: dict[str, list[Any]], rng: random.Random,
              given: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """Required arguments from known values (or enums); None when one cannot be filled honestly."""
    args = dict(given or {})
    for param in node.required:
        if param in args:
            continue
        schema = node.params.get(param, {})
        value = _pick(param, schema, pool, rng)
        if value is None:
            return None
        args[param] = value
    return args


def _pick(param: str, schema: dict[str, Any], pool: dict[str, list[Any]], rng: random.Random) -> Any:
    if "enum" in schema:
        return rng.choice(schema["enum"])
    names = sorted(link_names(param)) + sorted(k for k in pool if suffix_match(k, param))
    for name in names:
        options = [v for v in pool.get(name, []) if _fits(v, schema)]
        if options:
            value = rng.choice(options)
            return [value] if schema.get("type") == "array" else value
    if param in QUERY_PARAMS or param.endswith("_contains"):
        words = [w.strip(".,:;()'\"") for key in ("title", "name", "summary") for v in pool.get(key, [])
                 if isinstance(v, str) for w in v.split()]
        words = [w for w in words if len(w) >= 5 and w.isalpha()]
        return rng.choice(words) if words else None
    return None


def _fits(value: Any, schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    if schema.get("type") == "array":
        kind = (schema.get("items") or {}).get("type")
    if kind == "integer":
        return isinstance(value, int) or (isinstance(value, str) and value.lstrip("-").isdigit())
    if kind == "number":
        return isinstance(value, (int, float))
    if kind == "string":
        return isinstance(value, str) or isinstance(value, int)
    return True
