"""Build the shipped SWE instances: real git repositories from files committed in the project, and instances.jsonl.

data/repos/<name>/ holds `repo.json` (SWE-bench `repo`, version, created_at), `src/` (the repository at its base
commit, bugs included) and `instances/<instance_id>/` with problem.md, gold.patch, test.patch and meta.json
(FAIL_TO_PASS, PASS_TO_PASS, optional test_cmd, difficulty, hints_text, created_at). Commits use a fixed identity
and date, so base_commit is the same on every machine.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from mcpworld.core.paths import home
from mcpworld.swe.instances import Instance, load_instances
from mcpworld.swe.workspace import git

DATA = Path(__file__).parent / "data" / "repos"
_FIXED = {"GIT_AUTHOR_DATE": "2024-01-01T00:00:00+00:00", "GIT_COMMITTER_DATE": "2024-01-01T00:00:00+00:00"}


def _data_files() -> list[Path]:
    return sorted(p for p in DATA.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")


def data_hash() -> str:
    """A digest of every shipped file: the build cache is keyed by it, so edits rebuild."""
    h = hashlib.sha256()
    for p in _data_files():
        h.update(str(p.relative_to(DATA)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _commit_repo(src: Path, dest: Path) -> str:
    """Copy `src` into a new git repository at `dest`, commit it deterministically, return the commit id."""
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    git("init", "--quiet", "--initial-branch=main", cwd=dest)
    git("add", "-A", cwd=dest)
    git("commit", "--quiet", "--no-gpg-sign", "-m", "Initial version", cwd=dest, env=_FIXED)
    return git("rev-parse", "HEAD", cwd=dest).stdout.strip()


def build_instances(dest: str | Path) -> Path:
    """Create the shipped repositories under `dest`/repos and write `dest`/instances.jsonl; returns its path."""
    dest = Path(dest)
    (dest / "repos").mkdir(parents=True, exist_ok=True)
    lines = []
    for repo_dir in sorted(p for p in DATA.iterdir() if p.is_dir()):
        meta = json.loads((repo_dir / "repo.json").read_text())
        repo_path = dest / "repos" / repo_dir.name
        commit = _commit_repo(repo_dir / "src", repo_path)
        for inst_dir in sorted(p for p in (repo_dir / "instances").iterdir() if p.is_dir()):
            extra = json.loads((inst_dir / "meta.json").read_text())
            lines.append(json.dumps({
                "instance_id": inst_dir.name, "repo": meta["repo"], "base_commit": commit,
                "problem_statement": (inst_dir / "problem.md").read_text(),
                "patch": (inst_dir / "gold.patch").read_text(), "test_patch": (inst_dir / "test.patch").read_text(),
                "version": meta.get("version", ""), "environment_setup_commit": commit,
                "created_at": extra.get("created_at", meta.get("created_at", "")),
                "hints_text": extra.get("hints_text", ""),
                "FAIL_TO_PASS": json.dumps(extra["FAIL_TO_PASS"]), "PASS_TO_PASS": json.dumps(extra["PASS_TO_PASS"]),
                "test_cmd": extra.get("test_cmd", ""), "difficulty": extra.get("difficulty", "medium"),
                "split": extra.get("split", "test"), "repo_source": f"repos/{repo_dir.name}",
            }))
    out = dest / "instances.jsonl"
    out.write_text("\n".join(lines) + "\n")
    return out


def builtin_path() -> Path:
    """instances.jsonl of the shipped instances, built into $MCPWORLD_HOME/swe/builtin/<digest> on first use."""
    target = home() / "swe" / "builtin" / data_hash()
    out = target / "instances.jsonl"
    if out.is_file():
        return out
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=target.parent))
    try:
        build_instances(tmp)
        try:
            os.rename(tmp, target)
        except OSError:
            if not out.is_file():  # another process built it first only if its file is there
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def builtin_instances() -> list[Instance]:
    """The shipped instances, validated (built first if needed)."""
    return load_instances(builtin_path())
