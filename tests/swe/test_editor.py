"""The SWE editor and search: SWE-agent/OpenHands semantics and messages, and paths that must stay inside."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mcpworld.swe.editor import CLIPPED_NOTE, Editor, EditorError
from mcpworld.swe.lsp import LspError, LspSession
from mcpworld.swe.search import SearchError, search

SOURCE = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "pkg" / "deep" / "deeper").mkdir(parents=True)
    (root / "pkg" / "ops.py").write_text(SOURCE)
    (root / "pkg" / "deep" / "deeper" / "hidden_level3.py").write_text("x = 1\n")
    (root / ".secret").write_text("hidden\n")
    (root / "README.md").write_text("# demo\n")
    return root


def test_view_file_is_cat_n_and_view_range(repo: Path) -> None:
    ed = Editor(repo)
    out = ed.run("view", str(repo / "pkg/ops.py"))
    assert out.startswith(f"Here's the result of running `cat -n` on {repo}/pkg/ops.py:\n")
    assert "     1\tdef add(a, b):\n     2\t    return a + b\n" in out
    assert out.endswith("     6\t    return a - b\n")  # no phantom line after the final newline
    part = ed.run("view", str(repo / "pkg/ops.py"), view_range=[5, -1])
    assert "     5\tdef sub(a, b):" in part and "def add" not in part
    with pytest.raises(EditorError, match=r"Its first element `0` should be within the range of lines of the file: "
                                          r"\[1, 6\]"):
        ed.run("view", str(repo / "pkg/ops.py"), view_range=[0, 2])
    with pytest.raises(EditorError, match="should be larger or equal than its first"):
        ed.run("view", str(repo / "pkg/ops.py"), view_range=[4, 2])


def test_view_directory_two_levels_without_hidden(repo: Path) -> None:
    out = Editor(repo).run("view", str(repo))
    assert out.startswith(f"Here's the files and directories up to 2 levels deep in {repo}, excluding hidden items")
    assert f"{repo}/pkg/ops.py" in out and f"{repo}/pkg/deep/" in out and f"{repo}/README.md" in out
    assert "hidden_level3" not in out and ".secret" not in out
    with pytest.raises(EditorError, match="`view_range` parameter is not allowed when `path` points to a directory"):
        Editor(repo).run("view", str(repo), view_range=[1, 2])


def test_long_file_view_is_clipped_with_a_note(repo: Path) -> None:
    (repo / "big.py").write_text("x = 1\n" * 10000)
    out = Editor(repo).run("view", str(repo / "big.py"))
    assert out.endswith(CLIPPED_NOTE) and len(out) < 17000


def test_create_refuses_existing_and_undo_removes(repo: Path) -> None:
    ed = Editor(repo)
    with pytest.raises(EditorError, match=f"File already exists at: {repo}/pkg/ops.py. Cannot overwrite files using "
                                          "command `create`."):
        ed.run("create", str(repo / "pkg/ops.py"), file_text="x")
    with pytest.raises(EditorError, match="Parameter `file_text` is required for command: create."):
        ed.run("create", str(repo / "new.py"))
    assert ed.run("create", str(repo / "sub/new.py"), file_text="y = 2\n") == \
        f"File created successfully at: {repo}/sub/new.py"
    assert (repo / "sub/new.py").read_text() == "y = 2\n"
    ed.run("undo_edit", str(repo / "sub/new.py"))
    assert not (repo / "sub/new.py").exists()


def test_str_replace_unique_none_and_several(repo: Path) -> None:
    ed = Editor(repo)
    path = str(repo / "pkg/ops.py")
    with pytest.raises(EditorError, match=r"No replacement was performed, old_str `return a \* b` did not appear "
                                          f"verbatim in {repo}/pkg/ops.py."):
        ed.run("str_replace", path, old_str="return a * b", new_str="x")
    with pytest.raises(EditorError, match=r"Multiple occurrences of old_str `\(a, b\):` in lines \[1, 5\]. "
                                          "Please ensure it is unique"):
        ed.run("str_replace", path, old_str="(a, b):", new_str="(a, b, c):")
    out = ed.run("str_replace", path, old_str="    return a - b", new_str="    return b - a")
    assert out.startswith(f"The file {repo}/pkg/ops.py has been edited. Here's the result of running `cat -n` on a "
                          "snippet")
    assert "     6\t    return b - a" in out and out.endswith("Edit the file again if necessary.")
    assert (repo / "pkg/ops.py").read_text().endswith("return b - a\n")
    with pytest.raises(EditorError, match="`new_str` and `old_str` must be different"):
        ed.run("str_replace", path, old_str="def add", new_str="def add")


def test_insert_validates_line_and_undo_restores(repo: Path) -> None:
    ed = Editor(repo)
    path = str(repo / "pkg/ops.py")
    with pytest.raises(EditorError, match=r"Invalid `insert_line` parameter: 99. It should be within the range of "
                                          r"lines of the file: \[0, 6\]"):
        ed.run("insert", path, insert_line=99, new_str="x")
    out = ed.run("insert", path, insert_line=0, new_str="import math\n")
    assert "     1\timport math" in out and "correct indentation, no duplicate lines" in out
    ed.run("insert", path, insert_line=7, new_str="# end")
    text = (repo / "pkg/ops.py").read_text()
    assert text.startswith("import math\ndef add") and text.endswith("return a - b\n# end\n")
    ed.run("undo_edit", path)
    ed.run("undo_edit", path)
    assert (repo / "pkg/ops.py").read_text() == SOURCE
    with pytest.raises(EditorError, match=f"No edit history found for {repo}/pkg/ops.py."):
        ed.run("undo_edit", path)


def test_unknown_command_missing_path_and_relative_hint(repo: Path) -> None:
    ed = Editor(repo)
    with pytest.raises(EditorError, match="Unrecognized command delete. The allowed commands for the "
                                          "str_replace_editor tool are: view, create, str_replace, insert, undo_edit"):
        ed.run("delete", str(repo))
    with pytest.raises(EditorError, match=f"The path {repo}/nope.py does not exist. Please provide a valid path."):
        ed.run("view", str(repo / "nope.py"))
    with pytest.raises(EditorError, match=f"is not an absolute path, it should start with `/`. Maybe you meant "
                                          f"{repo}/nope.py"):
        ed.run("view", "nope.py")
    assert "def add" in ed.run("view", "pkg/ops.py")  # relative to the repository root: accepted
    with pytest.raises(EditorError, match="is a directory and only the `view` command"):
        ed.run("str_replace", str(repo / "pkg"), old_str="a", new_str="b")


@pytest.mark.parametrize("bad", ["{root}/../outside.txt", "/etc/passwd", "{root}/pkg/../../outside.txt",
                                 "../outside.txt"])
def test_paths_outside_are_refused_everywhere(repo: Path, bad: str) -> None:
    (repo.parent / "outside.txt").write_text("secret\n")
    path = bad.format(root=repo)
    ed = Editor(repo)
    for command, extra in [("view", {}), ("create", {"file_text": "x"}),
                           ("str_replace", {"old_str": "secret", "new_str": "owned"})]:
        with pytest.raises(EditorError, match="outside the repository"):
            ed.run(command, path, **extra)
    with pytest.raises(SearchError, match="outside the repository"):
        search(repo, "secret", path)
    with pytest.raises(LspError, match="outside the repository"):
        LspSession(repo).run("document_symbols", path)
    assert (repo.parent / "outside.txt").read_text() == "secret\n"


def test_symlinks_pointing_out_are_refused(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "target.py").write_text("secret = 1\n")
    os.symlink(outside / "target.py", repo / "link.py")
    os.symlink(outside, repo / "linkdir")
    os.symlink(repo / "pkg" / "ops.py", repo / "inner_link.py")  # inside: fine
    ed = Editor(repo)
    for path in (repo / "link.py", repo / "linkdir" / "target.py", repo / "linkdir" / "new.py"):
        with pytest.raises(EditorError, match="symbolic link"):
            ed.run("create" if path.name == "new.py" else "view", str(path), file_text="x")
    with pytest.raises(SearchError, match="symbolic link"):
        search(repo, "secret", str(repo / "linkdir"))
    assert "def add" in ed.run("view", str(repo / "inner_link.py"))
    assert not (outside / "new.py").exists()
    assert "secret = 1" not in search(repo, "secret")  # the walk does not follow links out either


def test_writes_into_git_metadata_refused(repo: Path) -> None:
    (repo / ".git").mkdir()
    (repo / ".git" / "config").write_text("[core]\n")
    with pytest.raises(EditorError, match="inside .git"):
        Editor(repo).run("create", str(repo / ".git" / "hooks-x"), file_text="x")


def test_search_content_and_files(repo: Path) -> None:
    out = search(repo, r"return a [+-] b")
    assert out.splitlines()[0] == f'Found 2 matches for "return a [+-] b" in {repo}:'
    assert f"{repo}/pkg/ops.py:2:    return a + b" in out
    assert search(repo, "*.py", kind="files").count("\n") == 2
    assert search(repo, "nothing-here") == f'No matches found for "nothing-here" in {repo}'
    assert "more than 1 matches" in search(repo, "a", max_results=1)
    with pytest.raises(SearchError, match="Invalid regular expression"):
        search(repo, "(unclosed")
    fixed = search(repo, "(a, b", fixed_strings=True, path=str(repo / "pkg/ops.py"))
    assert fixed.startswith(f'Found 2 matches for "(a, b" in {repo}/pkg/ops.py:')
    assert f"{repo}/pkg/ops.py:5:def sub(a, b):" in fixed
