"""SWE-bench grading: apply the patch and test_patch to a clean checkout, run the tests, read the log as the harness.

The log is kept in the harness's layout (markers around the test output, then the exit code) and read by its
rules (`read_eval_log`), with its parser for the repository (`logparsers`). PASSED and XFAIL pass; a PASS_TO_PASS
test may also be SKIPPED; a test missing from the log failed; a run that timed out, errored, or exited non-zero
with every parsed test passing is not graded (unresolved). Reports carry the harness's keys (patch_is_None,
patch_exists, patch_successfully_applied, resolved, infra_failure, tests_status) plus `resolution` (FULL /
PARTIAL / NO) and, when something went wrong, `error`.
"""

from __future__ import annotations

import importlib.util
import json
import re
import secrets
import shlex
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from mcpworld.core.models import Check, Verdict
from mcpworld.swe import logparsers
from mcpworld.swe.envs import EnvironmentUnavailable, EnvManager, EnvSpec
from mcpworld.swe.instances import Instance, patch_files
from mcpworld.swe.logparsers import ERROR, FAILED, PASSED, SKIPPED, XFAIL
from mcpworld.swe.shell import ExecutionBackend, scrubbed_env
from mcpworld.swe.workspace import WorkspaceError, WorkspacePool, apply_patch, git

# What the harness writes around the test run; its grading reads the log between the markers.
APPLY_PATCH_FAIL = ">>>>> Patch Apply Failed"
APPLY_PATCH_PASS = ">>>>> Applied Patch"
RESET_FAILED = ">>>>> Reset Failed"
TESTS_ERROR = ">>>>> Tests Errored"
TESTS_TIMEOUT = ">>>>> Tests Timed Out"
START_TEST_OUTPUT = ">>>>> Start Test Output"
END_TEST_OUTPUT = ">>>>> End Test Output"
TEST_EXIT_CODE = ">>>>> Test Exit Code"
_BAD_MARKERS = (APPLY_PATCH_FAIL, RESET_FAILED, TESTS_ERROR, TESTS_TIMEOUT)
_EXIT_CODE = re.compile(re.escape(TEST_EXIT_CODE) + r":\s*(-?\d+)")
# Evidence that some runner ran although nothing was parsed (the harness's JavaScript runners print these).
_SUITE_RAN = re.compile("|".join((
    r"Executed [1-9]\d* of \d+", r"TOTAL: [1-9]\d* (?:SUCCESS|FAILED)", r"[1-9]\d* passing",
    r"Tests:\s+[1-9]\d*", r"Test Suites:\s+(?:\d+ \w+, )*[1-9]\d* total", r"^# tests [1-9]\d*",
    r"[1-9]\d* specs?, \d+ failures?", r"': ok$")), re.MULTILINE)
# Log signatures of a broken environment (tier "environment") or of either cause ("ambiguous"); first match wins.
_INFRA = [(reason, tier, re.compile(pattern, re.MULTILINE)) for reason, tier, pattern in (
    ("browser_launch_failed", "environment", r"Failed to launch|Failed to connect to the bus"),
    ("display_unavailable", "environment", r"cannot open display|Missing X server|unable to open X display"),
    ("out_of_memory", "environment", r"Cannot allocate memory|OutOfMemoryError|^Killed$"),
    ("container_unavailable", "environment", r"Error response from daemon|Cannot connect to the Docker daemon"),
    ("network_unreachable", "environment", r"Could not resolve host|Temporary failure in name resolution"),
    ("missing_module", "ambiguous", r"Cannot find module|MODULE_NOT_FOUND|ModuleNotFoundError"),
    ("no_tests_collected", "ambiguous", r"no tests ran|collected 0 items"),
    ("tests_timed_out", "ambiguous", r"Timeout error: \d+ seconds exceeded"),
)]
_PASSING = {PASSED, XFAIL}


def eval_log(test_output: str, exit_code: int | None, *, patch_applied: bool = True, timed_out: bool = False,
             timeout: float = 0.0, notes: str = "") -> str:
    """The test log in the harness's layout (markers around the output, the exit code after them)."""
    head = (notes + "\n" if notes else "") + (APPLY_PATCH_PASS if patch_applied else APPLY_PATCH_FAIL) + "\n"
    if not patch_applied:
        return head
    tail = f"{TESTS_TIMEOUT} after {timeout:g} seconds\n" if timed_out else ""
    code = f"{TEST_EXIT_CODE}: {exit_code}\n" if exit_code is not None and not timed_out else ""
    return f"{head}{START_TEST_OUTPUT}\n{test_output}\n{END_TEST_OUTPUT}\n{code}{tail}"


