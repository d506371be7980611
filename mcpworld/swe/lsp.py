"""`lsp`: definition, references, hover, document and workspace symbols through multilspy + jedi-language-server.

One language server per workspace, started on the first `lsp` call and stopped when the episode closes. Following
SWE-Master's tool, the agent names a symbol and a 1-based line (the column is found on the line by name), and
definitions come back as the numbered source of the enclosing function or class.
"""

from __future__ import annotations

import ast
import logging
import os
import re
import shutil
import sys
import threading
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from mcpworld.swe.editor import clip, numbered
from mcpworld.swe.paths import PathRefused, resolve_path, shown

COMMANDS = ("definition", "references", "hover", "document_symbols", "workspace_symbols")
MAX_LOCATIONS = 50
MAX_SOURCE_LINES = 150
SYMBOL_KINDS = {1: "file", 2: "module", 3: "namespace", 4: "package", 5: "class", 6: "method", 7: "property",
                8: "field", 9: "constructor", 10: "enum", 11: "interface", 12: "function", 13: "variable",
                14: "constant", 15: "string", 16: "number", 17: "boolean", 18: "array", 19: "object", 20: "key",
                21: "null", 22: "enum member", 23: "struct", 24: "event", 25: "operator", 26: "type parameter"}


class LspError(ValueError):
    """A bad request or an unavailable language server; the message is shown to the agent."""


def server_binary() -> str | None:
    """jedi-language-server next to this interpreter (so it sees the same packages), else on PATH."""
    beside = Path(sys.executable).parent / "jedi-language-server"
    return str(beside) if beside.is_file() else shutil.which("jedi-language-server")


