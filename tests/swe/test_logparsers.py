"""Our log parsers and grading beside the official `swebench` harness, on logs of real test runs.

Each log comes from running a real test runner here: pytest and `unittest -v` on files written to exercise every
summary form (parametrized ids with spaces and paths, xfail/xpass, setup and teardown errors, docstring names,
subtests, output between "..." and "ok"), six's and more-itertools' own suites, Django's runner, and sympy's.
Every parser the harness has for Python is run on every log by both sides; the statuses must be identical, and
so must the report.json entries built from them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mcpworld.swe import logparsers
from mcpworld.swe.grading import eval_log, report_from_log
from mcpworld.swe.instances import Instance

CRAFTED_PYTEST = '''
import pytest, unittest

def test_pass():
    pass

def test_fail_with_dash():
    assert 0, "left - right"

@pytest.mark.parametrize("x", ["a b", "c", "d - e"])
def test_param_spaces(x):
    assert x != "c"

@pytest.mark.parametrize("p", ["/abs/dir/file.txt", "//net/share", "rel/x"])
def test_param_path(p):
    pass

@pytest.mark.skip(reason="not here")
def test_skipped():
    pass

@pytest.mark.xfail(reason="known")
def test_xfail():
    assert 0

@pytest.mark.xfail(reason="fixed already")
def test_xpass():
    pass

@pytest.fixture
def broken():
    raise RuntimeError("setup broke")

def test_setup_error(broken):
    pass

@pytest.fixture
def bad_teardown():
    yield
    raise RuntimeError("teardown broke")

def test_teardown_error(bad_teardown):
    pass

def test_prints_status_words():
    print("PASSED fake::test_printed")
    print("FAILED other::test_printed - boom")

class TestGroup:
    def test_method(self):
        pass

class Case(unittest.TestCase):
    def test_unittest_style(self):
        self.assertEqual(1, 2)
'''

CRAFTED_UNITTEST = '''
import sys, unittest

class Cases(unittest.TestCase):
    def test_plain(self):
        pass

    def test_docstring(self):
        """The first docstring line names this test.

        More lines are not shown.
        """

    def test_docstring_fails(self):
        """A documented failure"""
        self.fail("no")

    def test_fails(self):
        self.assertEqual(1, 2)

    def test_errors(self):
        raise ValueError("boom")

    @unittest.skip("not today")
    def test_skipped(self):
        pass

    @unittest.expectedFailure
    def test_expected_failure(self):
        self.fail("known")

    @unittest.expectedFailure
    def test_unexpected_success(self):
        pass

    def test_prints_before_ok(self):
        sys.stderr.write("chatter on stderr\\n")
        print("chatter on stdout")

    def test_subtests(self):
        for i in range(3):
            with self.subTest(i=i):
                self.assertNotEqual(i, 1)

class BrokenSetUp(unittest.TestCase):
    def setUp(self):
        raise RuntimeError("setUp broke")

    def test_never_runs(self):
        pass
'''

FETCH = Path("/var/tmp/mcpworld-swe-fetch")  # outside /tmp: contained commands see it (read-only)


@pytest.fixture(scope="module")
def harness(swebench: Callable[[str], Any]) -> dict[str, Any]:
    return {"parsers": swebench("swebench.harness.log_parsers"),
            "python": swebench("swebench.harness.log_parsers.python"),
            "grading": swebench("swebench.harness.grading"),
            "types": swebench("swebench.types")}


def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300, env=env)
    return done.stdout + "\n" + done.stderr


def _sdist(spec: str) -> Path | None:
    """An sdist from PyPI through pip (cached across runs), unpacked; None when pip cannot reach an index."""
    from mcpworld.swe.builder import find_sdist

    folder = FETCH / "sdists"
    found = find_sdist(folder, spec)
    if found is None:
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:", "-d",
                        str(folder), spec], capture_output=True, timeout=600)
        found = find_sdist(folder, spec)
    if found is None:
        return None
    target = FETCH / "unpacked" / found.name.removesuffix(".tar.gz")
    if not target.is_dir():
        target.parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(found) as tf:
            tf.extractall(target.parent / (target.name + ".part"), filter="data")
        (target.parent / (target.name + ".part")).rename(target)
    return next(p for p in target.iterdir() if p.is_dir())


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """name -> the output of one real test run."""
    tmp = tmp_path_factory.mktemp("logs")
    out: dict[str, str] = {}
    (tmp / "test_crafted.py").write_text(CRAFTED_PYTEST)
    base = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "test_crafted.py"]
    out["pytest -rA"] = _run([*base, "-rA"], tmp)
    out["pytest -rA -v"] = _run([*base, "-rA", "-v"], tmp)
    out["pytest -rA --tb=no --no-header"] = _run([*base, "-rA", "--tb=no", "--no-header"], tmp)
    out["pytest --color=yes -rA"] = _run([*base, "-rA", "--color=yes"], tmp)
    pkg = tmp / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "test_cases.py").write_text(CRAFTED_UNITTEST)
    out["unittest -v"] = _run([sys.executable, "-m", "unittest", "-v", "pkg.test_cases"], tmp)
    sympy = pytest.importorskip("sympy", reason="sympy (the openrlhf extra) runs sympy's own test runner")
    (tmp / "symt").mkdir()
    (tmp / "symt" / "test_crafted.py").write_text(
        "def test_ok():\n    assert 1\n\ndef test_fails():\n    assert 1 == 2\n\ndef test_errors():\n"
        "    raise ValueError('boom')\n")
    script = ("import sys\nfrom sympy.testing.runtests import SymPyTests, PyTestReporter\n"
              "t = SymPyTests(PyTestReporter(verbose=True, colors=False))\nt._root_dir = sys.argv[1]\n"
              "t._testfiles.append(sys.argv[2])\nt.test()\n")
    out["sympy bin/test --verbose"] = _run([sys.executable, "-c", script, str(tmp),
                                           str(tmp / "symt" / "test_crafted.py")], tmp)
    sympy_root = Path(sympy.__file__).parent.parent
    out["sympy's own suite"] = _run([sys.executable, "-c", "from sympy.testing.runtests import test; "
                                     "test('sympy/utilities/tests/test_timeutils.py', verbose=True, colors=False)"],
                                    sympy_root)
    six = _sdist("six==1.16.0")
    if six is not None:
        out["six's suite (pytest -rA)"] = _run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA",
                                                "--tb=no", "test_six.py"], six)
    more = _sdist("more-itertools==10.5.0")
    if more is not None:
        out["more-itertools' suite (unittest -v)"] = _run([sys.executable, "-m", "unittest", "-v",
                                                          "tests.test_recipes"], more)
    django = _sdist("Django==5.1.4")
    if django is not None:
        env = _django_env()
        if env is not None:
            out["Django's runner"] = _run([str(env), "tests/runtests.py", "--verbosity", "2", "--settings",
                                           "test_sqlite", "--parallel", "1", "utils_tests.test_text",
                                           "utils_tests.test_html"], django, env={"PYTHONPATH": str(django),
                                                                                 "PATH": "/usr/bin:/bin"})
    return out


def _django_env() -> Path | None:
    """A Python with Django's dependencies, built offline from a wheelhouse (pip downloads it once)."""
    from mcpworld.swe.envs import EnvManager, EnvSpec

    wheels = FETCH / "wheelhouse"
    reqs = ["asgiref==3.8.1", "sqlparse==0.5.2"]
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "-d", str(wheels), *reqs], capture_output=True,
                   timeout=600)
    try:
        return EnvManager([wheels]).ensure(EnvSpec(python="", packages=reqs)).python
    except OSError:
        return None


