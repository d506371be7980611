"""SWE backends by name (`mcpworld.swe.backends`): the sandbox a name gives hides what its instances give away,
and loading instances changes no sandbox's settings (the hidden paths are passed, never gathered globally)."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpworld.swe.backends import BACKENDS, make_backend
from mcpworld.swe.builder import build_instances
from mcpworld.swe.instances import Instance, answer_paths, load_instances
from mcpworld.swe.shell import BackendUnavailable, LocalBackend, bwrap_works


@pytest.fixture(scope="module")
def built() -> Iterator[tuple[Path, list[Instance]]]:
    dest = Path(tempfile.mkdtemp(prefix="mcpworld-swe-backends-", dir="/var/tmp"))  # outside /tmp, private anyway
    dest.chmod(0o755)  # readable by others: a sandbox shows it unless told to hide it
    try:
        path = build_instances(dest)
        yield path, load_instances(path)
    finally:
        shutil.rmtree(dest, ignore_errors=True)


def test_the_names_the_command_line_offers() -> None:
    assert list(BACKENDS) == ["local", "docker", "simulated"]
    with pytest.raises(BackendUnavailable, match=r"unknown backend 'podman'; choose local, docker, simulated"):
        make_backend("podman", [])


def test_simulated_comes_from_the_world_models_only_when_chosen(monkeypatch: pytest.MonkeyPatch,
                                                                built: tuple[Path, list[Instance]]) -> None:
    monkeypatch.delenv("MCPWORLD_SWT_URL", raising=False)
    with pytest.raises(BackendUnavailable, match="simulated backend unavailable: no SWT endpoint"):
        make_backend("simulated", built[1])


def test_answer_paths_are_the_instances_file_and_sources(built: tuple[Path, list[Instance]]) -> None:
    path, instances = built
    paths = answer_paths(instances)
    assert paths[0] == str(path.resolve())
    assert set(paths[1:]) == {i.repo_source for i in instances} and len(paths) == len(set(paths))
    assert "origin" not in instances[0].record()  # where it was read from is not part of the record
    assert json.loads(json.dumps(instances[0].record()))["instance_id"] == instances[0].instance_id


@pytest.mark.skipif(not bwrap_works(), reason="bubblewrap cannot make namespaces here")
def test_the_local_backend_hides_its_instances_and_loading_hides_nothing_else(
        built: tuple[Path, list[Instance]], tmp_path: Path) -> None:
    path, instances = built
    source = instances[0].repo_source
    probe = f"cat {path} | wc -c; ls -A {source} | wc -l"
    hidden = make_backend("local", instances).execution.run(probe, tmp_path, 30)
    assert hidden.stdout.split() == ["0", "0"], hidden.stderr  # the file reads empty, the source is an empty folder
    plain = LocalBackend(isolate=True).run(probe, tmp_path, 30)  # a sandbox given nothing to hide
    assert plain.stdout.split()[0] != "0" and plain.stdout.split()[1] != "0", plain.stderr