def read_eval_log(log: str, parser: str) -> tuple[dict[str, str], bool]:
    """(test id -> status, whether the log describes a run that can be graded), as the harness decides it.

    Not gradable: the patch did not apply, the tests errored or timed out, the markers are missing, nothing parsed
    and no sign a suite ran, or the command failed while every parsed test passed (the log is not the run's).
    """
    if any(marker in log for marker in _BAD_MARKERS):
        return {}, False
    if START_TEST_OUTPUT not in log or END_TEST_OUTPUT not in log:
        return {}, False
    statuses = logparsers.parse(log.split(START_TEST_OUTPUT)[1].split(END_TEST_OUTPUT)[0], parser)
    if not statuses:
        statuses = logparsers.parse(log, parser)  # results printed outside the markers
    if not statuses and not _SUITE_RAN.search(log):
        return {}, False
    match = _EXIT_CODE.search(log)
    code = int(match.group(1)) if match else None
    if code not in (None, 0) and statuses and not any(s in (FAILED, ERROR) for s in statuses.values()):
        return {}, False
    return statuses, True


def infra_failure(log: str) -> tuple[str, str] | None:
    """(reason, tier) when the log shows a known environment fault; advisory, it never changes `resolved`."""
    for reason, tier, pattern in _INFRA if log else ():
        if pattern.search(log):
            return reason, tier
    return None


def _lookup(test: str, statuses: dict[str, str]) -> str | None:
    """The status-map key for `test`. SWE-bench lists hold some parametrized ids cut mid-parameter (more '['
    than ']'): those match by prefix when every candidate agrees on pass or fail."""
    if test in statuses:
        return test
    if test.count("[") > test.count("]"):
        found = [k for k in statuses if k.startswith(test)]
        if found and len({statuses[k] in _PASSING for k in found}) == 1:
            return found[0]
    return None


def _outcome(test: str, statuses: dict[str, str], skipped_ok: bool) -> bool | None:
    """True passed, False failed, None neither (not counted: a status such as XPASS that the harness ignores)."""
    key = _lookup(test, statuses)
    status = statuses[key] if key is not None else None
    if status in _PASSING or (skipped_ok and status == SKIPPED):
        return True
    if status is None or status in (FAILED, ERROR, SKIPPED):
        return False
    return None


def tests_status(instance: Instance, statuses: dict[str, str]) -> dict[str, dict[str, list[str]]]:
    """SWE-bench's tests_status: success/failure lists for FAIL_TO_PASS and PASS_TO_PASS.

    PASSED and XFAIL pass; a skipped PASS_TO_PASS test holds but a skipped FAIL_TO_PASS one failed; a test
    missing from the log failed. Fail-only instances (`eval_type`) fail a test only when it is FAILED.
    """
    def split(tests: Iterable[str], skipped_ok: bool) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {"success": [], "failure": []}
        for t in tests:
            if instance.eval_type == "fail_only":
                out["failure" if statuses.get(t) == FAILED else "success"].append(t)
                continue
            outcome = _outcome(t, statuses, skipped_ok)
            if outcome is not None:
                out["success" if outcome else "failure"].append(t)
        return out

    return {"FAIL_TO_PASS": split(instance.FAIL_TO_PASS, False), "PASS_TO_PASS": split(instance.PASS_TO_PASS, True),
            "FAIL_TO_FAIL": {"success": [], "failure": []}, "PASS_TO_FAIL": {"success": [], "failure": []}}


def _fraction(part: dict[str, list[str]]) -> float:
    total = len(part["success"]) + len(part["failure"])
    return 1.0 if total == 0 else len(part["success"]) / total


