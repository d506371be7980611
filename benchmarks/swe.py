"""SWE sandbox benchmarks: workspace creation on a ~50 MB repository, editor view / str_replace, LSP definition,
grading an instance, and `mcpworld swe grade` start-up.

Every figure has a baseline measured in the same run: a full `cp -r` copy of the checkout, a plain file read, a
`grep -rn` for the symbol, the instance's test command run directly on an already patched checkout, and a bare
`python -c pass`.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import Row, p50, timed
from mcpworld.swe.builder import build_instances
from mcpworld.swe.editor import Editor
from mcpworld.swe.grading import grade, reset_test_files
from mcpworld.swe.instances import load_instances
from mcpworld.swe.lsp import LspSession
from mcpworld.swe.shell import LocalBackend, scrubbed_env
from mcpworld.swe.workspace import RepoCache, WorkspacePool, apply_patch, git


def make_repo(dest: Path, megabytes: int = 50) -> Path:
    """A git repository of Python files totalling about `megabytes` MB (500 files of ~100 KB)."""
    rnd = random.Random(0)
    files = 500
    functions = max(1, megabytes * 1024 * 1024 // files // 95)  # ~95 bytes per two-line function
    dest.mkdir(parents=True)
    for d in range(20):
        pkg = dest / f"pkg{d}"
        pkg.mkdir()
        (pkg / "__init__.py").write_text("")
        for f in range(files // 20):
            body = "".join(f"def f{i}(x):\n    return x + {rnd.random()!r}  # {'y' * 40}\n"
                           for i in range(functions))
            (pkg / f"mod{f}.py").write_text(body)
    git("init", "--quiet", "--initial-branch=main", cwd=dest)
    git("add", "-A", cwd=dest)
    git("commit", "--quiet", "-m", "big", cwd=dest)
    return dest


def bench_workspace(quick: bool, tmp: Path) -> list[Row]:
    n = 5 if quick else 15
    src = make_repo(tmp / "big")
    size_mb = sum(f.stat().st_size for f in src.rglob("*") if ".git" not in f.parts) / 1e6
    pool = WorkspacePool(RepoCache(tmp / "cache"), warm=1, base_dir=str(tmp))
    cold_pool = WorkspacePool(pool.cache, warm=0, base_dir=str(tmp))
    try:
        commit = pool.cache.commit(str(src), "HEAD")
        pristine = cold_pool.acquire(str(src), commit, "big")
        pool.prepare(str(src), commit, "big")
        warm, cold, copies = [], [], []
        for i in range(n):
            pool.wait_ready()  # episodes last far longer than a checkout: the pool is ready when one starts
            t = time.perf_counter()
            ws = pool.acquire(str(src), commit, "big")
            warm.append(time.perf_counter() - t)
            pool.release(ws)
            pool.wait_ready()  # measure the cold path and the copy alone, not beside the pool's refill
            t = time.perf_counter()
            ws = cold_pool.acquire(str(src), commit, "big")
            cold.append(time.perf_counter() - t)
            cold_pool.release(ws)
            target = tmp / f"copy{i}"
            t = time.perf_counter()
            subprocess.run(["cp", "-r", str(pristine.root), str(target)], check=True)
            copies.append(time.perf_counter() - t)
            shutil.rmtree(target)
    finally:
        pool.close_all()
        cold_pool.close_all()
    warm_ms, cold_ms, copy_ms = p50(warm) * 1000, p50(cold) * 1000, p50(copies) * 1000
    return [
        Row(f"swe workspace start p50 ({size_mb:.0f} MB repo, warm pool)", warm_ms, "ms", "cp -r of the checkout",
            copy_ms, "<= 200 ms", warm_ms <= 200),
        Row(f"swe workspace cold checkout p50 ({size_mb:.0f} MB)", cold_ms, "ms", "cp -r of the checkout", copy_ms,
            "<= 2x cp -r", cold_ms <= 2 * copy_ms),  # git inflates every object; cp only copies bytes
    ]


def bench_editor(quick: bool, tmp: Path) -> list[Row]:
    n = 200 if quick else 2000
    root = tmp / "editor"
    root.mkdir()
    path = root / "module.py"
    path.write_text("".join(f"def function_{i}(value):\n    return value * {i}\n\n" for i in range(200)))
    editor = Editor(root)
    state = {"flip": False}

    def replace() -> None:
        a, b = "function_7(value):\n    return value * 7\n", "function_7(value):\n    return value * 7 + 0\n"
        old, new = (a, b) if not state["flip"] else (b, a)
        state["flip"] = not state["flip"]
        editor.run("str_replace", str(path), old_str=old, new_str=new)

    view_ms = p50(timed(lambda: editor.run("view", str(path)), n)) * 1000
    replace_ms = p50(timed(replace, n)) * 1000
    read_ms = p50(timed(path.read_text, n)) * 1000
    return [
        Row("swe editor view p50 (600-line file)", view_ms, "ms", "plain file read", read_ms, "<= 5 ms",
            view_ms <= 5),
        Row("swe editor str_replace p50", replace_ms, "ms", "plain file read", read_ms, "<= 5 ms", replace_ms <= 5),
    ]


def bench_lsp(quick: bool, tmp: Path) -> list[Row]:
    n = 10 if quick else 50
    instances = load_instances(build_instances(tmp / "built"))
    inst = instances[0]
    pool = WorkspacePool(RepoCache(tmp / "lsp-cache"), warm=0, base_dir=str(tmp))
    ws = pool.acquire(inst.repo_source, pool.cache.commit(inst.repo_source, inst.base_commit), "minicalc")
    session = LspSession(ws.root)
    stats = str(ws.root / "minicalc" / "stats.py")
    try:
        first = time.perf_counter()
        session.run("definition", stats, "require_numbers", 8)
        cold_ms = (time.perf_counter() - first) * 1000
        warm = timed(lambda: session.run("definition", stats, "require_numbers", 8), n)
        grep = timed(lambda: subprocess.run(["grep", "-rn", "def require_numbers", str(ws.root)],
                                            capture_output=True, check=True), n)
    finally:
        session.close()
        pool.close_all()
    warm_ms, grep_ms = p50(warm) * 1000, p50(grep) * 1000
    return [
        Row(f"swe lsp definition p50 warm (cold start {cold_ms:.0f} ms)", warm_ms, "ms", "grep -rn for the symbol",
            grep_ms, "<= 300 ms", warm_ms <= 300),
    ]


def bench_grading(quick: bool, tmp: Path) -> list[Row]:
    """One instance graded (fresh checkout, both patches, contained test run, log parsed) against its test command
    run directly (plain subprocess) on a checkout already patched, alternating so both see the same machine."""
    n = 5 if quick else 15
    inst = next(i for i in load_instances(build_instances(tmp / "grade-built")) if i.instance_id.endswith("calc-1"))
    pool = WorkspacePool(RepoCache(tmp / "grade-cache"), warm=1, base_dir=str(tmp))
    backend = LocalBackend()
    commit = pool.cache.commit(inst.repo_source, inst.base_commit)
    ready = pool.acquire(inst.repo_source, commit, "direct")
    apply_patch(ready.root, inst.patch)
    reset_test_files(ready.root, commit, inst.test_patch_files)
    apply_patch(ready.root, inst.test_patch, "test_patch")
    env = {**scrubbed_env(ready.home), "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    graded, direct = [], []
    try:
        pool.prepare(inst.repo_source, commit, "minicalc")
        for _ in range(n):
            pool.wait_ready()  # between episodes the pool has a checkout ready, as in serving
            t = time.perf_counter()
            g = grade(inst, inst.patch, pool, backend, 120)
            graded.append(time.perf_counter() - t)
            assert g.report["resolved"], g.log[-2000:]
            t = time.perf_counter()
            subprocess.run(["bash", "-c", inst.test_command()], cwd=ready.root, env=env, capture_output=True,
                           check=False)
            direct.append(time.perf_counter() - t)
    finally:
        pool.close_all()
    grade_ms, direct_ms = p50(graded) * 1000, p50(direct) * 1000
    return [Row(f"swe grade one instance p50 ({backend.describe()})", grade_ms, "ms",
                "its tests run directly on a patched checkout", direct_ms, "<= 1.2x direct",
                grade_ms <= 1.2 * direct_ms)]


def bench_grade_startup(quick: bool, tmp: Path) -> list[Row]:
    """`mcpworld swe grade` from process start to its report, on a prediction that runs no tests (empty patch)."""
    n = 3 if quick else 7
    built = build_instances(tmp / "startup-built")
    first = json.loads(built.read_text().splitlines()[0])["instance_id"]
    preds = tmp / "empty.jsonl"
    preds.write_text(json.dumps({"instance_id": first, "model_patch": "", "model_name_or_path": "m"}) + "\n")
    cli = [sys.executable, "-m", "mcpworld", "swe", "grade", "--instances", str(built), "--predictions", str(preds)]
    env = {**os.environ, "MCPWORLD_HOME": str(tmp / "startup-home")}
    startup = timed(lambda: subprocess.run(cli, env=env, capture_output=True, check=True), n)
    bare = timed(lambda: subprocess.run([sys.executable, "-c", "pass"], capture_output=True, check=True), n)
    start_ms, bare_ms = p50(startup) * 1000, p50(bare) * 1000
    return [Row("swe grade start-up p50 (CLI to report, nothing to run)", start_ms, "ms", "python -c pass", bare_ms,
                "<= 1500 ms", start_ms <= 1500)]


def bench_swe(quick: bool) -> list[Row]:
    """Every SWE figure, in one temporary folder removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="mcpworld-bench-swe-") as d:
        tmp = Path(d)
        return (bench_workspace(quick, tmp) + bench_editor(quick, tmp) + bench_lsp(quick, tmp)
                + bench_grading(quick, tmp) + bench_grade_startup(quick, tmp))


if __name__ == "__main__":
    from benchmarks.common import print_table

    print_table(bench_swe(quick=True))
