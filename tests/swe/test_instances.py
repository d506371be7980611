"""Instances files (JSON, JSONL, validation errors), repository sources (folders, archives), and workspaces."""

from __future__ import annotations

import json
import shutil
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

from mcpworld.swe.builder import build_instances, builtin_instances
from mcpworld.swe.instances import Instance, InstanceError, load_instances
from mcpworld.swe.workspace import RepoCache, WorkspaceError, WorkspacePool, apply_patch


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_instances(tmp_path_factory.mktemp("swe-built"))


def _records(built: Path) -> list[dict]:
    return [json.loads(line) for line in built.read_text().splitlines()]


def test_builder_is_deterministic_and_builtin_is_cached(built: Path, isolated_home: Path) -> None:
    first = builtin_instances()
    assert [i.base_commit for i in first] == [r["base_commit"] for r in _records(built)]
    assert len(first) >= 5 and len({i.repo for i in first}) >= 2
    assert all(Path(i.repo_source).is_relative_to(isolated_home) for i in first)
    assert [i.instance_id for i in builtin_instances()] == [i.instance_id for i in first]
    assert first[0].FAIL_TO_PASS and isinstance(first[0].FAIL_TO_PASS, list)


def test_json_list_and_lists_or_strings_are_accepted(built: Path, tmp_path: Path) -> None:
    records = _records(built)
    for r in records:
        r["repo_source"] = str(built.parent / r["repo_source"])
    records[0]["FAIL_TO_PASS"] = json.loads(records[0]["FAIL_TO_PASS"])  # a list, not a JSON string
    path = tmp_path / "instances.json"
    path.write_text(json.dumps(records, indent=2))
    loaded = load_instances(path)
    assert [i.instance_id for i in loaded] == [r["instance_id"] for r in records]
    assert loaded[0].FAIL_TO_PASS == records[0]["FAIL_TO_PASS"]
    (tmp_path / "wrapped.json").write_text(json.dumps({"instances": records[:2]}))
    assert len(load_instances(tmp_path / "wrapped.json")) == 2


@pytest.mark.parametrize(("change", "message"), [
    ({"FAIL_TO_PASS": "[not json"}, r"instances.jsonl:3: instance 'X': FAIL_TO_PASS: not a JSON list"),
    ({"FAIL_TO_PASS": "[]"}, r":3: instance 'X': FAIL_TO_PASS: needs at least one test"),
    ({"base_commit": "--upload-pack=evil"}, r":3: instance 'X': base_commit: '--upload-pack=evil' is not a commit"),
    ({"problem_statement": None}, r":3: instance 'X': problem_statement: required field missing"),
    ({"repo_source": "missing/repo"}, r":3: instance 'X': repo_source: no git repository folder or archive"),
    ({"patch": "not a diff"}, r":3: instance 'X': patch: not a unified diff"),
    ({"PASS_TO_PASS": [1, 2]}, r":3: instance 'X': PASS_TO_PASS: must be a list of non-empty test id strings"),
    ({"instance_id": "bad id/../x"}, r":3: instance 'bad id/../x': instance_id: .* may only hold"),
    ({"difficulty": "extreme"}, r":3: instance 'X': difficulty: must be easy, medium or hard"),
])
def test_bad_instances_name_file_line_and_field(built: Path, tmp_path: Path, change: dict, message: str) -> None:
    records = _records(built)
    for r in records:
        r["repo_source"] = str(built.parent / r["repo_source"])
    records[2].update({"instance_id": "X"} | change)
    path = tmp_path / "instances.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records))
    with pytest.raises(InstanceError, match=message):
        load_instances(path)


def test_malformed_files(tmp_path: Path) -> None:
    path = tmp_path / "instances.jsonl"
    path.write_text('{"instance_id": "a"}\n{broken\n')
    with pytest.raises(InstanceError, match=r"instances.jsonl:1: instance 'a': repo: required field missing"):
        load_instances(path)
    path.write_text('\n{broken\n')
    with pytest.raises(InstanceError, match=r"instances.jsonl:2: invalid JSON"):
        load_instances(path)
    arr = tmp_path / "instances.json"
    arr.write_text('[\n  {"instance_id": "a"},\n  42\n]')
    with pytest.raises(InstanceError, match=r"instances.json:2: instance 'a': repo"):
        load_instances(arr)
    arr.write_text('[\n  42\n]')
    with pytest.raises(InstanceError, match=r"instances.json:2: an instance must be a JSON object, got int"):
        load_instances(arr)
    with pytest.raises(InstanceError, match="cannot read instances file"):
        load_instances(tmp_path / "nope.json")


def test_duplicate_ids_refused(built: Path, tmp_path: Path) -> None:
    lines = built.read_text().splitlines()
    path = built.parent / "dup.jsonl"
    path.write_text("\n".join([lines[0], lines[1], lines[0]]))
    with pytest.raises(InstanceError, match=r"dup.jsonl:3: instance_id: duplicate .* \(first at line 1\)"):
        load_instances(path)