def test_the_logs_are_real_runs_of_every_framework(logs: dict[str, str]) -> None:
    assert "short test summary info" in logs["pytest -rA"] and "1 xpassed" in logs["pytest -rA"]
    assert "test_docstring (pkg.test_cases.Cases.test_docstring)\nThe first docstring line names" in logs["unittest -v"]
    assert "tests finished: 1 passed, 1 failed, 1 exceptions" in logs["sympy bin/test --verbose"]
    real = {"six's suite (pytest -rA)", "more-itertools' suite (unittest -v)", "Django's runner"}
    if not real <= set(logs):
        pytest.skip(f"pip could not download {', '.join(sorted(real - set(logs)))}: only the written suites ran")
    assert "Ran " in logs["Django's runner"] and "utils_tests.test_text.TestUtilsText" in logs["Django's runner"]


def test_we_have_every_python_parser_of_the_harness_and_its_repository_map(harness: dict[str, Any]) -> None:
    registry = harness["parsers"].PARSER_REGISTRY
    python = {name for name, f in registry.items() if f.__module__.endswith("log_parsers.python")}
    assert set(logparsers.PARSERS) == python
    theirs = harness["python"].MAP_REPO_TO_PARSER_PY
    assert set(logparsers.REPO_PARSERS) == set(theirs)
    for repo, name in logparsers.REPO_PARSERS.items():
        assert registry[name] is theirs[repo], repo


def test_every_parser_reads_every_real_log_as_the_harness_does(logs: dict[str, str],
                                                                 harness: dict[str, Any]) -> None:
    registry = harness["parsers"].PARSER_REGISTRY
    spec = harness["types"].TestSpec(instance_id="x", image="", eval_script_list=[], repo="r", version="",
                                     FAIL_TO_PASS=[], PASS_TO_PASS=[])
    compared = 0
    for log_name, log in logs.items():
        for name in logparsers.PARSERS:
            ours, theirs = logparsers.parse(log, name), registry[name](log, spec)
            assert ours == theirs, (log_name, name, set(ours.items()) ^ set(theirs.items()))
            compared += bool(theirs)
    assert compared >= 3 * len(logs)  # most pairs found tests: the comparison is not of empty maps
    pytest_ids = logparsers.parse(logs["pytest -rA"], "parse_log_pytest")
    assert pytest_ids["test_crafted.py::test_param_spaces[a"] == "PASSED"  # cut at the space, as in SWE-bench
    assert logparsers.parse(logs["pytest -rA"], "parse_log_pytest_v2")["test_crafted.py::test_param_spaces[a b]"]
    unittest_ids = logparsers.parse(logs["unittest -v"], "parse_log_django")
    assert unittest_ids["The first docstring line names this test."] == "PASSED"
    assert unittest_ids["test_fails (pkg.test_cases.Cases.test_fails)"] == "FAILED"