def resolution(status: dict[str, dict[str, list[str]]]) -> str:
    """FULL when every FAIL_TO_PASS and PASS_TO_PASS test passes, PARTIAL when only some FAIL_TO_PASS do."""
    f2p, p2p = _fraction(status["FAIL_TO_PASS"]), _fraction(status["PASS_TO_PASS"])
    if f2p == 1 and p2p == 1:
        return "FULL"
    return "PARTIAL" if 0 < f2p < 1 and p2p == 1 else "NO"


def empty_report(patch: str | None) -> dict[str, Any]:
    """The report of a patch that was not run (the harness's keys, and our `resolution`)."""
    return {"patch_is_None": patch is None, "patch_exists": bool(patch and patch.strip()),
            "patch_successfully_applied": False, "resolved": False, "infra_failure": False, "resolution": "NO"}


def report_from_log(instance: Instance, patch: str | None, log: str) -> dict[str, Any]:
    """The harness's report.json entry for `patch`, read from its eval log (plus our `resolution`)."""
    report = empty_report(patch)
    if patch is None:
        return report
    report["patch_exists"] = True
    parser = logparsers.parser_name(instance.repo, instance.framework, instance.log_parser)
    statuses, found = read_eval_log(log, parser)
    if not found:
        infra = infra_failure(log)
        if infra:
            report["infra_failure"] = infra[1] == "environment"
            report["infra_failure_reason"] = infra[0]
        return report
    report["patch_successfully_applied"] = True
    status = tests_status(instance, statuses)
    report["resolution"] = resolution(status)
    report["resolved"] = report["resolution"] == "FULL"
    report["tests_status"] = status
    return report


@dataclass
class Grade:
    """One graded patch: the SWE-bench report for it, and the test log it was read from."""

    instance_id: str
    report: dict[str, Any]
    log: str = ""
    test_command: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    duration_s: float = 0.0

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


# -- strict mode: what the repository's own code cannot steer ---------------------------------------------------

GradeMode = Literal["strict", "harness"]
MODES: tuple[GradeMode, ...] = ("strict", "harness")
PROTECTED_NAMES = frozenset({"conftest.py", "pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml",
                             "noxfile.py", "sitecustomize.py", "usercustomize.py"})
TEST_FOLDERS = frozenset({"test", "tests", "testing"})


def protected(path: str, test_files: Iterable[str] = ()) -> bool:
    """Whether a patch may not change `path` in strict mode: tests and their folders, test configuration
    (conftest, pytest.ini, tox.ini, setup.cfg, pyproject.toml), interpreter start-up hooks (sitecustomize,
    usercustomize, *.pth). A fix changes source files; a change to these steers the run that judges it."""
    pure = PurePosixPath(path)
    name = pure.name
    return (path in set(test_files) or name in PROTECTED_NAMES or name.endswith(".pth")
            or name.startswith("test_") or name.endswith("_test.py")
            or any(part in TEST_FOLDERS for part in pure.parts[:-1]))


def split_patch(patch: str, test_files: Iterable[str] = ()) -> tuple[str, list[str]]:
    """`patch` without its file sections that touch a protected path (either side of a rename), and those paths."""
    sections = re.split(r"(?m)^(?=diff --git )", patch)
    kept, dropped = [], []
    for section in sections:
        header = section.split("\n", 1)[0]
        match = re.match(r"diff --git a/(.+?) b/(.+)$", header)
        if match is None:
            kept.append(section)
            continue
        paths = [match[1], match[2]]
        if any(protected(p, test_files) for p in paths):
            dropped += [p for p in dict.fromkeys(paths) if p not in dropped]
        else:
            kept.append(section)
    return "".join(kept), dropped


CANARY_TEST = "test_canary"


def _single_pytest(command: str) -> bool:
    """A command that is one pytest run, so a test file can be added at its end."""
    return "pytest" in command and not re.search(r"[;&|\n`$()<>]", command)


def env_spec(instance: Instance, specs: dict[str, dict[str, Any]] | None = None) -> EnvSpec | None:
    """The instance's environment: its own (SWE-rebench `install_config`), else `specs[repo][version]` (the
    harness's map shape), else None (the interpreter running mcpworld)."""
    raw = instance.env or ((specs or {}).get(instance.repo) or {}).get(instance.version)
    try:
        return EnvSpec.from_record(raw)
    except ValueError as exc:
        raise EnvironmentUnavailable(f"instance {instance.instance_id}: environment spec: {exc}") from None