class LspSession:
    """A lazily started jedi-language-server for one workspace, driven through multilspy's sync client."""

    def __init__(self, root: Path, timeout: float = 30.0):
        self.root = root
        self.real_root = Path(os.path.realpath(root))
        self.timeout = timeout
        self._stack: ExitStack | None = None
        self._server: Any = None
        self._lock = threading.Lock()

    def _start(self) -> Any:
        if self._server is not None:
            return self._server
        try:
            from multilspy import SyncLanguageServer
            from multilspy.multilspy_config import MultilspyConfig
            from multilspy.multilspy_logger import MultilspyLogger
        except ImportError:
            raise LspError("lsp unavailable: install multilspy and jedi-language-server "
                           "(pip install multilspy jedi-language-server)") from None
        binary = server_binary()
        if binary is None:
            raise LspError("lsp unavailable: jedi-language-server is not installed (pip install jedi-language-server)")
        config = MultilspyConfig.from_dict({"code_language": "python", "server_binary": binary})
        log = MultilspyLogger()
        logging.getLogger("multilspy").setLevel(logging.WARNING)
        server = SyncLanguageServer.create(config, log, str(self.real_root), timeout=int(self.timeout))
        stack = ExitStack()
        try:
            stack.enter_context(server.start_server())
        except Exception as exc:
            stack.close()
            raise LspError(f"lsp unavailable: jedi-language-server did not start: {exc}") from None
        self._stack, self._server = stack, server
        return server

    def close(self) -> None:
        with self._lock:
            stack, self._stack, self._server = self._stack, None, None
        if stack is not None:
            try:
                stack.close()
            except Exception:  # a server that will not shut down cleanly is killed by multilspy; never raise here
                logging.getLogger(__name__).debug("lsp shutdown failed", exc_info=True)

    # -- the tool --------------------------------------------------------------------------------------------

    def run(self, command: str, file_path: str | None = None, symbol: str | None = None, line: int | None = None,
            query: str | None = None) -> str:
        """Answer one lsp command as text for the agent."""
        if command not in COMMANDS:
            raise LspError(f"Unknown lsp command {command!r}; use one of: {', '.join(COMMANDS)}")
        if command == "workspace_symbols":
            if not query:
                raise LspError("Parameter `query` is required for command: workspace_symbols.")
            with self._lock:
                found = self._start().request_workspace_symbol(query) or []
            return self._workspace_symbols(query, found)
        real, rel, label = self._file(file_path)
        if command == "document_symbols":
            with self._lock:
                symbols, _ = self._start().request_document_symbols(rel)
            return self._document_symbols(label, symbols)
        row, col, name = self._locate(real, label, symbol, line)
        with self._lock:
            server = self._start()
            if command == "definition":
                return self._definitions(name, label, row, server.request_definition(rel, row, col))
            if command == "references":
                return self._references(name, label, row, server.request_references(rel, row, col))
            hover = server.request_hover(rel, row, col)
        contents = (hover or {}).get("contents")
        text = contents.get("value", "") if isinstance(contents, dict) else str(contents or "")
        return text.strip() or f"No hover information for `{name}` at {label}:{row + 1}."

    def _file(self, file_path: str | None) -> tuple[Path, str, str]:
        try:
            real = resolve_path(self.root, file_path)
        except PathRefused as exc:
            raise LspError(str(exc).replace("`path`", "`file_path`")) from None
        label = shown(self.root, real)
        if not real.is_file():
            raise LspError(f"The path {label} is not an existing file.")
        if real.suffix not in (".py", ".pyi"):
            raise LspError(f"The lsp tool understands Python files; {label} is not one.")
        return real, str(real.relative_to(self.real_root)), label

    def _locate(self, real: Path, label: str, symbol: str | None, line: Any) -> tuple[int, int, str]:
        """0-based (row, column) of `symbol` on 1-based `line`; the last dotted part is what is looked up."""
        if not symbol:
            raise LspError("Parameter `symbol` is required: the name to look up, as written on `line`.")
        if not isinstance(line, int) or isinstance(line, bool):
            raise LspError("Parameter `line` is required: the 1-based line where `symbol` appears.")
        lines = real.read_text(encoding="utf-8", errors="replace").split("\n")
        if not 1 <= line <= len(lines):
            raise LspError(f"Invalid `line` {line}: {label} has lines 1 to {len(lines)}.")
        name = symbol.strip().split(".")[-1].strip("()")
        match = re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", lines[line - 1])
        if match is None:
            raise LspError(f"Symbol `{name}` not found on line {line} of {label}; the line reads: "
                           f"{lines[line - 1].strip()[:200]!r}")
        return line - 1, match.start(), name

    # -- formatting ------------------------------------------------------------------------------------------

    def _where(self, location: dict[str, Any]) -> tuple[Path, str, int]:
        path = Path(os.path.realpath(location.get("absolutePath") or location["uri"].removeprefix("file://")))
        return path, shown(self.root, path), int(location["range"]["start"]["line"])

    def _inside(self, path: Path) -> bool:
        return path == self.real_root or path.is_relative_to(self.real_root)

    def _definitions(self, name: str, label: str, row: int, locations: list[dict[str, Any]]) -> str:
        if not locations:
            return f"No definition found for `{name}` at {label}:{row + 1}."
        parts = [f"Definition of `{name}` (from {label}:{row + 1}): {len(locations)} location(s)"]
        for location in locations[:MAX_LOCATIONS]:
            path, where, start = self._where(location)
            if not self._inside(path):
                parts.append(f"\n{where}:{start + 1} (outside the repository)\n{_library_line(path, start)}")
                continue
            first, last, kind = enclosing(path.read_text(encoding="utf-8", errors="replace"), start + 1)
            source = path.read_text(encoding="utf-8", errors="replace").split("\n")[first - 1:last]
            note = ""
            if len(source) > MAX_SOURCE_LINES:
                source, note = source[:MAX_SOURCE_LINES], f"\n[... {last - first + 1 - MAX_SOURCE_LINES} more lines]"
            parts.append(f"\n{where}:{start + 1} ({kind}, lines {first}-{last})\n"
                         f"{numbered(chr(10).join(source), first)}{note}")
        return clip("\n".join(parts))

    def _references(self, name: str, label: str, row: int, locations: list[dict[str, Any]]) -> str:
        if not locations:
            return f"No references found for `{name}` at {label}:{row + 1}."
        out = []
        for location in sorted(locations, key=lambda x: (x.get("absolutePath", ""), x["range"]["start"]["line"])):
            path, where, start = self._where(location)
            text = _line(path, start) if self._inside(path) else ""
            out.append(f"{where}:{start + 1}:{location['range']['start']['character'] + 1}: {text.strip()}")
        more = f"\n[{len(out) - MAX_LOCATIONS} more not shown]" if len(out) > MAX_LOCATIONS else ""
        return clip(f"{len(out)} reference(s) to `{name}` (from {label}:{row + 1}):\n"
                    + "\n".join(out[:MAX_LOCATIONS]) + more)

    def _document_symbols(self, label: str, symbols: list[dict[str, Any]]) -> str:
        if not symbols:
            return f"No symbols in {label}."
        items = sorted(symbols, key=lambda s: (s["range"]["start"]["line"], -s["range"]["end"]["line"]))
        out, open_ranges = [], []  # stack of end lines of enclosing symbols
        for s in items:
            start, end = s["range"]["start"]["line"], s["range"]["end"]["line"]
            while open_ranges and start > open_ranges[-1]:
                open_ranges.pop()
            kind = SYMBOL_KINDS.get(s.get("kind", 0), "symbol")
            out.append(f"{'  ' * len(open_ranges)}{kind} {s['name']}  (lines {start + 1}-{end + 1})")
            open_ranges.append(end)
        return clip(f"Symbols in {label}:\n" + "\n".join(out))

    def _workspace_symbols(self, query: str, symbols: list[dict[str, Any]]) -> str:
        rows = []
        for s in symbols:
            path, where, start = self._where(s["location"])
            if self._inside(path):
                kind = SYMBOL_KINDS.get(s.get("kind", 0), "symbol")
                rows.append(f"{kind} {s['name']}  {where}:{start + 1}"
                            + (f"  ({s['containerName']})" if s.get("containerName") else ""))
        if not rows:
            return f'No symbols matching "{query}" in the repository.'
        return clip(f'{len(rows)} symbol(s) matching "{query}":\n' + "\n".join(rows[:MAX_LOCATIONS]))


def enclosing(source: str, line: int) -> tuple[int, int, str]:
    """(first, last, kind) lines of the innermost function or class around 1-based `line` (decorators included),
    else of the top-level statement holding it."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return line, line, "line"
    best: tuple[int, int, str] | None = None
    top: tuple[int, int, str] | None = None
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt) or node.end_lineno is None:
            continue
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        if not first <= line <= node.end_lineno:
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            kind = "class" if isinstance(node, ast.ClassDef) else "function"
            if best is None or first >= best[0]:
                best = (first, node.end_lineno, f"{kind} {node.name}")
        elif node in tree.body:
            top = (first, node.end_lineno, "statement")
    return best or top or (line, line, "line")


def _line(path: Path, row: int) -> str:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
    except OSError:
        return ""
    return lines[row] if 0 <= row < len(lines) else ""


def _library_line(path: Path, row: int) -> str:
    """The definition line of a library symbol (standard library or installed packages only)."""
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    if any(str(path).startswith(p + os.sep) for p in prefixes) and path.suffix in (".py", ".pyi"):
        return numbered(_line(path, row), row + 1)
    return ""