def _instance(f2p: list[str], p2p: list[str], parser: str) -> Instance:
    return Instance(instance_id="repo__x-1", repo="owner/repo", base_commit="HEAD", problem_statement="x",
                    FAIL_TO_PASS=f2p, PASS_TO_PASS=p2p, log_parser=parser)


def test_reports_from_real_logs_equal_the_harness_reports(logs: dict[str, str], harness: dict[str, Any],
                                                          tmp_path: Path) -> None:
    grading, spec_type = harness["grading"], harness["types"].TestSpec
    cases = 0
    for log_name, output in logs.items():
        parser = "parse_log_sympy" if "sympy" in log_name else (
            "parse_log_django" if "unittest" in log_name or "Django" in log_name else "parse_log_pytest")
        ids = sorted(logparsers.parse(output, parser))
        passing = [t for t in ids if logparsers.parse(output, parser)[t] in ("PASSED", "XFAIL")]
        truncated = [t.split("[", 1)[0] + "[" for t in ids if "[" in t][:1]  # a cut id: the prefix fallback
        for f2p, p2p in ((ids[:3], ids[3:6] + ["missing::test"]), (passing[:2], passing[2:5]),
                         (passing[:1] + ids[-1:], truncated), (ids[:1], [])):
            if not f2p:
                continue
            for exit_code, timed_out, applied in ((1, False, True), (0, False, True), (None, True, True),
                                                   (None, False, False)):
                log = eval_log(output, exit_code, patch_applied=applied, timed_out=timed_out, timeout=5)
                path = tmp_path / "test_output.txt"
                path.write_text(log)
                spec = spec_type(instance_id="repo__x-1", image="", eval_script_list=[], repo="owner/repo",
                                 version="", FAIL_TO_PASS=f2p, PASS_TO_PASS=p2p, log_parser=parser,
                                 eval_type="pass_and_fail")
                for patch in ("diff --git a/x b/x\n", None):
                    theirs = grading.get_eval_report(spec, {"instance_id": "repo__x-1", "model_patch": patch,
                                                            "model_name_or_path": "m"}, str(path), True)
                    ours = report_from_log(_instance(f2p, p2p, parser), patch, log)
                    ours = {k: v for k, v in ours.items() if k != "resolution"}
                    assert {"repo__x-1": ours} == json.loads(json.dumps(theirs)), (log_name, f2p, p2p, exit_code)
                    cases += 1
    assert cases >= 8 * 4 * len(logs) // 2


# Lines real runs here did not print but the harness has rules for (Django's interrupted "ok", its 7188 migration
# line, a bare "FAIL:", pytest's wrapped "[100%]", matplotlib's mouse buttons, seaborn's and sympy's forms).
EDGE_LOG = """\
test_a (m.T.test_a) ... Testing against Django installed in '/x' with up to 8 processes
System check identified no issues (0 silenced).
ok
test_b (m.T.test_b) ... System check identified no issues (0 silenced)
ok
test_c (m.T.test_c) ... Internal Server Error: /admin/x/
ok
Applying sites.0002_alter_domain_unique...test_no_migrations (m.T.test_no_migrations) ... ok
--version is equivalent to version
test_d (m.T.test_d) ...  OK
FAIL:
ERROR: test_e (m.T.test_e)
PASSED [100%]
PASSED tests/test_x.py::test_click[MouseButton.LEFT-1]
FAILED tests/test_x.py::test_click[MouseButton.RIGHT] - AssertionError: a - b
XPASS tests/test_x.py::test_strict
\x1b[32mPASSED\x1b[0m tests/test_y.py::test_colour
tests/test_z.py::test_old PASSED
tests/test_z.py::test_old_fail FAILED
test_seaborn.py::test_plot PASSED [ 10%]
________________________________ sympy/core/tests/test_basic.py:test_subs _________________________________
test_subs F
test_other E
test_fine ok
"""


def test_every_parser_reads_the_harness_edge_cases_as_the_harness_does(harness: dict[str, Any]) -> None:
    registry = harness["parsers"].PARSER_REGISTRY
    spec = harness["types"].TestSpec(instance_id="x", image="", eval_script_list=[], repo="r", version="",
                                     FAIL_TO_PASS=[], PASS_TO_PASS=[])
    for name in logparsers.PARSERS:
        log = EDGE_LOG.replace("FAIL:\n", "")  # the harness raises IndexError on a bare "FAIL:" line (ours skips it)
        assert logparsers.parse(log, name) == registry[name](log, spec), name
    assert logparsers.parse(EDGE_LOG, "parse_log_django")["test_a (m.T.test_a)"] == "PASSED"
