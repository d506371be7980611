"""SWE-bench grading: apply the patch and test_patch to a clean checkout, run the tests, parse the log, report.

PASSED and XFAIL pass; a PASS_TO_PASS test may also be SKIPPED; a test missing from the log failed. Resolved only
when every FAIL_TO_PASS and PASS_TO_PASS test passes; partial when some FAIL_TO_PASS pass and every PASS_TO_PASS
holds. Reports carry SWE-bench's keys (patch_is_None, patch_exists, patch_successfully_applied, resolved,
tests_status) plus `resolution` (FULL / PARTIAL / NO).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcpworld.core.models import Check, Verdict
from mcpworld.swe.instances import Instance
from mcpworld.swe.shell import ExecutionBackend, scrubbed_env
from mcpworld.swe.workspace import WorkspaceError, WorkspacePool, apply_patch, git

PASSED, FAILED, SKIPPED, ERROR, XFAIL, XPASS = "PASSED", "FAILED", "SKIPPED", "ERROR", "XFAIL", "XPASS"
_STATUSES = (PASSED, FAILED, SKIPPED, ERROR, XFAIL, XPASS)
_BAD = {FAILED, ERROR}
_PYTEST_SUMMARY = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED) (\S.*?)(?: - .*)?$")
_PYTEST_VERBOSE = re.compile(r"^(\S[^\s]*::.*?) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b")
_UNITTEST_LINE = re.compile(r"^(\w+) \(([\w.]+)\)(?: \[.*?\])? \.\.\. ?(.*)$")
_UNITTEST_HEAD = re.compile(r"^(\w+) \(([\w.]+)\)(?: \[.*?\])?$")
_UNITTEST_FAIL = re.compile(r"^(FAIL|ERROR): (\w+) \(([\w.]+)\)")
_UNITTEST_WORDS = {"ok": PASSED, "FAIL": FAILED, "ERROR": ERROR, "expected failure": XFAIL,
                   "unexpected success": XPASS}


def _set(statuses: dict[str, str], test: str, status: str) -> None:
    """Record a status; a failure is never overwritten by a later pass (teardown errors come after PASSED)."""
    if statuses.get(test) in _BAD and status not in _BAD:
        return
    statuses[test] = status


def parse_pytest(log: str) -> dict[str, str]:
    """Test id -> status from pytest's `-rA` summary lines and `-v` lines."""
    statuses: dict[str, str] = {}
    for raw in log.splitlines():
        line = raw.strip()
        m = _PYTEST_VERBOSE.match(line)
        if m:
            _set(statuses, m.group(1), m.group(2))
            continue
        m = _PYTEST_SUMMARY.match(line)
        if m and not m.group(2).startswith("["):  # "SKIPPED [1] file:line: reason" names no test
            _set(statuses, m.group(2).strip(), m.group(1))
    return statuses


def _unittest_id(name: str, dotted: str) -> str:
    if dotted.endswith("." + name):  # Python 3.11+ prints module.Class.method
        dotted = dotted[: -len(name) - 1]
    return f"{name} ({dotted})"


def _unittest_status(word: str) -> str | None:
    word = word.strip()
    if word.startswith("skipped"):
        return SKIPPED
    return _UNITTEST_WORDS.get(word)


def parse_unittest(log: str) -> dict[str, str]:
    """Test id -> status from `unittest -v` lines; ids as `test_x (module.Class)` and `module.Class.test_x`."""
    statuses: dict[str, str] = {}
    pending: str | None = None
    for line in log.splitlines():
        m = _UNITTEST_LINE.match(line)
        if m:
            test, status = _unittest_id(m.group(1), m.group(2)), _unittest_status(m.group(3))
            if status:
                _set(statuses, test, status)
                pending = None
            else:
                pending = test  # output printed between "... " and the status word
            continue
        m = _UNITTEST_HEAD.match(line)
        if m:
            pending = _unittest_id(m.group(1), m.group(2))  # a docstring line follows, then " ... ok"
            continue
        m = _UNITTEST_FAIL.match(line)
        if m:
            _set(statuses, _unittest_id(m.group(2), m.group(3)), FAILED if m.group(1) == "FAIL" else ERROR)
            continue
        if pending is not None:
            tail = line.rsplit(" ... ", 1)[-1] if " ... " in line else line
            status = _unittest_status(tail)
            if status:
                _set(statuses, pending, status)
                pending = None
    for test, status in list(statuses.items()):
        name, dotted = test[:-1].split(" (", 1)
        statuses.setdefault(f"{dotted}.{name}", status)
    return statuses


def parse_log(log: str, framework: str) -> dict[str, str]:
    return parse_unittest(log) if framework == "unittest" else parse_pytest(log)


# -- reports ---------------------------------------------------------------------------------------------------

