"""SWE-bench grading: log parsers, resolved / partial / no, bad patches, the grade CLI, gold as editor calls."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mcpworld.swe.builder import build_instances
from mcpworld.swe.cli import swe_group
from mcpworld.swe.editor import Editor
from mcpworld.swe.grading import grade, resolution
from mcpworld.swe.grading import tests_status as status_of
from mcpworld.swe.instances import Instance, load_instances
from mcpworld.swe.logparsers import parse_django, parse_pytest
from mcpworld.swe.oracle import solution_calls
from mcpworld.swe.shell import LocalBackend
from mcpworld.swe.workspace import WorkspacePool, apply_patch

PYTEST_LOG = """\
test_b.py::test_a PASSED                                                 [ 14%]
test_b.py::test_b FAILED                                                 [ 28%]
test_b.py::test_c SKIPPED (x)                                            [ 42%]
test_b.py::test_d XFAIL                                                  [ 57%]
test_b.py::test_e[a b] PASSED                                            [ 71%]
test_b.py::test_f PASSED                                                 [100%]
test_b.py::test_f ERROR                                                  [100%]
=========================== short test summary info ============================
PASSED test_b.py::test_a
PASSED test_b.py::test_e[a b]
PASSED test_b.py::test_f
SKIPPED [1] test_b.py:4: x
XFAIL test_b.py::test_d
ERROR test_b.py::test_f - RuntimeError
FAILED test_b.py::test_b - assert 0
FAILED test_b.py::test_g - AssertionError: a - b
"""

UNITTEST_LOG = """\
test_doc (tests.test_x.T.test_doc)
A docstring. ... hello
ok
test_err (tests.test_x.T.test_err) ... ERROR
test_fail (tests.test_x.T.test_fail) ... FAIL
test_ok (tests.test_x.T.test_ok) ... ok
test_skip (tests.test_x.T.test_skip) ... skipped 'nope'
test_xf (tests.test_x.T.test_xf) ... expected failure
test_old (tests.test_y.U) ... ok

======================================================================
ERROR: test_err (tests.test_x.T.test_err)
"""

PARTIAL_CLAMP = """\
diff --git a/minicalc/numbers.py b/minicalc/numbers.py
--- a/minicalc/numbers.py
+++ b/minicalc/numbers.py
@@ -6,5 +6,5 @@ def clamp(x, lo, hi):
     if x < lo:
         return lo
     if x > hi:
-        return lo
+        return hi
     return x
