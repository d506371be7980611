"""`str_replace_editor`: the view/create/str_replace/insert/undo_edit file editor SWE agents are trained on.

Semantics and messages follow the SWE-agent / OpenHands tool so a policy trained there behaves the same here:
`cat -n` numbered views, directories two levels deep, create refuses existing files, str_replace needs exactly
one verbatim occurrence, insert validates its line, undo_edit restores the previous version, long output is clipped.
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path
from typing import Any

from mcpworld.swe.paths import PathRefused, resolve_path, shown

MAX_RESPONSE_LEN = 16000
SNIPPET_LINES = 4
MAX_FILE_BYTES = 4 * 1024 * 1024
CLIPPED_NOTE = (
    "<response clipped><NOTE>To save on context only part of this file has been shown to you. You should retry "
    "this tool after you have searched inside the file with `grep -n` in order to find the line numbers of what "
    "you are looking for.</NOTE>"
)
COMMANDS = ("view", "create", "str_replace", "insert", "undo_edit")


class EditorError(ValueError):
    """A refused or failed edit; the message goes back to the agent as a tool error."""


def clip(text: str, limit: int = MAX_RESPONSE_LEN) -> str:
    return text if len(text) <= limit else text[:limit] + CLIPPED_NOTE


def numbered(text: str, first_line: int = 1) -> str:
    """`cat -n` style: right-aligned line numbers, a tab, the line."""
    return "\n".join(f"{i:6}\t{line}" for i, line in enumerate(text.split("\n"), first_line))


class Editor:
    """The editor of one workspace; keeps each file's previous versions for undo_edit."""

    def __init__(self, root: Path):
        self.root = root
        self.history: dict[Path, list[str | None]] = defaultdict(list)

    def run(self, command: str, path: str, file_text: str | None = None, old_str: str | None = None,
            new_str: str | None = None, insert_line: int | None = None,
            view_range: list[int] | None = None) -> str:
        """Run one editor command; returns the observation text or raises EditorError."""
        if command not in COMMANDS:
            raise EditorError(f"Unrecognized command {command}. The allowed commands for the str_replace_editor "
                              f"tool are: {', '.join(COMMANDS)}")
        try:
            real = resolve_path(self.root, path, write=command != "view")
        except PathRefused as exc:
            raise EditorError(str(exc)) from None
        if isinstance(path, str) and not os.path.isabs(path) and not real.exists() and command != "create":
            raise EditorError(f"The path {path} is not an absolute path, it should start with `/`. Maybe you "
                              f"meant {shown(self.root, real)}?")
        label = shown(self.root, real)
        if command == "create":
            return self._create(real, label, file_text)
        if not real.exists():
            raise EditorError(f"The path {label} does not exist. Please provide a valid path.")
        if real.is_dir() and command != "view":
            raise EditorError(f"The path {label} is a directory and only the `view` command can be used on "
                              "directories")
        if command == "view":
            return self._view(real, label, view_range)
        if command == "str_replace":
            return self._str_replace(real, label, old_str, new_str)
        if command == "insert":
            return self._insert(real, label, insert_line, new_str)
        return self._undo(real, label)

    # -- commands --------------------------------------------------------------------------------------------

    def _view(self, real: Path, label: str, view_range: Any) -> str:
        if real.is_dir():
            if view_range:
                raise EditorError("The `view_range` parameter is not allowed when `path` points to a directory.")
            return clip(f"Here's the files and directories up to 2 levels deep in {label}, excluding hidden "
                        f"items:\n{_tree(real, label)}\n")
        text = self._read(real, label)
        if text.endswith("\n"):  # like `cat -n`: the final newline does not start another line
            text = text[:-1]
        first = 1
        if view_range:
            lines = text.split("\n")
            if (not isinstance(view_range, list) or len(view_range) != 2
                    or not all(isinstance(v, int) and not isinstance(v, bool) for v in view_range)):
                raise EditorError(f"Invalid `view_range`: {view_range}. It should be a list of two integers.")
            start, end = view_range
            n = len(lines)
            if start < 1 or start > n:
                raise EditorError(f"Invalid `view_range`: {view_range}. Its first element `{start}` should be "
                                  f"within the range of lines of the file: [1, {n}]")
            if end != -1 and end > n:
                raise EditorError(f"Invalid `view_range`: {view_range}. Its second element `{end}` should be "
                                  f"smaller than the number of lines in the file: `{n}`")
            if end != -1 and end < start:
                raise EditorError(f"Invalid `view_range`: {view_range}. Its second element `{end}` should be "
                                  f"larger or equal than its first `{start}`")
            text = "\n".join(lines[start - 1:] if end == -1 else lines[start - 1:end])
            first = start
        return clip(f"Here's the result of running `cat -n` on {label}:\n{numbered(text, first)}\n")

    def _create(self, real: Path, label: str, file_text: str | None) -> str:
        if file_text is None:
            raise EditorError("Parameter `file_text` is required for command: create.")
        if real.exists():
            raise EditorError(f"File already exists at: {label}. Cannot overwrite files using command `create`.")
        real.parent.mkdir(parents=True, exist_ok=True)
        self._write(real, file_text)
        self.history[real].append(None)
        return f"File created successfully at: {label}"

    def _str_replace(self, real: Path, label: str, old_str: str | None, new_str: str | None) -> str:
        if old_str is None or old_str == "":
            raise EditorError("Parameter `old_str` is required for command: str_replace.")
        new_str = new_str or ""
        if old_str == new_str:
            raise EditorError("No replacement was performed. `new_str` and `old_str` must be different.")
        text = self._read(real, label)
        starts = _occurrences(text, old_str)
        if not starts:
            raise EditorError(f"No replacement was performed, old_str `{old_str}` did not appear verbatim in "
                              f"{label}.")
        if len(starts) > 1:
            lines = [text.count("\n", 0, s) + 1 for s in starts]
            raise EditorError(f"No replacement was performed. Multiple occurrences of old_str `{old_str}` in lines "
                              f"{lines}. Please ensure it is unique.")
        new_text = text[:starts[0]] + new_str + text[starts[0] + len(old_str):]
        self._write(real, new_text)
        self.history[real].append(text)
        line = text.count("\n", 0, starts[0])
        snippet = _snippet(new_text, line, line + new_str.count("\n"))
        return (f"The file {label} has been edited. Here's the result of running `cat -n` on a snippet of "
                f"{label}:\n{snippet}\nReview the changes and make sure they are as expected. Edit the file again "
                "if necessary.")

    def _insert(self, real: Path, label: str, insert_line: Any, new_str: str | None) -> str:
        if insert_line is None:
            raise EditorError("Parameter `insert_line` is required for command: insert.")
        if new_str is None:
            raise EditorError("Parameter `new_str` is required for command: insert.")
        text = self._read(real, label)
        trailing = text.endswith("\n")
        lines = text.split("\n")[:-1] if trailing else (text.split("\n") if text else [])
        if not isinstance(insert_line, int) or isinstance(insert_line, bool) or not 0 <= insert_line <= len(lines):
            raise EditorError(f"Invalid `insert_line` parameter: {insert_line}. It should be within the range of "
                              f"lines of the file: [0, {len(lines)}]")
        added = new_str[:-1].split("\n") if new_str.endswith("\n") else new_str.split("\n")
        new_lines = lines[:insert_line] + added + lines[insert_line:]
        new_text = "\n".join(new_lines) + ("\n" if trailing or insert_line == len(lines) else "")
        self._write(real, new_text)
        self.history[real].append(text)
        snippet = _snippet(new_text, insert_line, insert_line + len(added) - 1)
        return (f"The file {label} has been edited. Here's the result of running `cat -n` on a snippet of the "
                f"edited file:\n{snippet}\nReview the changes and make sure they are as expected (correct "
                "indentation, no duplicate lines, etc). Edit the file again if necessary.")

    def _undo(self, real: Path, label: str) -> str:
        if not self.history.get(real):
            raise EditorError(f"No edit history found for {label}.")
        previous = self.history[real].pop()
        if previous is None:
            real.unlink()
            return f"Last edit to {label} undone successfully. The file was created by it and has been removed."
        self._write(real, previous)
        return f"Last edit to {label} undone successfully. Here's the result of running `cat -n` on " \
               f"{label}:\n{clip(numbered(previous.removesuffix(chr(10))))}\n"

    # -- file access -----------------------------------------------------------------------------------------

    def _read(self, real: Path, label: str) -> str:
        if not real.is_file():
            raise EditorError(f"The path {label} is not a regular file.")
        size = real.stat().st_size
        if size > MAX_FILE_BYTES:
            raise EditorError(f"The file {label} is too large ({size} bytes, max {MAX_FILE_BYTES}) for the editor; "
                              "use `bash` with `grep -n`, `head` or `sed -n` to read parts of it.")
        data = real.read_bytes()
        if b"\0" in data[:8192]:
            raise EditorError(f"The file {label} is binary and cannot be viewed or edited as text.")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise EditorError(f"The file {label} is not UTF-8 text; use `bash` to inspect it.") from None

    def _write(self, real: Path, text: str) -> None:
        """Rewrite the file in place (same inode, so its mode and links are kept; no rename, which ext4 makes
        flush). O_NOFOLLOW: a file swapped for a symbolic link after the path check is not written through."""
        fd = os.open(real, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.truncate()


def _occurrences(text: str, needle: str) -> list[int]:
    out, i = [], text.find(needle)
    while i != -1:
        out.append(i)
        i = text.find(needle, i + len(needle))
    return out


def _snippet(text: str, first: int, last: int) -> str:
    """Numbered lines first..last (0-based) with SNIPPET_LINES of context each side."""
    lines = text.split("\n")
    start = max(0, first - SNIPPET_LINES)
    end = min(len(lines), last + SNIPPET_LINES + 1)
    return numbered("\n".join(lines[start:end]), start + 1)


def _tree(real: Path, label: str, depth: int = 2) -> str:
    """The folder and its entries up to `depth` levels, hidden items and caches left out, like `find -maxdepth`."""
    out = [label + "/"]

    def walk(folder: Path, shown_as: str, level: int) -> None:
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            if entry.name.startswith(".") or entry.name == "__pycache__":
                continue
            path = f"{shown_as}/{entry.name}"
            is_dir = entry.is_dir(follow_symlinks=False)
            out.append(path + ("/" if is_dir else ""))
            if is_dir and level < depth:
                walk(Path(entry.path), path, level + 1)

    walk(real, label.rstrip("/"), 1)
    return "\n".join(out)
