"""What SWT and SWR are shown, each part capped in tokens (approximated as characters / 4).

SWT (SWE-World): an analysis of the instance, the problem, the command, the files it executes (at most 20), the
original content of the files the agent changed, the agent's patch and optionally the gold patch. SWR: the problem,
the test command, the test files, the agent's patch, the gold patch and the FAIL_TO_PASS / PASS_TO_PASS lists.
Caps keep a long repository from crowding out the parts that decide the answer.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcpworld.swe.instances import Instance
from mcpworld.worldmodels.executed import MAX_FILES, executed_files
from mcpworld.worldmodels.repo import originals, workspace_patch


def tokens(text: str) -> int:
    """Approximate token count: one token per four characters."""
    return math.ceil(len(text) / 4)


def clip(text: str, max_tokens: int) -> str:
    """`text` within `max_tokens`: head and tail kept, the middle replaced by a note."""
    limit = max(0, max_tokens) * 4
    if len(text) <= limit:
        return text
    if limit < 200:
        return text[:limit] + f"\n[... {len(text) - limit} characters omitted ...]"
    half = limit // 2 - 40
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters omitted ...]\n{text[-half:]}"


@dataclass(frozen=True)
class Budget:
    """Token caps per part of a prompt."""

    analysis: int = 400
    problem: int = 1500
    file: int = 2000
    files: int = 12000
    originals: int = 6000
    patch: int = 3000
    gold: int = 2000
    test_files: int = 8000


def _files(pairs: list[tuple[str, str]], per_file: int, total: int) -> tuple[list[tuple[str, str]], int]:
    """Clip each file to `per_file` and all of them to `total`; returns the kept files and how many were dropped."""
    kept, left = [], total
    for i, (path, text) in enumerate(pairs):
        if left < 50:
            return kept, len(pairs) - i
        clipped = clip(text, min(per_file, left))
        kept.append((path, clipped))
        left -= tokens(clipped)
    return kept, 0


# -- analysis --------------------------------------------------------------------------------------------------

_SKIP = {".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".tox", ".venv", "venv", "node_modules"}
_MENTION = re.compile(r"`([^`\n]{2,80})`|\b([\w/.-]+\.py)\b|\b([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)\b")


def _layout(root: Path, limit: int = 40) -> list[str]:
    """Top-level entries, with the Python files of each package (one level)."""
    lines = []
    for entry in sorted(root.iterdir()):
        if entry.name in _SKIP or entry.name.startswith("."):
            continue
        if entry.is_dir():
            py = sorted(p.name for p in entry.iterdir() if p.suffix == ".py")
            subdirs = sorted(p.name + "/" for p in entry.iterdir() if p.is_dir() and p.name not in _SKIP)
            shown = ", ".join([*py[:12], *subdirs[:6]]) + (" ..." if len(py) > 12 or len(subdirs) > 6 else "")
            lines.append(f"{entry.name}/ ({shown})" if shown else f"{entry.name}/")
        else:
            lines.append(entry.name)
        if len(lines) >= limit:
            lines.append("...")
            break
    return lines


def _definitions(root: Path, names: set[str], limit: int = 8, max_files: int = 3000) -> list[str]:
    """Where the functions and classes the issue names are defined (path:line name); big trees are sampled."""
    if not names:
        return []
    pattern = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+(" + "|".join(map(re.escape, sorted(names))) + r")\b")
    found: list[str] = []
    scanned = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP and not d.startswith("."))
        for name in sorted(filenames):
            if not name.endswith(".py"):
                continue
            scanned += 1
            if scanned > max_files:
                return found
            path = Path(dirpath) / name
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            for n, line in enumerate(text.splitlines(), 1):
                m = pattern.match(line)
                if m:
                    found.append(f"{path.relative_to(root)}:{n} {m.group(1)}")
                    if len(found) >= limit:
                        return found
    return found


def analyze_instance(instance: Instance, root: Path) -> str:
    """A short, deterministic briefing: repository, layout, how tests run, where the issue's names live."""
    title = instance.problem_statement.strip().splitlines()[0][:200] if instance.problem_statement.strip() else ""
    mentioned: set[str] = set()
    paths: list[str] = []
    for m in _MENTION.finditer(instance.problem_statement):
        text = next(g for g in m.groups() if g)
        if text.endswith(".py") and (root / text).is_file():
            paths.append(text)
        for part in re.findall(r"[A-Za-z_]\w*", text):
            if len(part) > 2 and part not in ("self", "None", "True", "False", "import", "from", "def"):
                mentioned.add(part)
    lines = [
        f"Repository: {instance.repo}" + (f" (version {instance.version})" if instance.version else "")
        + f"; tests use {instance.framework}.",
        f"Issue: {title}",
        "Layout: " + "; ".join(_layout(root)),
        f"Test command: {instance.test_command()}",
    ]
    if paths:
        lines.append("Files the issue names: " + ", ".join(dict.fromkeys(paths)))
    defs = _definitions(root, mentioned)
    if defs:
        lines.append("Definitions of names in the issue: " + "; ".join(defs))
    return "\n".join(lines)


# -- SWT -------------------------------------------------------------------------------------------------------

