"""The tree is the architecture: each package imports only from the layers below it (docs/architecture.md)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "mcpworld"

# Lowest first. Packages in one layer are siblings and never import each other.
LAYERS: list[set[str]] = [
    {"core"},
    {"worlds", "swe"},
    {"registry"},
    {"agent"},
    {"trainer"},
    {"worldmodels", "synth", "tui"},
    {"app"},
]
LEVEL = {name: i for i, layer in enumerate(LAYERS) for name in layer}
FACADES = {"world": "worlds",  # mcpworld/world.py: the short import for world authors, part of the worlds layer
           "__version__": "core"}  # `from mcpworld import __version__`


def _package(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "mcpworld" or len(parts) < 2:
        return None
    return FACADES.get(parts[1], parts[1])


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node that can run: the bodies of `if TYPE_CHECKING:` are left out (annotations only)."""
    out, stack = [], [tree]
    while stack:
        node = stack.pop()
        out.append(node)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack += node.orelse
            continue
        stack += list(ast.iter_child_nodes(node))
    return out


def _imports(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
            if node.module == "mcpworld":
                out += [(node.lineno, f"mcpworld.{a.name}") for a in node.names]
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
    return out


def _sources() -> list[Path]:
    return [p for p in PACKAGE.rglob("*.py") if "data" not in p.relative_to(PACKAGE).parts]


def test_every_package_has_a_layer() -> None:
    top = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    assert top == set(LEVEL), f"packages without a layer: {top - set(LEVEL)}; layers without a package: " \
                              f"{set(LEVEL) - top}"


def test_imports_point_down_the_layers() -> None:
    wrong = []
    for path in _sources():
        rel = path.relative_to(PACKAGE)
        here = FACADES.get(rel.stem) if len(rel.parts) == 1 else rel.parts[0]
        if here is None:  # mcpworld/__init__.py
            continue
        for line, module in _imports(path):
            there = _package(module)
            if there is None or there == here:
                continue
            if there not in LEVEL:
                wrong.append(f"{rel}:{line}: imports {module}, which is in no layer")
            elif LEVEL[there] >= LEVEL[here]:
                wrong.append(f"{rel}:{line}: {here} (layer {LEVEL[here]}) imports {module} (layer {LEVEL[there]})")
    assert not wrong, "imports against the layering:\n" + "\n".join(wrong)


def test_no_private_names_across_packages() -> None:
    wrong = []
    for path in _sources():
        rel = path.relative_to(PACKAGE)
        here = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and _package(node.module) not in (None, here):
                wrong += [f"{rel}:{node.lineno}: {node.module}.{a.name}" for a in node.names
                          if a.name.startswith("_")]
    assert not wrong, "private names imported across packages:\n" + "\n".join(wrong)


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_import_cycles() -> None:
    """Between modules, lazy imports inside functions included: a cycle means two modules are one in disguise."""
    modules = {_module(p): p for p in _sources()}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for _, module in _imports(path):
            targets |= {module} if module in modules else set()
        for node in _runtime_nodes(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets |= {f"{node.module}.{a.name}" for a in node.names} & set(modules)
        graph[name] = targets - {name}
    cycles, seen = [], set()
    for start in graph:  # a cycle through `start`: a path from one of its imports back to it
        stack, parents = [start], {start: None}
        while stack:
            node = stack.pop()
            for nxt in graph[node]:
                if nxt == start:
                    path, at = [start], node
                    while at != start:
                        path.append(at)
                        at = parents[at]
                    key = frozenset(path)
                    if key not in seen:
                        seen.add(key)
                        cycles.append(" -> ".join([start, *reversed(path[1:]), start]))
                elif nxt not in parents:
                    parents[nxt] = node
                    stack.append(nxt)
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


TYPED = ["core", "worlds/reference.py", "worlds/answers.py", "worlds/world.py", "world.py"]


def test_the_kernel_type_checks() -> None:
    """mypy over the core and the reward code: what every layer relies on must not drift from its types."""
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "mypy", "--ignore-missing-imports", "--follow-imports=silent",
                             "--no-error-summary", *(str(PACKAGE / t) for t in TYPED)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_private_attributes_across_packages() -> None:
    """`obj._name` on another package's object: a public name says the API is meant to be used."""
    import re

    private = re.compile(r"\b(?!self\b|cls\b)(\w+)\._(?!_)\w+\(")
    own_defs: dict[str, set[str]] = {}
    for path in _sources():
        rel = path.relative_to(PACKAGE)
        here = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        own_defs.setdefault(here, set()).update(re.findall(r"def (_\w+)\(", path.read_text()))
    wrong = []
    for path in _sources():
        rel = path.relative_to(PACKAGE)
        here = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for m in private.finditer(line):
                name = m.group(0).split(".", 1)[1].rstrip("(")
                if name not in own_defs[here] and any(name in defs for pkg, defs in own_defs.items() if pkg != here):
                    wrong.append(f"{rel}:{n}: {m.group(0)}")
    assert not wrong, "private methods of other packages called:\n" + "\n".join(wrong)