def test_command(instance: Instance, spec: EnvSpec | None) -> str:
    """The instance's test_cmd, else the spec's test_cmd on the instance's test files, else the default."""
    if not instance.test_cmd and spec is not None and spec.test_cmd:
        return f"{spec.test_cmd} {' '.join(shlex.quote(f) for f in instance.test_files)}".strip()
    return instance.test_command()


def _require_pytest(command: str) -> None:
    """Without an instance environment tests use this interpreter: say so clearly if it lacks pytest."""
    try:
        present = importlib.util.find_spec("pytest") is not None
    except (ImportError, ValueError):
        present = False
    if "pytest" in command and not present:
        raise EnvironmentUnavailable(f"the tests need pytest, which is not installed for {sys.executable}: "
                                     "`pip install pytest` (mcpworld depends on it; a partial install lacks it), or "
                                     "give the instance an environment spec with pytest in its packages")


def grade(instance: Instance, patch: str | None, pool: WorkspacePool, backend: ExecutionBackend,
          timeout: float = 600.0, *, envs: EnvManager | None = None,
          specs: dict[str, dict[str, Any]] | None = None, mode: GradeMode = "strict") -> Grade:
    """Grade `patch` for `instance` in a fresh checkout (the agent's workspace is never touched).

    The tests run in the instance's environment (built once by `envs`, then reused), else with this interpreter.
    Raises WorkspaceError (EnvironmentUnavailable included) for problems on our side: those are not grades.

    `mode="strict"` (the reward's default) grades only the patch's changes to source files: its changes to tests,
    test configuration and start-up hooks are dropped and reported (`report["dropped"]`); and a pytest run gets a
    canary, a failing test of the grader's under a random name, which must come back failed with a failing exit
    status, else the run's reporting was steered and nothing is resolved. `mode="harness"` grades as the
    SWE-bench harness does, every change applied.
    """
    if mode not in MODES:
        raise ValueError(f"grading mode {mode!r}: use one of {', '.join(MODES)}")
    report = empty_report(patch)
    if not report["patch_exists"]:
        report["error"] = "empty patch: nothing to grade" if patch is not None else "no patch (None)"
        return Grade(instance.instance_id, report)
    dropped: list[str] = []
    if mode == "strict":
        patch, dropped = split_patch(patch or "", instance.test_patch_files)
        if not patch.strip():
            report.update(mode=mode, dropped=dropped, error="every change is to tests, test configuration or start-up "
                          f"hooks, which strict grading leaves out ({', '.join(dropped)}): nothing to grade")
            return Grade(instance.instance_id, report)
    spec = env_spec(instance, specs)
    env = (envs or EnvManager()).ensure(spec) if spec is not None else None
    command = test_command(instance, spec)
    if env is None:
        _require_pytest(command)
    commit = pool.cache.commit(instance.repo_source, instance.base_commit)
    ws = pool.acquire(instance.repo_source, commit, repo_dirname(instance), refill=False)
    try:
        try:
            apply_patch(ws.root, patch or "", "patch")
        except WorkspaceError as exc:
            log = eval_log("", None, patch_applied=False, notes=str(exc))
            return Grade(instance.instance_id, {**report_from_log(instance, patch, log), "error": str(exc)}, log,
                         command)
        if instance.test_patch:
            touched = set(patch_files(patch or "")) & set(instance.test_patch_files)
            reset_test_files(ws.root, commit, sorted(touched))  # the others are still at the base commit
            try:
                apply_patch(ws.root, instance.test_patch, "test_patch")
            except WorkspaceError as exc:
                error = f"{exc} (after the model patch; the instance's tests could not be installed)"
                log = eval_log("", None, patch_applied=False, notes=error)
                return Grade(instance.instance_id, {**report_from_log(instance, patch, log), "error": error}, log,
                             command)
        variables = scrubbed_env(ws.home)
        run_command, canary = command, None
        if mode == "strict" and _single_pytest(command):
            canary = f"test_mcpworld_canary_{secrets.token_hex(6)}.py"  # written after every patch: the grader's
            (ws.root / canary).write_text(f"def {CANARY_TEST}():\n    assert False, 'the grader expects this'\n")
            run_command = f"{command} {canary}"
        script = run_command
        if env is not None and spec is not None:
            variables.update(env.variables(ws.root), **spec.env_vars)
            script = "\n".join([*spec.checkout_commands(), run_command])
        result = backend.run(script, ws.root, timeout, env=variables, writable=ws.parent)
        output = result.stdout + ("\n" + result.stderr if result.stderr else "")
        log = eval_log(output, result.exit_code, timed_out=result.timed_out, timeout=timeout)
        report = report_from_log(instance, patch, log)
        report["mode"] = mode
        if dropped:
            report["dropped"] = dropped
        if result.timed_out:
            report["error"] = f"tests timed out after {timeout:g}s: graded unresolved, as the harness does"
        elif "tests_status" not in report:
            report["error"] = (f"no gradable test results in the log (the test command exited {result.exit_code}): "
                               f"{output.strip()[-300:]}")
        elif canary is not None:
            parser = logparsers.parser_name(instance.repo, instance.framework, instance.log_parser)
            statuses, _ = read_eval_log(log, parser)
            seen = statuses.get(f"{canary}::{CANARY_TEST}")
            if seen not in (FAILED, ERROR) or result.exit_code in (0, None):
                report.update(resolved=False, resolution="NO", error=(
                    f"the run's reporting was steered: the grader's failing canary test came back {seen or 'unseen'} "
                    f"with exit status {result.exit_code}; graded unresolved"))
        return Grade(instance.instance_id, report, log, run_command, duration_s=result.duration_s)
    finally:
        pool.discard(ws)  # deleted, and the next checkout prepared, in the background after the tests
        pool.prepare(instance.repo_source, commit, repo_dirname(instance))