@pytest.mark.parametrize("fmt", ["tar.gz", "zip"])
def test_archive_sources_and_repos_dir(built: Path, tmp_path: Path, fmt: str) -> None:
    src = built.parent / "repos" / "textkit"
    archives = tmp_path / "archives"
    archives.mkdir()
    if fmt == "zip":
        with zipfile.ZipFile(archives / "mcpworld__textkit.zip", "w") as zf:
            for f in src.rglob("*"):
                zf.write(f, Path("textkit") / f.relative_to(src))
    else:
        with tarfile.open(archives / "mcpworld__textkit.tar.gz", "w:gz") as tf:
            tf.add(src, arcname="textkit")
    records = [r for r in _records(built) if r["repo"] == "mcpworld/textkit"]
    for r in records:
        del r["repo_source"]
    path = tmp_path / "instances.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records))
    loaded = load_instances(path, repos_dir=archives)
    assert loaded[0].repo_source.endswith(fmt)
    pool = WorkspacePool(warm=0)
    try:
        ws = pool.acquire(loaded[0].repo_source, loaded[0].base_commit, "textkit")
        assert (ws.root / "textkit" / "slug.py").is_file()
    finally:
        pool.close_all()


def test_archive_with_escaping_entries_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "evil.zip"
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("../../escaped.txt", "x")
    with pytest.raises(WorkspaceError, match="points outside the archive"):
        RepoCache(tmp_path / "cache").bare(str(bad))
    assert not (tmp_path.parent / "escaped.txt").exists()
    plain = tmp_path / "plain.tar"
    (tmp_path / "notgit").mkdir()
    (tmp_path / "notgit" / "a.py").write_text("x = 1\n")
    with tarfile.open(plain, "w") as tf:
        tf.add(tmp_path / "notgit", arcname="notgit")
    with pytest.raises(WorkspaceError, match="holds no git repository"):
        RepoCache(tmp_path / "cache").bare(str(plain))


def test_workspaces_are_private_diff_new_files_and_removed(built: Path) -> None:
    inst: Instance = load_instances(built)[0]
    pool = WorkspacePool(warm=1)
    try:
        commit = pool.cache.commit(inst.repo_source, inst.base_commit)
        with pytest.raises(WorkspaceError, match="base_commit deadbeef not found"):
            pool.cache.commit(inst.repo_source, "deadbeef")
        a = pool.acquire(inst.repo_source, commit, "minicalc")
        pool.wait_ready()
        b = pool.acquire(inst.repo_source, commit, "minicalc")  # from the warm pool
        assert a.root != b.root and a.root.name == "minicalc"
        (a.root / "minicalc" / "stats.py").write_text("changed\n")
        (a.root / "minicalc" / "extra.py").write_text("NEW = 1\n")
        (a.root / "minicalc" / "__pycache__").mkdir()
        (a.root / "minicalc" / "__pycache__" / "x.pyc").write_bytes(b"\0junk")
        diff = a.diff()
        assert "+changed" in diff and "new file mode" in diff and "+NEW = 1" in diff and "pyc" not in diff
        assert b.diff() == "" and "changed" not in (b.root / "minicalc" / "stats.py").read_text()
        applied = pool.acquire(inst.repo_source, commit, "minicalc")
        apply_patch(applied.root, diff)
        assert (applied.root / "minicalc" / "extra.py").read_text() == "NEW = 1\n"
        with pytest.raises(WorkspaceError, match="patch does not apply"):
            apply_patch(applied.root, diff)
        pool.release(a)
        assert not a.parent.exists()
        parents = [b.parent, applied.parent]
    finally:
        pool.close_all()
    assert not any(p.exists() for p in parents)


def test_local_folder_source_gets_new_commits(tmp_path: Path, built: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(built.parent / "repos" / "minicalc", repo)
    cache = RepoCache(tmp_path / "cache")
    cache.bare(str(repo))
    from mcpworld.swe.workspace import git

    (repo / "NEW.md").write_text("hi\n")
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "more", cwd=repo)
    head = git("rev-parse", "HEAD", cwd=repo).stdout.strip()
    assert cache.commit(str(repo), head) == head  # fetched on demand
    assert cache.read_file(str(repo), head, "NEW.md") == "hi\n"


def test_pool_keeps_at_most_max_spares_least_recently_used_out(built: Path) -> None:
    inst: Instance = load_instances(built)[0]
    pool = WorkspacePool(warm=1, max_spares=1)
    try:
        commit = pool.cache.commit(inst.repo_source, inst.base_commit)
        first = pool.acquire(inst.repo_source, commit, "a")
        pool.wait_ready()
        spare_a = pool._ready[(pool.cache.at(inst.repo_source, commit), commit, "a")][0]
        second = pool.acquire(inst.repo_source, commit, "b")
        pool.wait_ready()  # the pool's one worker removed the evicted spare before preparing b's
        counts = {key[2]: len(v) for key, v in pool._ready.items()}
        assert counts == {"a": 0, "b": 1}
        assert not spare_a.parent.exists() and first.root.is_dir() and second.root.is_dir()
    finally:
        pool.close_all()


def test_same_size_edit_right_after_checkout_is_in_the_diff(built: Path) -> None:
    # git trusts cached stat data unless a file is "racily clean"; the submit index must keep that judgement
    from mcpworld.swe.editor import Editor

    inst: Instance = load_instances(built)[1]
    pool = WorkspacePool(warm=0)
    try:
        ws = pool.acquire(inst.repo_source, pool.cache.commit(inst.repo_source, inst.base_commit), "minicalc")
        Editor(ws.root).run("str_replace", str(ws.root / "minicalc/numbers.py"),
                            old_str="        return lo\n    return x", new_str="        return hi\n    return x")
        time.sleep(1.1)
        assert "+        return hi" in ws.diff()
    finally:
        pool.close_all()
