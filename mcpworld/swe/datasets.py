"""Public SWE-style datasets' record layouts, read into SWE-bench's fields (everything else is kept, not dropped).

* SWE-bench full, Lite, Verified (`difficulty` as "<15 min fix", "15 min - 1 hour", "1-4 hours", ">4 hours"),
  Multimodal (`image_assets`), SWE-Gym: SWE-bench's own fields; SWE-bench 5 records add `image`, `log_parser`,
  `eval_type`, `eval_script`.
* SWE-rebench: SWE-bench's fields plus `install_config` (python, packages, pip_packages, pre_install, install,
  test_cmd, log_parser), `requirements`, `environment`, `docker_image`, `meta`.
* SWE-smith: `repo` is `swesmith/<owner>__<name>.<commit8>`, `image_name`; its `patch` is the change that *made*
  the bug (the fix is its reverse), so it is kept as `bug_patch` and `patch` is left empty.
* R2E-Gym: `repo_name`, `commit_hash`, `docker_image`, `problem_statement`, `expected_output_json` (test -> status
  after the fix): every test expected to pass becomes FAIL_TO_PASS (the record has no before-fix statuses).
"""

from __future__ import annotations

import json
from typing import Any

VERIFIED_DIFFICULTY = {"<15 min fix": "easy", "15 min - 1 hour": "medium", "1-4 hours": "hard", ">4 hours": "hard"}


def layout(raw: dict[str, Any]) -> str:
    """Which dataset a record's fields look like."""
    if "repo_name" in raw and "commit_hash" in raw:
        return "r2e-gym"
    if str(raw.get("repo", "")).startswith("swesmith/") or "image_name" in raw:
        return "swe-smith"
    if "install_config" in raw:
        return "swe-rebench"
    if "image_assets" in raw:
        return "swe-bench-multimodal"
    return "swe-bench"


def normalize(raw: dict[str, Any]) -> dict[str, Any]:
    """A record in SWE-bench's field names; the original fields stay alongside (never dropped)."""
    kind = layout(raw)
    out = dict(raw)
    if isinstance(out.get("difficulty"), str) and out["difficulty"] in VERIFIED_DIFFICULTY:
        out["difficulty_label"] = out["difficulty"]
        out["difficulty"] = VERIFIED_DIFFICULTY[out["difficulty"]]
    if kind == "r2e-gym":
        expected = raw.get("expected_output_json") or "{}"
        try:
            statuses = json.loads(expected) if isinstance(expected, str) else dict(expected)
        except (json.JSONDecodeError, TypeError, ValueError):
            statuses = {}
        commit = str(raw.get("commit_hash") or "")
        out.setdefault("instance_id", f"{str(raw['repo_name']).replace('/', '__')}-{commit[:12]}")
        out.setdefault("repo", raw["repo_name"])
        out.setdefault("base_commit", commit)
        out.setdefault("FAIL_TO_PASS", [t for t, s in statuses.items() if str(s).upper() == "PASSED"])
        out.setdefault("image", raw.get("docker_image", ""))
    elif kind == "swe-smith":
        out.setdefault("image", raw.get("image_name", ""))
        if raw.get("patch") and "test_patch" not in raw:
            out["bug_patch"] = raw["patch"]
            out["patch"] = ""
    elif kind == "swe-rebench":
        config = raw.get("install_config")
        if isinstance(config, dict) and config.get("log_parser") and not raw.get("log_parser"):
            out["log_parser"] = config["log_parser"]
        out.setdefault("image", raw.get("docker_image", ""))
    out["dataset_layout"] = kind
    return out
