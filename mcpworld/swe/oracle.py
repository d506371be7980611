"""Reference solutions: turn a gold patch into `str_replace_editor` calls, so the oracle policy can solve instances.

Each hunk becomes one str_replace whose old_str is the hunk's old side, widened with neighbouring lines of the file
until it occurs exactly once; new files become `create`, deleted files a `bash rm`. The calls are checked by
replaying them on the base files in memory. Paths are relative to the repository root (the editor accepts them),
because every episode's workspace lives somewhere else.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field

from mcpworld.core.models import ToolCall

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class PatchError(ValueError):
    """A patch the oracle cannot express as editor calls (binary, malformed, or not matching the base files)."""


@dataclass
class Hunk:
    old_start: int
    old: list[str] = field(default_factory=list)  # lines with their newline (if any)
    new: list[str] = field(default_factory=list)


@dataclass
class FilePatch:
    old_path: str | None
    new_path: str | None
    hunks: list[Hunk] = field(default_factory=list)
    binary: bool = False


def parse_patch(patch: str) -> list[FilePatch]:
    """Split a unified git diff into files and hunks (old/new sides with exact line endings)."""
    files: list[FilePatch] = []
    lines = patch.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("diff --git "):
            m = re.match(r"diff --git a/(.+) b/(.+)$", line)
            if not m:
                raise PatchError(f"malformed diff header: {line!r}")
            files.append(FilePatch(m.group(1), m.group(2)))
        elif files and line.startswith("--- "):
            files[-1].old_path = None if line[4:].strip() == "/dev/null" else line[4:].strip().removeprefix("a/")
        elif files and line.startswith("+++ "):
            files[-1].new_path = None if line[4:].strip() == "/dev/null" else line[4:].strip().removeprefix("b/")
        elif files and (line.startswith("Binary files") or line.startswith("GIT binary patch")):
            files[-1].binary = True
        elif files and line.startswith("@@"):
            m = _HUNK.match(line)
            if not m:
                raise PatchError(f"malformed hunk header: {line!r}")
            old_left = int(m.group(2) or 1)
            new_left = int(m.group(4) or 1)
            hunk = Hunk(int(m.group(1)))
            last_tag = " "
            i += 1
            while i < len(lines) and (old_left > 0 or new_left > 0 or lines[i].startswith("\\")):
                body = lines[i]
                tag, text = (body[:1] or " "), body[1:]
                if tag == "\\":  # "\ No newline at end of file": the previous line had none
                    side = hunk.new if last_tag == "+" else hunk.old if last_tag == "-" else None
                    for s in ([side] if side is not None else [hunk.old, hunk.new]):
                        if s:
                            s[-1] = s[-1].removesuffix("\n")
                elif tag == " ":
                    hunk.old.append(text + "\n")
                    hunk.new.append(text + "\n")
                    old_left, new_left = old_left - 1, new_left - 1
                elif tag == "-":
                    hunk.old.append(text + "\n")
                    old_left -= 1
                elif tag == "+":
                    hunk.new.append(text + "\n")
                    new_left -= 1
                else:
                    raise PatchError(f"malformed hunk line: {body!r}")
                last_tag = tag
                i += 1
            files[-1].hunks.append(hunk)
            continue
        i += 1
    return files


def solution_calls(patch: str, read_file: Callable[[str], str | None]) -> list[ToolCall]:
    """Editor calls that turn the base files (`read_file(path)`) into the patched ones."""
    calls: list[ToolCall] = []
    for fp in parse_patch(patch):
        if fp.binary:
            raise PatchError(f"{fp.new_path or fp.old_path}: binary changes cannot be made with the editor")
        if fp.new_path is None:
            calls.append(ToolCall(name="bash", arguments={"command": f"rm -- {shlex.quote(fp.old_path or '')}"}))
            continue
        if fp.old_path is None:
            text = "".join(line for h in fp.hunks for line in h.new)
            calls.append(ToolCall(name="str_replace_editor",
                                  arguments={"command": "create", "path": fp.new_path, "file_text": text}))
            continue
        if fp.old_path != fp.new_path:
            calls.append(ToolCall(name="bash", arguments={
                "command": f"mkdir -p -- \"$(dirname {shlex.quote(fp.new_path)})\" && "
                           f"git mv -- {shlex.quote(fp.old_path)} {shlex.quote(fp.new_path)}"}))
        content = read_file(fp.old_path)
        if content is None:
            raise PatchError(f"{fp.old_path}: not in the base commit")
        offset = 0
        for hunk in fp.hunks:
            content, call, delta = _hunk_call(fp.new_path, content, hunk, offset)
            calls.append(call)
            offset += delta
    return calls


def _hunk_call(path: str, content: str, hunk: Hunk, offset: int) -> tuple[str, ToolCall, int]:
    lines = content.splitlines(keepends=True)
    old, new = "".join(hunk.old), "".join(hunk.new)
    delta = len(hunk.new) - len(hunk.old)
    if not old:  # pure insertion (only in files empty at base)
        at = max(0, min(len(lines), hunk.old_start + offset))
        updated = "".join(lines[:at]) + new + "".join(lines[at:])
        return updated, ToolCall(name="str_replace_editor", arguments={
            "command": "insert", "path": path, "insert_line": at, "new_str": new}), delta
    start = max(0, hunk.old_start - 1 + offset)
    if "".join(lines[start:start + len(hunk.old)]) != old:
        found = content.find(old)
        if found == -1:
            raise PatchError(f"{path}: hunk at line {hunk.old_start} does not match the base file")
        start = content.count("\n", 0, found)
    before, after = 0, 0
    while True:  # widen with neighbouring lines until the old side is unique in the file
        lo, hi = start - before, start + len(hunk.old) + after
        old_str = "".join(lines[lo:hi])
        if content.count(old_str) == 1:
            break
        if lo == 0 and hi >= len(lines):
            raise PatchError(f"{path}: cannot make the hunk at line {hunk.old_start} unique")
        before, after = before + (lo > 0), after + (hi < len(lines))
    new_str = "".join(lines[lo:start]) + new + "".join(lines[start + len(hunk.old):hi])
    updated = "".join(lines[:lo]) + new_str + "".join(lines[hi:])
    return updated, ToolCall(name="str_replace_editor", arguments={
        "command": "str_replace", "path": path, "old_str": old_str, "new_str": new_str}), delta