def tests_status(instance: Instance, statuses: dict[str, str]) -> dict[str, dict[str, list[str]]]:
    """SWE-bench's tests_status: success/failure lists for FAIL_TO_PASS and PASS_TO_PASS."""
    def split(tests: Iterable[str], ok: set[str]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {"success": [], "failure": []}
        for t in tests:
            out["success" if statuses.get(t) in ok else "failure"].append(t)
        return out

    return {"FAIL_TO_PASS": split(instance.FAIL_TO_PASS, {PASSED, XFAIL}),
            "PASS_TO_PASS": split(instance.PASS_TO_PASS, {PASSED, XFAIL, SKIPPED}),
            "FAIL_TO_FAIL": {"success": [], "failure": []}, "PASS_TO_FAIL": {"success": [], "failure": []}}


def resolution(status: dict[str, dict[str, list[str]]]) -> str:
    f2p, p2p = status["FAIL_TO_PASS"], status["PASS_TO_PASS"]
    if p2p["failure"]:
        return "NO"
    if not f2p["failure"]:
        return "FULL"
    return "PARTIAL" if f2p["success"] else "NO"


def empty_report(patch: str | None) -> dict[str, Any]:
    return {"patch_is_None": patch is None, "patch_exists": bool(patch and patch.strip()),
            "patch_successfully_applied": False, "resolved": False, "resolution": "NO", "tests_status": {}}


@dataclass
class Grade:
    """One graded patch: the SWE-bench report for it, and the test log it was read from."""

    instance_id: str
    report: dict[str, Any]
    log: str = ""
    test_command: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def verdict(self) -> Verdict:
        """passed = resolved; score 1 when resolved, the FAIL_TO_PASS fraction when partial, else 0."""
        r = self.report
        status = r.get("tests_status") or {}
        checks = [Check(name="patch applied", passed=r["patch_successfully_applied"],
                        detail=r.get("error", "") if not r["patch_successfully_applied"] else "")]
        score = 1.0 if r["resolved"] else 0.0
        for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
            if key in status:
                ok, bad = status[key]["success"], status[key]["failure"]
                detail = f"{len(ok)}/{len(ok) + len(bad)} pass" + (f"; failing: {', '.join(bad[:10])}" if bad else "")
                checks.append(Check(name=key, passed=not bad, detail=detail))
        if r.get("resolution") == "PARTIAL":
            f2p = status["FAIL_TO_PASS"]
            score = len(f2p["success"]) / (len(f2p["success"]) + len(f2p["failure"]))
        return Verdict(passed=bool(r["resolved"]), score=score, checks=checks,
                       evidence={"report": {self.instance_id: r}, "test_command": self.test_command,
                                 "log_tail": self.log[-4000:], **self.extra})


def grade(instance: Instance, patch: str | None, pool: WorkspacePool, backend: ExecutionBackend,
          timeout: float = 600.0) -> Grade:
    """Grade `patch` for `instance` in a fresh checkout (the agent's workspace is never touched)."""
    report = empty_report(patch)
    if not report["patch_exists"]:
        report["error"] = "empty patch: nothing to grade" if patch is not None else "no patch (None)"
        return Grade(instance.instance_id, report)
    commit = pool.cache.commit(instance.repo_source, instance.base_commit)
    ws = pool.acquire(instance.repo_source, commit, repo_dirname(instance))
    try:
        try:
            apply_patch(ws.root, patch or "", "patch")
        except WorkspaceError as exc:
            report["error"] = str(exc)
            return Grade(instance.instance_id, report)
        report["patch_successfully_applied"] = True
        if instance.test_patch:
            reset_test_files(ws.root, commit, instance.test_patch_files)
            try:
                apply_patch(ws.root, instance.test_patch, "test_patch")
            except WorkspaceError as exc:
                report["error"] = f"{exc} (after the model patch; the instance's tests could not be installed)"
                return Grade(instance.instance_id, report)
        command = instance.test_command()
        result = backend.run(command, ws.root, timeout, env=scrubbed_env(ws.home), writable=ws.parent)
        log = result.stdout + ("\n" + result.stderr if result.stderr else "")
        status = tests_status(instance, parse_log(log, instance.framework))
        report["tests_status"] = status
        report["resolution"] = resolution(status)
        report["resolved"] = report["resolution"] == "FULL"
        if result.timed_out:
            report["error"] = f"tests timed out after {timeout:g}s"
        return Grade(instance.instance_id, report, log, command)
    finally:
        pool.release(ws)


def reset_test_files(root: Path, commit: str, files: list[str]) -> None:
    """Put the files test_patch touches back to the base commit, as SWE-bench does before applying it."""
    for f in files:
        if git("cat-file", "-e", f"{commit}:{f}", cwd=root, check=False).returncode == 0:
            git("checkout", "--quiet", commit, "--", f, cwd=root)
        else:
            (root / f).unlink(missing_ok=True)


def repo_dirname(instance: Instance) -> str:
    """The workspace folder name: the repository's short name (what `repo` ends with)."""
    name = instance.repo.rsplit("/", 1)[-1]
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) or "repo"


# -- predictions files -----------------------------------------------------------------------------------------

def load_predictions(path: str | Path) -> list[dict[str, Any]]:
    """SWE-bench predictions: a JSON list (or {id: prediction} object) or JSONL of
    {instance_id, model_patch, model_name_or_path}."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    items: list[Any]
    try:
        doc = json.loads(text)
        items = doc if isinstance(doc, list) else list(doc.values()) if isinstance(doc, dict) and all(
            isinstance(v, dict) for v in doc.values()) and "instance_id" not in doc else [doc]
        lines = [0] * len(items)
    except json.JSONDecodeError:
        items, lines = [], []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    items.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{n}: invalid JSON: {exc.msg}") from None
                lines.append(n)
    for item, n in zip(items, lines):
        where = f"{path}:{n}" if n else str(path)
        if not isinstance(item, dict) or not isinstance(item.get("instance_id"), str):
            raise ValueError(f"{where}: each prediction needs instance_id (a string)")
        if item.get("model_patch") is not None and not isinstance(item["model_patch"], str):
            raise ValueError(f"{where}: model_patch must be a string or null")
    return items
