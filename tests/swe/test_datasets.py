"""Records of every public SWE-style dataset load (unknown fields kept), and a malformed line is reported by number
while the rest still load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mcpworld.swe.cli import swe_group
from mcpworld.swe.envs import EnvSpec
from mcpworld.swe.instances import InstanceError, load_instances

PATCH = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n"
SWE_BENCH = {  # the 12 fields of SWE-bench / Lite / SWE-Gym, test lists as JSON strings
    "repo": "astropy/astropy", "instance_id": "astropy__astropy-12907",
    "base_commit": "d16bfe05a744909de4b27f5875fe0d4ed41ce607",
    "patch": PATCH, "test_patch": PATCH, "problem_statement": "separability_matrix does not compute nested models",
    "hints_text": "", "created_at": "2022-03-03T15:14:54Z", "version": "4.3",
    "FAIL_TO_PASS": json.dumps(["astropy/modeling/tests/test_separable.py::test_separable[compound_model6-result6]"]),
    "PASS_TO_PASS": json.dumps(["astropy/modeling/tests/test_separable.py::test_coord_matrix"]),
    "environment_setup_commit": "298ccb478e6bf092953bca67a3d29dc6c35f6752",
}
RECORDS = {
    "swe-bench": SWE_BENCH,
    "verified": {**SWE_BENCH, "instance_id": "astropy__astropy-13033", "difficulty": "15 min - 1 hour"},
    "multimodal": {**SWE_BENCH, "instance_id": "chartjs__Chart.js-10301", "repo": "chartjs/Chart.js",
                   "image_assets": json.dumps({"problem_statement": ["https://example.invalid/a.png"]}),
                   "FAIL_TO_PASS": json.dumps(["test/specs/x.tests.js | should draw"])},
    "swe-gym": {**SWE_BENCH, "instance_id": "getmoto__moto-5752", "repo": "getmoto/moto", "version": "4.0"},
    "swe-smith": {"instance_id": "oauthlib__oauthlib.1fd52536.combine_file__09vlzwgc",
                  "repo": "swesmith/oauthlib__oauthlib.1fd52536", "patch": PATCH,
                  "FAIL_TO_PASS": ["tests/test_common.py::test_x"], "PASS_TO_PASS": ["tests/test_common.py::test_y"],
                  "created_at": "2025-03-14T22:14:56.396374", "base_commit": "2b3e1f7a8c1a",
                  "image_name": "swebench/swesmith.x86_64.oauthlib_1776_oauthlib.1fd52536",
                  "problem_statement": "Token validation accepts expired tokens"},
    "r2e-gym": {"repo_name": "aiohttp", "docker_image": "namanjain12/aiohttp_final:f0d74880deec8fcd982bce639c93c5e1",
                "commit_hash": "f0d74880deec8fcd982bce639c93c5e130d41198",
                "parsed_commit_content": json.dumps({"file_diffs": []}), "execution_result_content": "{}",
                "modified_files": ["aiohttp/web.py"], "relevant_files": [], "num_non_test_files": 1,
                "num_non_test_func_methods": 1, "num_non_test_lines": 4, "prompt": "...",
                "problem_statement": "Response.text drops the charset",
                "expected_output_json": json.dumps({"test_text_charset": "PASSED", "test_other": "FAILED"})},
    "swe-rebench": {**SWE_BENCH, "instance_id": "owner__repo-17", "repo": "owner/repo",
                    "meta": {"llm_score": {"difficulty_score": 1}}, "license_name": "MIT",
                    "install_config": {"python": "3.9", "install": "pip install -e .", "pip_packages": ["pytest"],
                                       "test_cmd": "pytest -rA", "log_parser": "parse_log_pytest",
                                       "packages": "requirements.txt", "reqs_path": ["requirements.txt"]},
                    "requirements": "pytest==8.0\n", "environment": "", "docker_image": "swerebench/x"},
}


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    lines = [json.dumps(r) for r in RECORDS.values()]
    lines.insert(2, '{"instance_id": "broken", "repo": ')  # line 3: cut off
    lines.insert(5, json.dumps({**SWE_BENCH, "instance_id": "no-statement", "problem_statement": ""}))  # line 6
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_every_layout_loads_keeping_unknown_fields_and_bad_lines_are_reported(dataset: Path) -> None:
    problems: list[str] = []
    loaded = {i.extra["dataset_layout"] + ":" + i.instance_id: i
              for i in load_instances(dataset, problems=problems, require_source=False)}
    assert len(loaded) == len(RECORDS)
    assert problems[0].startswith(f"{dataset}:3: invalid JSON")
    assert problems[1].startswith(f"{dataset}:6: instance 'no-statement': problem_statement: required")
    verified = loaded["swe-bench:astropy__astropy-13033"]
    assert verified.difficulty == "medium" and verified.extra["difficulty_label"] == "15 min - 1 hour"
    assert loaded["swe-bench-multimodal:chartjs__Chart.js-10301"].extra["image_assets"].startswith('{"problem')
    smith = loaded["swe-smith:oauthlib__oauthlib.1fd52536.combine_file__09vlzwgc"]
    assert smith.extra["bug_patch"] == PATCH and smith.patch == "" and smith.image.startswith("swebench/swesmith")
    r2e = loaded["r2e-gym:aiohttp-f0d74880deec"]
    assert r2e.FAIL_TO_PASS == ["test_text_charset"] and r2e.extra["num_non_test_lines"] == 4
    rebench = loaded["swe-rebench:owner__repo-17"]
    assert rebench.log_parser == "parse_log_pytest" and rebench.extra["meta"] == {"llm_score": {"difficulty_score": 1}}
    assert rebench.env is not None and rebench.env["python"] == "3.9"
    with pytest.raises(ValueError, match="names a file in the repository"):
        EnvSpec.from_record(rebench.env)  # requirements.txt must be listed to be installed offline


def test_strict_loading_raises_the_first_problem_and_the_cli_warns_and_goes_on(dataset: Path) -> None:
    with pytest.raises(InstanceError, match=r"mixed\.jsonl:3: invalid JSON"):
        load_instances(dataset, require_source=False)
    result = CliRunner().invoke(swe_group, ["list", "--instances", str(dataset), "--json"])
    assert result.exit_code == 0, result.output
    assert "warning: skipped" in result.output and ":3: invalid JSON" in result.output
    assert "getmoto__moto-5752" in result.output and "aiohttp-f0d74880deec" in result.output


def test_django_and_sympy_records_without_test_cmd_get_the_harness_commands(tmp_path: Path) -> None:
    django_patch = PATCH.replace("x.py", "tests/utils_tests/test_text.py") + PATCH.replace("x.py", "docs/notes.txt")
    records = [{**SWE_BENCH, "instance_id": "django__django-1", "repo": "django/django", "test_patch": django_patch},
               {**SWE_BENCH, "instance_id": "sympy__sympy-1", "repo": "sympy/sympy",
                "test_patch": PATCH.replace("x.py", "sympy/core/tests/test_basic.py")}]
    path = tmp_path / "i.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    django, sympy = load_instances(path, require_source=False)
    assert django.test_command() == ("./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 "
                                     "utils_tests.test_text")
    assert sympy.test_command().endswith("bin/test -C --verbose sympy/core/tests/test_basic.py")
