"""The docker backend's per-instance images carry the harness's names; running one needs a Docker engine."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mcpworld.swe.envs import harness_image
from mcpworld.swe.shell import BackendUnavailable, DockerBackend


def test_image_names_are_the_harness_names(swebench: Callable[[str], Any]) -> None:
    spec = swebench("swebench.image_builder.image_spec").ImageSpec
    for iid in ("django__django-11099", "astropy__astropy-12907", "sympy__sympy-20590"):
        assert harness_image(iid) == spec(instance_id=iid, dockerfile="FROM x", namespace="swebench").name
        assert harness_image(iid, namespace=None) == spec(instance_id=iid, dockerfile="FROM x", namespace=None).name
    assert harness_image("x__y-1", given="swerebench/sweb.eval.x86_64.x_1776_y-1") == \
        "swerebench/sweb.eval.x86_64.x_1776_y-1"  # a record's own image wins (SWE-rebench, SWE-smith)


def test_an_instance_runs_in_its_harness_image_when_an_engine_answers(tmp_path: Path) -> None:
    image = harness_image("django__django-11099")
    try:
        backend = DockerBackend(image=image)
    except BackendUnavailable as exc:
        pytest.skip(f"no Docker engine reachable here ({exc}); the image would be {image}")
    result = backend.run("test -d /testbed && echo testbed", tmp_path, 120, writable=tmp_path)
    backend.close(tmp_path)
    assert result.exit_code == 0 and "testbed" in result.stdout


def test_each_episode_of_the_docker_backend_runs_in_its_instance_image() -> None:
    from mcpworld.swe.instances import Instance
    from mcpworld.swe.shell import image_for

    plain = Instance(instance_id="django__django-11099", repo="django/django", base_commit="abc",
                     problem_statement="", FAIL_TO_PASS=[])
    assert image_for(plain) == harness_image("django__django-11099")
    own = Instance(instance_id="x__y-1", repo="x/y", base_commit="abc", problem_statement="", FAIL_TO_PASS=[],
                   extra={"docker_image": "swerebench/sweb.eval.x86_64.x_1776_y-1"})
    assert image_for(own) == "swerebench/sweb.eval.x86_64.x_1776_y-1"