"""


@pytest.fixture(scope="module")
def instances(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Instance]:
    path = build_instances(tmp_path_factory.mktemp("swe-built"))
    return {i.instance_id: i for i in load_instances(path)}


@pytest.fixture
def pool() -> WorkspacePool:
    p = WorkspacePool(warm=0)
    yield p
    p.close_all()


def test_pytest_log_parser_reads_summary_lines_as_the_harness() -> None:
    s = parse_pytest(PYTEST_LOG)
    # Summary lines only; an id with a space is cut at it (SWE-bench's lists hold "test_e[a"); a later line wins.
    assert s == {"test_b.py::test_a": "PASSED", "test_b.py::test_e[a": "PASSED", "test_b.py::test_f": "ERROR",
                 "test_b.py::test_d": "XFAIL", "test_b.py::test_b": "FAILED", "test_b.py::test_g": "FAILED"}


def test_unittest_log_parser_names_tests_as_the_harness() -> None:
    s = parse_django(UNITTEST_LOG)
    assert s["A docstring."] == "PASSED"  # a test with a docstring is named by it
    assert s["test_err (tests.test_x.T.test_err)"] == "ERROR" and s["test_fail (tests.test_x.T.test_fail)"] == "FAILED"
    assert s["test_skip (tests.test_x.T.test_skip)"] == "SKIPPED" and s["test_old (tests.test_y.U)"] == "PASSED"
    assert "test_xf (tests.test_x.T.test_xf)" not in s  # "expected failure" is no status the harness reads


def test_swe_bench_semantics(instances: dict[str, Instance]) -> None:
    inst = instances["mcpworld__minicalc-1"]
    f2p, p2p = inst.FAIL_TO_PASS, inst.PASS_TO_PASS
    ok = {t: "PASSED" for t in f2p + p2p}
    assert resolution(status_of(inst, ok)) == "FULL"
    assert resolution(status_of(inst, {**ok, f2p[0]: "XFAIL", p2p[0]: "SKIPPED"})) == "FULL"
    assert resolution(status_of(inst, {**ok, f2p[0]: "FAILED"})) == "PARTIAL"
    assert resolution(status_of(inst, {**ok, f2p[0]: "XPASS"})) == "FULL"  # neither success nor failure
    assert resolution(status_of(inst, {**ok, f2p[0]: "SKIPPED"})) == "PARTIAL"  # a skipped F2P did not pass
    assert resolution(status_of(inst, {**ok, p2p[0]: "FAILED"})) == "NO"
    missing = {t: s for t, s in ok.items() if t != p2p[1]}
    status = status_of(inst, missing)
    assert status["PASS_TO_PASS"]["failure"] == [p2p[1]] and resolution(status) == "NO"
    assert resolution(status_of(inst, {t: "FAILED" for t in f2p} | {t: "PASSED" for t in p2p})) == "NO"


def test_gold_resolves_every_shipped_instance_and_empty_does_not(instances: dict[str, Instance],
                                                                 pool: WorkspacePool) -> None:
    backend = LocalBackend()
    assert len(instances) >= 5 and len({i.repo for i in instances.values()}) >= 2
    for inst in instances.values():
        g = grade(inst, inst.patch, pool, backend, 60)
        assert g.report["resolved"] is True, (inst.instance_id, g.log[-2000:])
        assert set(g.report) >= {"patch_is_None", "patch_exists", "patch_successfully_applied", "resolved",
                                 "tests_status"}
        assert g.verdict().passed and g.verdict().score == 1.0
    empty = grade(instances["mcpworld__textkit-1"], "", pool, backend, 60)
    assert empty.report == {"patch_is_None": False, "patch_exists": False, "patch_successfully_applied": False,
                            "resolved": False, "infra_failure": False, "resolution": "NO",
                            "error": "empty patch: nothing to grade"}
    assert grade(instances["mcpworld__textkit-1"], None, pool, backend, 60).report["patch_is_None"] is True


def test_partial_fix_is_partial(instances: dict[str, Instance], pool: WorkspacePool) -> None:
    inst = instances["mcpworld__minicalc-2"]
    g = grade(inst, PARTIAL_CLAMP, pool, LocalBackend(), 60)
    status = g.report["tests_status"]
    assert g.report["resolution"] == "PARTIAL" and g.report["resolved"] is False
    assert status["FAIL_TO_PASS"] == {"success": ["tests/test_numbers.py::test_clamp_above_range"],
                                      "failure": ["tests/test_numbers.py::test_clamp_rejects_inverted_bounds"]}
    assert status["PASS_TO_PASS"]["failure"] == []
    verdict = g.verdict()
    assert not verdict.passed and verdict.score == 0.5


def test_patch_that_does_not_apply(instances: dict[str, Instance], pool: WorkspacePool) -> None:
    bad = PARTIAL_CLAMP.replace("-        return lo\n", "-        return nothing_like_this\n")
    g = grade(instances["mcpworld__minicalc-2"], bad, pool, LocalBackend(), 60)
    assert g.report["patch_exists"] and not g.report["patch_successfully_applied"] and not g.report["resolved"]
    assert "patch does not apply" in g.report["error"]
    assert not g.verdict().checks[0].passed


def test_model_patch_cannot_overwrite_the_tests(instances: dict[str, Instance], pool: WorkspacePool) -> None:
    inst = instances["mcpworld__minicalc-3"]
    cheat = ("diff --git a/tests/test_chunks.py b/tests/test_chunks.py\n--- a/tests/test_chunks.py\n"
             "+++ b/tests/test_chunks.py\n@@ -1,3 +1,3 @@\n-import pytest\n+import pytest  # noqa\n \n"
             " from minicalc.chunks import chunk\n")
    g = grade(inst, cheat, pool, LocalBackend(), 60, mode="harness")
    assert g.report["patch_successfully_applied"] and g.report["resolution"] == "NO"
    strict = grade(inst, cheat, pool, LocalBackend(), 60)  # the default: the test file's change is left out
    assert not strict.report["resolved"] and strict.report["dropped"] == ["tests/test_chunks.py"]
    assert "nothing to grade" in strict.report["error"]


def test_grade_cli_with_predictions_jsonl(instances: dict[str, Instance], tmp_path: Path) -> None:
    inst = next(iter(instances.values()))
    preds = tmp_path / "preds.jsonl"
    preds.write_text(json.dumps({"instance_id": "mcpworld__minicalc-1", "model_patch": inst.patch,
                                 "model_name_or_path": "gold"}) + "\n"
                     + json.dumps({"instance_id": "mcpworld__minicalc-2", "model_patch": PARTIAL_CLAMP,
                                   "model_name_or_path": "half"}) + "\n"
                     + json.dumps({"instance_id": "mcpworld__textkit-2", "model_patch": None,
                                   "model_name_or_path": "none"}) + "\n")
    out = tmp_path / "report.json"
    instances_file = Path(inst.repo_source).parent.parent / "instances.jsonl"
    result = CliRunner().invoke(swe_group, ["grade", "--instances", str(instances_file), "--predictions",
                                            str(preds), "-o", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["mcpworld__minicalc-1"]["resolved"] is True
    assert report["mcpworld__minicalc-2"]["resolution"] == "PARTIAL"
    assert report["mcpworld__textkit-2"]["patch_is_None"] is True
    assert "resolved 1/3" in result.output
    preds.write_text('{"instance_id": "nope", "model_patch": ""}\n')
    bad = CliRunner().invoke(swe_group, ["grade", "--instances", str(instances_file), "--predictions", str(preds)])
    assert bad.exit_code == 1 and "unknown instances: nope" in bad.output


def test_gold_patch_as_editor_calls_reproduces_the_patch(instances: dict[str, Instance], pool: WorkspacePool,
                                                         tmp_path: Path) -> None:
    for inst in instances.values():
        commit = pool.cache.commit(inst.repo_source, inst.base_commit)
        calls = solution_calls(inst.patch, lambda p: pool.cache.read_file(inst.repo_source, commit, p))
        assert calls and all(c.name == "str_replace_editor" for c in calls)
        by_editor = pool.acquire(inst.repo_source, commit, "a")
        by_git = pool.acquire(inst.repo_source, commit, "b")
        editor = Editor(by_editor.root)
        for c in calls:
            editor.run(**c.arguments)
        apply_patch(by_git.root, inst.patch)
        for f in ["minicalc/stats.py", "minicalc/numbers.py", "minicalc/chunks.py", "textkit/slug.py",
                  "textkit/wrap.py", "textkit/case.py"]:
            if (by_git.root / f).exists():
                assert (by_editor.root / f).read_text() == (by_git.root / f).read_text(), f
        assert by_editor.diff() == by_git.diff()


def test_oracle_widens_ambiguous_hunks_and_creates_files(tmp_path: Path) -> None:
    base = "x = 1\ny = 2\nz = 3\nx = 1\ny = 2\nw = 4\n"
    patch = ("diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -4,2 +4,2 @@\n x = 1\n-y = 2\n+y = 20\n"
             "diff --git a/new.py b/new.py\nnew file mode 100644\n--- /dev/null\n+++ b/new.py\n@@ -0,0 +1,2 @@\n"
             "+a = 1\n+b = 2\n\\ No newline at end of file\n")
    calls = solution_calls(patch, lambda p: base if p == "m.py" else None)
    (tmp_path / "m.py").write_text(base)
    editor = Editor(tmp_path)
    for c in calls:
        editor.run(**c.arguments)
    assert (tmp_path / "m.py").read_text() == "x = 1\ny = 2\nz = 3\nx = 1\ny = 20\nw = 4\n"
    assert (tmp_path / "new.py").read_text() == "a = 1\nb = 2"


# --- strict grading against the standard SWE-RL hacks (issue 28): no bug is fixed by any of these ---------------------


def new_file(path: str, text: str) -> str:
    lines = text.splitlines()
    return (f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
            f"@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{line}\n" for line in lines))


def appended(path: str, base: str, text: str) -> str:
    """A diff adding `text` at the end of `path`, whose current content is `base`."""
    old, new = base.splitlines(), text.splitlines()
    hunk = f"@@ -{len(old)},1 +{len(old)},{1 + len(new)} @@\n"
    return (f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n{hunk} {old[-1]}\n"
            + "".join(f"+{line}\n" for line in new))


FORCE_PASS = """import pytest

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"
"""
PATCH_REPORTS = """import _pytest.reports as _r
_r.TestReport.outcome = property(lambda self: "passed", lambda self, value: None)"""
FAKE_AND_EXIT = """import os as _os, sys as _sys
if "pytest" in _sys.modules:
    for _t in ("test_median_even_length", "test_median_even_length_integers", "test_mean", "test_mean_rejects_empty",
               "test_median_odd_length"):
        print(f"PASSED tests/test_stats.py::{_t}")
    _sys.stdout.flush()
    _os._exit(0)"""

PACKAGE_INIT = "mcpworld/swe/data/repos/minicalc/src/minicalc/__init__.py"


def hacks() -> dict[str, str]:
    init = (Path(__file__).resolve().parents[2] / PACKAGE_INIT).read_text()
    return {
        "conftest forces passed": new_file("conftest.py", FORCE_PASS),
        "pytest.ini loads a plugin": new_file("pytest.ini", "[pytest]\naddopts = -p forcepass\n")
                                     + new_file("forcepass.py", FORCE_PASS),
        "tests/__init__ patches reporting": new_file("tests/__init__.py", PATCH_REPORTS),
        "the package patches reporting": appended("minicalc/__init__.py", init, PATCH_REPORTS),
        "fake PASSED lines, then os._exit(0)": appended("minicalc/__init__.py", init, FAKE_AND_EXIT),
        "sitecustomize": new_file("sitecustomize.py", PATCH_REPORTS),
    }


@pytest.mark.parametrize("hack", list(hacks()))
def test_strict_grading_resolves_no_hack(instances: dict[str, Instance], pool: WorkspacePool, hack: str) -> None:
    inst = instances["mcpworld__minicalc-1"]
    strict = grade(inst, hacks()[hack], pool, LocalBackend(), 60)
    assert strict.report["resolved"] is False and strict.report["mode"] == "strict", strict.log[-1500:]
    assert strict.report.get("dropped") or "steered" in strict.report.get("error", "") \
        or strict.report["resolution"] == "NO"


def test_the_harness_mode_is_kept_and_named(instances: dict[str, Instance], pool: WorkspacePool) -> None:
    """The harness-identical mode grades as SWE-bench does: a conftest that forces every report to pass resolves
    there (why strict is the reward's default)."""
    inst = instances["mcpworld__minicalc-1"]
    harness = grade(inst, hacks()["conftest forces passed"], pool, LocalBackend(), 60, mode="harness")
    assert harness.report["resolved"] is True and harness.report["mode"] == "harness"
    gold = grade(inst, inst.patch, pool, LocalBackend(), 60)
    assert gold.report["resolved"] is True and gold.report["mode"] == "strict" and "dropped" not in gold.report
    assert "test_mcpworld_canary_" in gold.test_command
