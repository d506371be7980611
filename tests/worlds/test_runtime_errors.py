"""What an agent is told when a tool's write breaks a rule of the data (`WorldRuntime._run`): the rule, in a line,
and that nothing changed; not SQLAlchemy's `IntegrityError (sqlite3.IntegrityError) ...` dump, and no identity
warning on the console (the docs' tutorial world did both, issue 35)."""

from __future__ import annotations

import warnings
from pathlib import Path

from mcpworld.worlds.loader import load_world
from mcpworld.worlds.runtime import WorldRuntime
from tests.test_docs import example


def test_a_duplicate_key_is_refused_in_plain_words_and_changes_nothing(isolated_home: Path) -> None:
    text = example("worlds.md", "world")
    check = ('    if db.get(ListEntry, item_id) is not None:\n'
             '        raise ToolError(f"{item.name} is already on the list")\n')
    assert check in text
    pkg = isolated_home / "worlds" / "naive_pantry"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(text.replace(check, "").replace('name="pantry"', 'name="naive_pantry"'))
    runtime = WorldRuntime(load_world(pkg))
    episode = runtime.fork("restock")
    try:
        short = next(r for r in runtime.read_rows(episode.conn, "item").values() if r["stock"] < r["minimum"])
        assert runtime.call(episode, "add_to_list", {"item_id": short["id"], "quantity": 2}).error is None
        with warnings.catch_warnings(record=True) as caught:
            again = runtime.call(episode, "add_to_list", {"item_id": short["id"], "quantity": 5})
        assert again.error == ("add_to_list refused: the write breaks a rule of the data (UNIQUE constraint failed: "
                               "list_entry.item_id); nothing was changed")
        assert not [w for w in caught if "conflicts with persistent instance" in str(w.message)]
        assert [r["quantity"] for r in runtime.read_rows(episode.conn, "list_entry").values()] == [2]
    finally:
        episode.close()