def save_logs(g: Grade, patch: str | None, folder: Path) -> None:
    """The harness's per-instance log folder: patch.diff, eval.sh, test_output.txt, report.json."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "patch.diff").write_text(patch or "")
    (folder / "eval.sh").write_text(f"#!/bin/bash\n{g.test_command}\n")
    (folder / "test_output.txt").write_text(g.log)
    (folder / "report.json").write_text(json.dumps({g.instance_id: g.report}, indent=4) + "\n")


def run_summary(instance_ids: list[str], predictions: dict[str, dict[str, Any]],
                reports: dict[str, dict[str, Any]], errors: dict[str, str]) -> dict[str, Any]:
    """The harness's run report (`<model>.<run_id>.json`): counts and sorted id lists (schema_version 2)."""
    empty = {i for i, p in predictions.items() if p.get("model_patch") in ("", None)}
    done = {i for i in reports if i not in empty}
    resolved = {i for i in done if reports[i].get("resolved")}
    failed = {i for i in errors if i not in empty}
    reasons = {i: r["infra_failure_reason"] for i, r in reports.items() if r.get("infra_failure_reason")}
    infra = {i for i, r in reports.items() if r.get("infra_failure")}
    incomplete = {i for i in instance_ids if i not in predictions}
    return {
        "total_instances": len(instance_ids), "submitted_instances": len(predictions),
        "completed_instances": len(done), "resolved_instances": len(resolved),
        "unresolved_instances": len(done - resolved), "infra_failure_instances": len(infra),
        "ambiguous_failure_instances": len(set(reasons) - infra), "empty_patch_instances": len(empty),
        "error_instances": len(failed), "completed_ids": sorted(done), "incomplete_ids": sorted(incomplete),
        "empty_patch_ids": sorted(empty), "submitted_ids": sorted(predictions), "resolved_ids": sorted(resolved),
        "unresolved_ids": sorted(done - resolved), "infra_failure_ids": sorted(infra),
        "ambiguous_failure_ids": sorted(set(reasons) - infra), "failure_reasons": dict(sorted(reasons.items())),
        "error_ids": sorted(failed), "schema_version": 2,
    }


def reset_test_files(root: Path, commit: str, files: list[str]) -> None:
    """Put the files test_patch touches back to the base commit, as SWE-bench does before applying it."""
    if not files:
        return
    listed = git("ls-tree", "-r", "-z", "--name-only", commit, "--", *files, cwd=root).stdout.split("\0")
    present = [f for f in files if f in listed]
    if present:
        git("checkout", "--quiet", commit, "--", *present, cwd=root)
    for f in files:
        if f not in present:
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
