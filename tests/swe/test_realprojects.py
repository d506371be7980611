"""Instances built from real PyPI projects (six: pytest, more-itertools: unittest, Django: its own runner), graded
in per-instance environments built offline, with logs, parallel grading, timeouts and leak-free workspaces.

pip downloads the sdists and wheels once into /var/tmp (the module is skipped, saying why, when no index answers).
The projects are built outside /tmp, where contained commands could otherwise see them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from mcpworld.swe.backends import make_backend
from mcpworld.swe.builder import build_instances, build_projects, fetch_projects
from mcpworld.swe.cli import swe_group
from mcpworld.swe.envs import EnvironmentUnavailable, EnvManager, EnvSpec
from mcpworld.swe.grading import grade, save_logs
from mcpworld.swe.instances import Instance, load_instances
from mcpworld.swe.logparsers import parser_name
from mcpworld.swe.shell import LocalBackend
from mcpworld.swe.workspace import WorkspacePool

FETCH = Path("/var/tmp/mcpworld-swe-fetch")
WRONG = {  # patches that apply and change the code, but do not fix the issue
    "benjaminp__six-1": ("six.py", "        return s.decode(encoding)\n",
                         "        return s.decode(encoding, 'strict')\n"),
    "more-itertools__more-itertools-1": ("more_itertools/more.py", "    if default is _marker or default is None:\n",
                                         "    if default is None or default is _marker:\n"),
    "django__django-1": ("django/utils/text.py", "        return list_[0]\n", "        return str(list_[0]) + ' '\n"),
}


def _wrong_patch(inst: Instance) -> str:
    path, old, new = WRONG[inst.instance_id]
    return f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n" + _hunk(inst, path, old, new)


def _hunk(inst: Instance, path: str, old: str, new: str) -> str:
    pool = WorkspacePool(warm=0)
    try:
        text = pool.cache.read_file(inst.repo_source, pool.cache.commit(inst.repo_source, inst.base_commit), path)
    finally:
        pool.close_all()
    assert text is not None and old in text
    line = text[: text.index(old)].count("\n") + 1
    return f"@@ -{line},1 +{line},1 @@\n-{old}+{new}"


@pytest.fixture(scope="module")
def real() -> Iterator[tuple[dict[str, Instance], Path]]:
    try:
        fetch_projects(FETCH / "sdists", FETCH / "wheelhouse")
    except OSError as exc:
        pytest.skip(f"the real projects' sdists could not be downloaded: {exc}")
    dest = Path(tempfile.mkdtemp(prefix="mcpworld-swe-real-", dir="/var/tmp"))
    try:
        path = build_projects(dest, FETCH / "sdists")
        yield {i.instance_id: i for i in load_instances(path)}, path
    finally:
        shutil.rmtree(dest, ignore_errors=True)


@pytest.fixture(scope="module")
def envs() -> EnvManager:
    return EnvManager([FETCH / "wheelhouse"])


@pytest.fixture
def pool() -> Iterator[WorkspacePool]:
    p = WorkspacePool(warm=0)
    yield p
    p.close_all()


def test_gold_resolves_three_real_projects_and_empty_or_wrong_patches_do_not(
        real: tuple[dict[str, Instance], Path], envs: EnvManager, pool: WorkspacePool, tmp_path: Path,
        swebench: Callable[[str], Any]) -> None:
    instances, _ = real
    assert {i.repo for i in instances.values()} == {"benjaminp/six", "more-itertools/more-itertools", "django/django"}
    backend = LocalBackend()
    for inst in instances.values():
        gold = grade(inst, inst.patch, pool, backend, 300, envs=envs)
        assert gold.report["resolved"] is True, (inst.instance_id, gold.report, gold.log[-3000:])
        assert gold.report["tests_status"]["FAIL_TO_PASS"]["failure"] == []
        wrong = grade(inst, _wrong_patch(inst), pool, backend, 300, envs=envs)
        assert wrong.report["patch_successfully_applied"] is True and wrong.report["resolved"] is False, wrong.report
        assert wrong.report["tests_status"]["FAIL_TO_PASS"]["failure"] == inst.FAIL_TO_PASS
        assert grade(inst, "", pool, backend, 300, envs=envs).report["resolved"] is False
        save_logs(gold, inst.patch, tmp_path / inst.instance_id)
        save_logs(wrong, inst.patch, tmp_path / (inst.instance_id + "-wrong"))
    # the ids SWE-bench would record: a parametrized id cut at its space, a test named by its docstring
    assert "test_six.py::test_ensure_str_decode_errors[replace" in instances["benjaminp__six-1"].FAIL_TO_PASS
    assert instances["more-itertools__more-itertools-1"].FAIL_TO_PASS == [
        "first() returns a default of None for an empty iterable"]
    _same_reports_as_the_harness(instances, tmp_path, swebench)


def _same_reports_as_the_harness(instances: dict[str, Instance], logs: Path,
                                 swebench: Callable[[str], Any]) -> None:
    """The official harness, reading the same saved logs, writes the same report.json entries."""
    h = {"grading": swebench("swebench.harness.grading"), "types": swebench("swebench.types")}
    for folder in sorted(logs.iterdir()):
        inst = instances[folder.name.removesuffix("-wrong")]
        ts = h["types"].TestSpec(instance_id=inst.instance_id, image="", eval_script_list=[], repo=inst.repo,
                                 version=inst.version, FAIL_TO_PASS=inst.FAIL_TO_PASS, PASS_TO_PASS=inst.PASS_TO_PASS,
                                 log_parser=parser_name(inst.repo, inst.framework), eval_type="pass_and_fail")
        theirs = h["grading"].get_eval_report(ts, {"instance_id": inst.instance_id, "model_patch": "x",
                                                   "model_name_or_path": "m"}, str(folder / "test_output.txt"), True)
        ours = json.loads((folder / "report.json").read_text())[inst.instance_id]
        ours = {k: v for k, v in ours.items() if k not in ("resolution", "error", "mode", "dropped")}  # ours only
        assert {inst.instance_id: ours} == theirs, folder.name


def test_grade_cli_runs_in_parallel_keeps_logs_and_writes_the_run_report(
        real: tuple[dict[str, Instance], Path], tmp_path: Path) -> None:
    instances, path = real
    preds = tmp_path / "preds.jsonl"
    ids = sorted(instances)
    preds.write_text("".join(json.dumps({"instance_id": i, "model_patch": instances[i].patch if n else "",
                                         "model_name_or_path": "org/model"}) + "\n" for n, i in enumerate(ids)))
    result = CliRunner().invoke(swe_group, ["grade", "--instances", str(path), "--predictions", str(preds), "-j", "3",
                                            "--logs", str(tmp_path / "logs"), "--run-id", "r1", "--wheelhouse",
                                            str(FETCH / "wheelhouse"), "-o", str(tmp_path / "report.json")])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "report.json").read_text())
    assert [report[i]["resolved"] for i in ids] == [False, True, True]
    for i in ids[1:]:
        folder = tmp_path / "logs" / "r1" / "org__model" / i
        assert {p.name for p in folder.iterdir()} == {"patch.diff", "eval.sh", "test_output.txt", "report.json"}
        assert ">>>>> Start Test Output" in (folder / "test_output.txt").read_text()
    summary = json.loads((tmp_path / "logs" / "org__model.r1.json").read_text())
    assert summary["resolved_ids"] == ids[1:] and summary["empty_patch_ids"] == ids[:1]
    assert summary["completed_instances"] == 2 and summary["schema_version"] == 2
    assert "resolved 2/3" in result.output


def test_tests_that_time_out_grade_unresolved_with_the_reason(real: tuple[dict[str, Instance], Path],
                                                              envs: EnvManager, pool: WorkspacePool) -> None:
    inst = real[0]["more-itertools__more-itertools-1"]
    hang = inst.patch + (
        "diff --git a/tests/__init__.py b/tests/__init__.py\n--- a/tests/__init__.py\n+++ b/tests/__init__.py\n"
        "@@ -0,0 +1,2 @@\n+import time\n+time.sleep(60)\n")
    g = grade(inst, hang, pool, LocalBackend(), 3, envs=envs, mode="harness")  # strict would drop tests/__init__
    assert g.report["resolved"] is False and g.report["resolution"] == "NO"
    assert "timed out after 3s" in g.report["error"] and ">>>>> Tests Timed Out" in g.log


def test_workspace_holds_no_history_after_the_base_commit_and_bash_cannot_read_the_instance(
        real: tuple[dict[str, Instance], Path], pool: WorkspacePool) -> None:
    instances, path = real
    inst = instances["benjaminp__six-1"]
    commit = pool.cache.commit(inst.repo_source, inst.base_commit)
    fix = pool.cache.commit(inst.repo_source, f"fixed/{inst.instance_id}")  # the source repository has the fix
    ws = pool.acquire(inst.repo_source, commit, "six")
    backend = make_backend("local", list(instances.values())).execution  # hides what these instances give away

    def sh(command: str) -> str:
        r = backend.run(command, ws.root, 30, writable=ws.parent)
        return r.stdout + r.stderr

    assert sh("git log --all --format=%H").split() == [commit]
    assert sh("git tag") == "" and sh("git reflog") == ""
    assert sh("git for-each-ref --format='%(refname)'").split() == ["refs/heads/main"]
    assert "fatal" in sh(f"git cat-file -t {fix}")  # the fix's objects are not there at all
    assert inst.patch not in sh("git log -p --all")
    if not backend.isolate:
        pytest.skip("bubblewrap is not available here: the instance file and source are only hidden when contained")
    shown = sh(f"cat {path}; grep -r instance_id {path.parent} | head -3")
    assert "instance_id" not in shown and inst.patch.splitlines()[-2] not in shown
    assert "Fix" not in sh(f"git -C {inst.repo_source} log --all --oneline")


def test_environments_are_reused_and_say_what_could_not_be_had(tmp_path: Path) -> None:
    manager = EnvManager([FETCH / "wheelhouse"], root=Path(tempfile.mkdtemp(prefix="envs-", dir="/var/tmp")))
    try:
        with pytest.raises(EnvironmentUnavailable, match=r"Python 3\.99 is not installed here"):
            manager.ensure(EnvSpec(python="3.99"))
        with pytest.raises(EnvironmentUnavailable, match=r"no-such-dist-mcpworld==1\.0 is not in the wheelhouse"):
            manager.ensure(EnvSpec(packages=["no-such-dist-mcpworld==1.0"]))
        assert not any(p.is_dir() for p in manager.root.iterdir())  # a failed build leaves nothing half-made
        first = manager.ensure(EnvSpec(packages=[]))
        assert manager.ensure(EnvSpec(packages=[])) == first and (first.path / ".ready").is_file()
    finally:
        shutil.rmtree(manager.root, ignore_errors=True)


def test_specs_in_the_harness_shape_choose_the_environment(tmp_path: Path) -> None:
    specs = tmp_path / "specs.json"  # {repo: {version: spec}}: the shipped minicalc's tests in pytest 8.3.4
    specs.write_text(json.dumps({"mcpworld/minicalc": {"0.1": {"python": "", "packages": ["pytest==8.3.4"]}}}))
    built = build_instances(tmp_path / "built")
    out = tmp_path / "logs"
    result = CliRunner().invoke(swe_group, ["grade", "--instances", str(built), "--predictions", "gold", "--specs",
                                            str(specs), "--wheelhouse", str(FETCH / "wheelhouse"), "--logs", str(out),
                                            "-o", str(tmp_path / "r.json")])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "r.json").read_text())
    assert all(r["resolved"] for r in report.values()), result.output
    log = (out / "mcpworld" / "gold" / "mcpworld__minicalc-1" / "test_output.txt").read_text()
    assert "pytest-8.3.4" in log  # not the pytest mcpworld itself runs with


def test_grading_without_pytest_in_the_interpreter_says_so(tmp_path: Path) -> None:
    built = build_instances(tmp_path / "built")
    blocker = ("import sys\nclass NoPytest:\n    def find_spec(self, name, path=None, target=None):\n"
               "        if name.split('.')[0] in ('pytest', '_pytest'):\n"
               "            raise ModuleNotFoundError(f'No module named {name!r}')\n"
               "sys.meta_path.insert(0, NoPytest())\n"
               "from mcpworld.app.cli import main\nmain()\n")
    done = subprocess.run([sys.executable, "-c", blocker, "swe", "grade", "--instances", str(built), "--predictions",
                           "gold"], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "MCPWORLD_HOME": str(tmp_path / "home")})
    assert "the tests need pytest, which is not installed" in done.stderr
    assert "mcpworld__minicalc-1" in done.stderr and "resolved 3/6" in done.stderr  # unittest ones still grade
