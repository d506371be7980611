"""Build the shipped SWE instances: real git repositories from files committed in the project, and instances.jsonl.

data/repos/<name>/ holds `repo.json` (SWE-bench `repo`, version, created_at), `src/` (the repository at its base
commit, bugs included) and `instances/<instance_id>/` with problem.md, gold.patch, test.patch and meta.json
(FAIL_TO_PASS, PASS_TO_PASS, optional test_cmd, difficulty, hints_text, created_at). Commits use a fixed identity
and date, so base_commit is the same on every machine.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from mcpworld.core.paths import home
from mcpworld.swe.instances import Instance, load_instances
from mcpworld.swe.workspace import git

DATA = Path(__file__).parent / "data" / "repos"
PROJECTS = Path(__file__).parent / "data" / "projects"
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
    """Create the shipped repositories under `dest`/repos and write `dest`/instances.jsonl; returns its path.

    `dest` is made absolute first: git runs in other folders, where a relative path names nothing (issue 35)."""
    dest = Path(dest).resolve()
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


# -- real projects from PyPI sdists ----------------------------------------------------------------------------
# data/projects/<name>/project.json: `repo`, `pypi` (name==version of the sdist), `version`, `created_at`,
# `include` (path prefixes), `exclude`/`keep` (globs), `env` (the instances' environment spec); instances/<id>/
# as for data/repos (gold.patch is the upstream fix: the base commit is the sdist with it reversed).


def _projects() -> list[tuple[Path, dict]]:
    return [(d, json.loads((d / "project.json").read_text())) for d in sorted(PROJECTS.iterdir()) if d.is_dir()]


def project_requirements() -> tuple[list[str], list[str]]:
    """What the shipped real projects need from PyPI: (sdists, wheels for their environments)."""
    sdists = [meta["pypi"] for _, meta in _projects()]
    wheels = sorted({req for _, meta in _projects() for req in meta.get("env", {}).get("packages", [])})
    return sdists, wheels


def fetch_projects(sdists: Path, wheelhouse: Path) -> None:
    """Download the sdists and wheels the projects need with pip (the one network use), skipping what is there."""
    need, wheels = project_requirements()
    missing = [spec for spec in need if find_sdist(sdists, spec) is None]
    for folder, specs, extra in ((sdists, missing, ["--no-deps", "--no-binary", ":all:"]),
                                 (wheelhouse, wheels, ["--only-binary", ":all:"])):
        if not specs:
            continue
        folder.mkdir(parents=True, exist_ok=True)
        done = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                               "-d", str(folder), *extra, *specs], capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            raise OSError(f"pip download {' '.join(specs)} failed (network or index unreachable?): "
                          f"{done.stderr.strip()[-800:]}")


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def find_sdist(folder: Path, spec: str) -> Path | None:
    name, version = spec.split("==")
    want = _normal(f"{name}-{version}")
    for path in sorted(folder.glob("*.tar.gz")) if folder.is_dir() else []:
        if _normal(path.name.removesuffix(".tar.gz")) == want:
            return path
    return None


def _selected(rel: str, meta: dict) -> bool:
    if not any(rel.startswith(prefix) for prefix in meta.get("include", [""])):
        return False
    if any(fnmatch.fnmatch(rel, g) for g in meta.get("keep", [])):
        return True
    return not any(fnmatch.fnmatch(rel, g) for g in meta.get("exclude", []))


def _unpack_sdist(sdist: Path, meta: dict, dest: Path) -> None:
    """The sdist's selected regular files (without its top folder) into `dest`, read in one pass."""
    with tarfile.open(sdist) as tf:
        for member in tf:
            rel = member.name.split("/", 1)[1] if "/" in member.name else ""
            if not member.isfile() or not rel or ".." in rel.split("/") or not _selected(rel, meta):
                continue
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            source = tf.extractfile(member)
            assert source is not None
            target.write_bytes(source.read())
            if member.mode & 0o111:
                target.chmod(0o755)


def build_projects(dest: str | Path, sdists: str | Path) -> Path:
    """Repositories and instances.jsonl for the real projects, from their sdists in `sdists`.

    Each instance's base commit is a root commit (no earlier history gives the fix away): the sdist's files with
    the gold patch reversed. Its fix follows as a later commit tagged `fixed/<id>`, as in a real repository whose
    future the agent must not see.
    """
    dest = Path(dest).resolve()  # git runs in other folders: a relative path would name nothing there
    lines = []
    for project_dir, meta in _projects():
        sdist = find_sdist(Path(sdists), meta["pypi"])
        if sdist is None:
            raise FileNotFoundError(f"no sdist for {meta['pypi']} in {sdists}: `pip download --no-deps "
                                    f"--no-binary :all: {meta['pypi']} -d {sdists}` (or `mcpworld swe "
                                    "build-projects` without --offline)")
        repo = dest / "repos" / project_dir.name
        shutil.rmtree(repo, ignore_errors=True)
        repo.mkdir(parents=True)
        git("init", "--quiet", "--initial-branch=main", cwd=repo)
        for inst_dir in sorted(p for p in (project_dir / "instances").iterdir() if p.is_dir()):
            iid, extra = inst_dir.name, json.loads((inst_dir / "meta.json").read_text())
            gold, test = (inst_dir / "gold.patch").read_text(), (inst_dir / "test.patch").read_text()
            git("checkout", "--quiet", "--orphan", f"bugs/{iid}", cwd=repo)
            git("rm", "-r", "-q", "-f", "--ignore-unmatch", ".", cwd=repo)
            _unpack_sdist(sdist, meta, repo)
            git("apply", "-R", "-", cwd=repo, input=gold)
            git("add", "-A", cwd=repo)
            git("commit", "--quiet", "--no-gpg-sign", "-m", f"Import {meta['pypi']}", cwd=repo, env=_FIXED)
            base = git("rev-parse", "HEAD", cwd=repo).stdout.strip()
            for patch in (gold, test):
                git("apply", "-", cwd=repo, input=patch)
            git("add", "-A", cwd=repo)
            git("commit", "--quiet", "--no-gpg-sign", "-m", f"Fix {iid}", cwd=repo, env=_FIXED)
            git("tag", f"fixed/{iid}", cwd=repo)
            lines.append(json.dumps({
                "instance_id": iid, "repo": meta["repo"], "base_commit": base,
                "problem_statement": (inst_dir / "problem.md").read_text(), "patch": gold, "test_patch": test,
                "version": meta["version"], "environment_setup_commit": base,
                "created_at": extra.get("created_at", meta.get("created_at", "")), "hints_text": "",
                "FAIL_TO_PASS": json.dumps(extra["FAIL_TO_PASS"]), "PASS_TO_PASS": json.dumps(extra["PASS_TO_PASS"]),
                "test_cmd": extra.get("test_cmd", ""), "difficulty": extra.get("difficulty", "medium"),
                "install_config": meta.get("env"), "repo_source": f"repos/{project_dir.name}",
            }))
        git("checkout", "--quiet", "--detach", cwd=repo)
    out = dest / "instances.jsonl"
    out.write_text("\n".join(lines) + "\n")
    return out
