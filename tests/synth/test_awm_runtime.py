"""AWM's scenarios run under AWM's library versions (issue 33, "Faithful by default"): the generated server and
verifiers of a package served as AWM's run in a worker whose Python is AWM's runtime (`awm_runtime`: the pins of
awm-lock.txt in a virtualenv of their own, built once and cached), so what AWM's SQLAlchemy refuses is refused here;
a twin of a real MCP server keeps this Python. Without the runtime nothing of AWM's runs, and the error says what
to do."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner

from mcpworld.synth.cli import synth_group
from mcpworld.synth.importers import awm_runtime
from mcpworld.synth.importers.awm import import_scenario, package_worker, read_references, run_job
from mcpworld.synth.importers.awm_format import read_dataset

DATA = Path(__file__).parents[1] / "data" / "awm"
PINS = dict(line.lower().split("==") for line in awm_runtime.requirements())


def test_a_column_named_metadata_is_refused_as_awms_sqlalchemy_refuses_it(awm_runtime: object,
                                                                         tmp_path: Path) -> None:
    """SQLAlchemy 2.0.41 (AWM's) reserves `metadata` on a declarative class; 2.1 (this project's) loads it."""
    scenario = next(s for s in read_dataset(DATA) if s.key == "pet_clinic_1")
    scenario.full_code = scenario.full_code.replace('    species = Column(String, nullable=False)\n',
                                                    '    species = Column(String, nullable=False)\n'
                                                    '    metadata = Column(String)\n', 1)
    assert "metadata = Column" in scenario.full_code
    report = anyio.run(lambda: import_scenario(scenario, tmp_path, references=read_references(DATA /
                                                                                               "references.jsonl"),
                                               audit=False))
    assert not report.ok and not (tmp_path / report.name).exists()
    assert report.problems == ["the generated server does not start: sqlalchemy.exc.InvalidRequestError: Attribute "
                               "name 'metadata' is reserved when using the Declarative API."]


def test_an_awm_worker_runs_under_awms_lock(awm_faithful: Path) -> None:
    """The import records the versions its generated code ran under; a call to the served world's worker says the
    same (its modules' own `__version__`)."""
    direct = package_worker(awm_faithful).run("mcpworld.synth.sandbox.jobs:call_function", {
        "source": "import sqlalchemy\ndef f():\n    return sqlalchemy.__version__", "name": "f", "args": {}})
    assert direct.value == "2.0.41"
    manifest = json.loads((awm_faithful / "scenario.json").read_text(encoding="utf-8"))
    report = json.loads((awm_faithful / "report.json").read_text(encoding="utf-8"))
    running = run_job(awm_faithful, "versions", {})
    assert manifest["runtime"] == report["runtime"] == running
    made_with = subprocess.run([awm_runtime.interpreter().python, "-c", "import platform; print(platform."
                                "python_version())"], capture_output=True, text=True, check=True).stdout.strip()
    assert running["python"] == made_with  # AWM's 3.12 where installed (else this Python's version, said at build)
    assert {k: running[k] for k in ("fastapi", "starlette", "sqlalchemy", "pydantic", "httpx")} == \
        {k: PINS[k] for k in ("fastapi", "starlette", "sqlalchemy", "pydantic", "httpx")}
    assert running["sqlalchemy"] == "2.0.41"


def test_served_as_picks_the_python(awm_faithful: Path, tmp_path: Path) -> None:
    """AWM's data runs under AWM's runtime; a twin (`served_as: "mcpworld"`) and a package from before the key keep
    this Python."""
    assert package_worker(awm_faithful).interpreter == awm_runtime.interpreter()
    for served in ("mcpworld", None):
        twin = tmp_path / f"twin-{served}"
        shutil.copytree(awm_faithful, twin)
        manifest = json.loads((twin / "scenario.json").read_text(encoding="utf-8"))
        manifest.pop("served_as")
        if served:
            manifest["served_as"] = served
        (twin / "scenario.json").write_text(json.dumps(manifest), encoding="utf-8")
        assert package_worker(twin).interpreter is None


def test_without_the_runtime_an_import_fails_saying_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Offline, from a wheelhouse that lacks the pins: a clear error naming the way out, and nothing written (never
    a fallback to this Python's libraries)."""
    (tmp_path / "wheels").mkdir()
    monkeypatch.setenv(awm_runtime.WHEELHOUSE_ENV, str(tmp_path / "wheels"))
    monkeypatch.setenv(awm_runtime.ENVS_ENV, str(tmp_path / "envs"))
    monkeypatch.setattr(awm_runtime, "_built", None)
    result = CliRunner().invoke(synth_group, ["import-awm", str(DATA), "--only", "Pet Clinic 1", "-o",
                                              str(tmp_path / "out")])
    assert result.exit_code == 1
    assert "cannot build AWM's runtime" in result.output and "not in the wheelhouse" in result.output
    assert f"set {awm_runtime.WHEELHOUSE_ENV}=DIR" in result.output and "pip download -d DIR -r" in result.output
    assert not list((tmp_path / "out").glob("awm-*"))
