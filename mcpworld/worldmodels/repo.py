"""Repository facts world models need: the workspace's patch, base-commit file contents, patched checkouts.

Built on the SWE package's git helpers and workspace pool, so a world model sees exactly what grading would.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from mcpworld.swe.grading import repo_dirname
from mcpworld.swe.instances import Instance, patch_files
from mcpworld.swe.workspace import Workspace, WorkspacePool, apply_patch, git


def base_commit(root: Path, instance: Instance) -> str:
    """The instance's base commit as a full id in the workspace (HEAD when the ref is unknown there)."""
    proc = git("rev-parse", "--verify", "--quiet", f"{instance.base_commit}^{{commit}}", cwd=root, check=False)
    if proc.returncode == 0:
        return proc.stdout.strip()
    return git("rev-parse", "HEAD", cwd=root).stdout.strip()


def workspace_patch(root: Path, base: str) -> str:
    """`git diff` of the working tree (new files included) against `base`, without touching the agent's index."""
    with tempfile.TemporaryDirectory(prefix="mcpworld-wm-") as tmp:
        index = Path(tmp) / "index"
        real_index = root / ".git" / "index"
        if real_index.is_file():
            shutil.copy2(real_index, index)
        env = {"GIT_INDEX_FILE": str(index)}
        git("add", "-A", "--", ".", cwd=root, env=env)
        return git("diff", "--cached", "--no-color", "--no-ext-diff", base, cwd=root, env=env).stdout


def file_at(root: Path, commit: str, path: str) -> str | None:
    """A file's text at `commit` (None when it did not exist)."""
    proc = git("show", f"{commit}:{path}", cwd=root, check=False)
    return proc.stdout if proc.returncode == 0 else None


def originals(root: Path, commit: str, patch: str) -> list[tuple[str, str]]:
    """(path, base content) of every file `patch` modifies that existed at `commit`."""
    out = []
    for path in patch_files(patch):
        text = file_at(root, commit, path)
        if text is not None:
            out.append((path, text))
    return out


@contextlib.contextmanager
def patched_checkout(instance: Instance, patch: str, pool: WorkspacePool,
                     test_patch: bool = False) -> Iterator[Workspace]:
    """A private checkout of the instance with `patch` (and optionally its test_patch) applied; removed after."""
    commit = pool.cache.commit(instance.repo_source, instance.base_commit)
    ws = pool.acquire(instance.repo_source, commit, repo_dirname(instance))
    try:
        if patch.strip():
            apply_patch(ws.root, patch, "patch")
        if test_patch and instance.test_patch.strip():
            apply_patch(ws.root, instance.test_patch, "test_patch")
        yield ws
    finally:
        pool.release(ws)


def instance_test_files(instance: Instance, pool: WorkspacePool) -> list[tuple[str, str]]:
    """(path, content) of the instance's test files with its test_patch applied: what grading will run."""
    named = [f if f.endswith(".py") or "/" in f else f.replace(".", "/") + ".py" for f in instance.test_files]
    paths = list(dict.fromkeys([*instance.test_patch_files, *named]))
    with patched_checkout(instance, "", pool, test_patch=True) as ws:
        out = []
        for path in paths:
            f = ws.root / path
            if f.is_file():
                out.append((path, f.read_text(encoding="utf-8", errors="replace")))
        return out