@dataclass
class SWTContext:
    """Everything SWT is shown for one command (already clipped)."""

    instance_id: str
    command: str
    analysis: str
    problem: str
    files: list[tuple[str, str]] = field(default_factory=list)
    originals: list[tuple[str, str]] = field(default_factory=list)
    patch: str = ""
    gold_patch: str | None = None
    omitted_files: int = 0
    root: str = ""

    def render(self) -> str:
        where = f"run in {self.root}, the repository root" if self.root else "run in the repository root"
        parts = [f"# Instance\n{self.instance_id}", f"# Analysis of the instance\n{self.analysis}",
                 f"# Problem statement\n{self.problem}", f"# Command ({where})\n```bash\n{self.command}\n```"]
        if self.files:
            body = "\n\n".join(f"## {p}\n```\n{t}\n```" for p, t in self.files)
            more = f"\n\n({self.omitted_files} more files omitted)" if self.omitted_files else ""
            parts.append(f"# Files the command executes (current content)\n{body}{more}")
        else:
            parts.append("# Files the command executes\n(none found in the repository)")
        if self.originals:
            body = "\n\n".join(f"## {p}\n```\n{t}\n```" for p, t in self.originals)
            parts.append(f"# Original content of the files the agent modified\n{body}")
        parts.append("# The agent's patch (the workspace against the base commit)\n"
                     + (f"```diff\n{self.patch}\n```" if self.patch.strip() else "(no changes)"))
        if self.gold_patch is not None:
            parts.append(f"# Reference fix (gold patch; NOT applied to the workspace)\n```diff\n{self.gold_patch}\n```")
        return "\n\n".join(parts)


def build_swt_context(instance: Instance, command: str, root: Path, base: str, *, include_gold: bool = False,
                      budget: Budget = Budget(), analysis: str | None = None, cwd: Path | None = None) -> SWTContext:
    """The SWT context for `command` in the workspace at `root` (whose base commit is `base`)."""
    patch = workspace_patch(root, base)
    executed = []
    for rel in executed_files(command, root, cwd, MAX_FILES):
        try:
            executed.append((rel, (root / rel).read_text(encoding="utf-8", errors="replace")))
        except OSError:
            continue
    files, omitted = _files(executed, budget.file, budget.files)
    origs, _ = _files(originals(root, base, patch), budget.file, budget.originals)
    return SWTContext(
        instance_id=instance.instance_id, command=command,
        analysis=clip(analysis if analysis is not None else analyze_instance(instance, root), budget.analysis),
        problem=clip(instance.problem_statement.strip(), budget.problem), files=files, originals=origs,
        patch=clip(patch, budget.patch),
        gold_patch=clip(instance.patch, budget.gold) if include_gold and instance.patch else None,
        omitted_files=omitted, root=str(cwd or root),
    )


SWT_SYSTEM = """You are SWT, a simulator of a Linux shell in a Python repository. Given a repository task, the \
agent's current changes and a command, predict exactly what running the command in the repository root prints.
Reason about what the code does with the agent's patch applied (the workspace is the base commit plus the agent's \
patch). Reproduce output formats faithfully (pytest, tracebacks, print output). Never add commentary to the output.
Answer with one JSON object: {"stdout": "<what the command prints on stdout>", "stderr": "<what it prints on \
stderr>", "exit_code": <integer>}. You may think first inside <think>...</think>."""


def swt_messages(ctx: SWTContext) -> list[dict[str, Any]]:
    return [{"role": "system", "content": SWT_SYSTEM}, {"role": "user", "content": ctx.render()}]


# -- SWR -------------------------------------------------------------------------------------------------------

@dataclass
class SWRContext:
    """Everything SWR is shown to judge one patch (already clipped)."""

    instance_id: str
    problem: str
    test_command: str
    test_files: list[tuple[str, str]]
    patch: str
    gold_patch: str
    fail_to_pass: list[str]
    pass_to_pass: list[str]

    def render(self) -> str:
        tests = "\n\n".join(f"## {p}\n```python\n{t}\n```" for p, t in self.test_files) or "(not available)"
        f2p = "\n".join(f"- {t}" for t in self.fail_to_pass) or "(none)"
        p2p = "\n".join(f"- {t}" for t in self.pass_to_pass) or "(none)"
        return "\n\n".join([
            f"# Instance\n{self.instance_id}", f"# Problem statement\n{self.problem}",
            f"# Test command\n```bash\n{self.test_command}\n```",
            f"# Test files (with the test patch applied)\n{tests}",
            f"# The agent's patch\n```diff\n{self.patch}\n```",
            f"# Reference fix (gold patch)\n```diff\n{self.gold_patch or '(not available)'}\n```",
            f"# FAIL_TO_PASS (must pass after the fix)\n{f2p}", f"# PASS_TO_PASS (must keep passing)\n{p2p}",
        ])


def build_swr_context(instance: Instance, patch: str, test_files: list[tuple[str, str]],
                      budget: Budget = Budget()) -> SWRContext:
    files, _ = _files(test_files, budget.test_files, budget.test_files)
    return SWRContext(instance.instance_id, clip(instance.problem_statement.strip(), budget.problem),
                      instance.test_command(), files, clip(patch, budget.patch), clip(instance.patch, budget.gold),
                      list(instance.FAIL_TO_PASS), list(instance.PASS_TO_PASS))


SWR_SYSTEM = """You are SWR, a virtual test runner for a Python repository. Given an issue, the tests that judge \
it, the agent's patch and a reference fix, decide what running the test command on the repository with the agent's \
patch and the test patch applied would report.
First reason step by step about whether each listed test passes with the agent's patch. Then answer with one JSON \
object: {"test_report": "<pytest-style log: one line per listed test with PASSED or FAILED, and a summary>", \
"reward": 1 or 0}. The reward is 1 only if every FAIL_TO_PASS and every PASS_TO_PASS test passes."""


def swr_messages(ctx: SWRContext) -> list[dict[str, Any]]:
    return [{"role": "system", "content": SWR_SYSTEM}, {"role": "user", "content": ctx.render()}]
