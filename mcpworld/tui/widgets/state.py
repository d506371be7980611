"""The live episode's database: its tables with row counts, a table's rows, and the diff since the start.

Read through `EpisodeControl.state`, so what you see is what the verifier will see. `table` (the one picked)
and `state` (what the server answered) are reactive: picking a table reloads, a new state redraws.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.reactive import reactive
from textual.widgets import DataTable, OptionList, Static
from textual.widgets.option_list import Option

from mcpworld.core import protocol as p
from mcpworld.tui.errors import ReportsWorkerErrors, error_text
from mcpworld.tui.render import diff_text
from mcpworld.tui.session import ServerSession

DIFF = "__diff__"


class StateBrowser(ReportsWorkerErrors, Horizontal):
    """Tables on the left; the selected table's rows (or the diff) on the right."""

    table: reactive[str] = reactive(DIFF, init=False)
    state: reactive[p.StateResult | None] = reactive(None, init=False, always_update=True)

    def __init__(self, session: ServerSession, **kwargs: Any):
        super().__init__(**kwargs)
        self.session = session

    @property
    def counts(self) -> dict[str, int]:
        return self.state.tables if self.state is not None else {}

    @property
    def diff(self) -> dict[str, Any]:
        return self.state.diff if self.state is not None else {}

    @property
    def rows(self) -> list[dict[str, Any]]:
        return self.state.rows if self.state is not None else []

    def compose(self) -> ComposeResult:
        yield OptionList(id="state-tables")
        with Vertical(id="state-right"):
            yield Static("No episode yet.", id="state-title", markup=False)
            yield DataTable(id="state-rows", zebra_stripes=True)
            with VerticalScroll(id="state-diff-box"):
                yield Static("", id="state-diff")

    @work(group="state", exclusive=True, exit_on_error=False)
    async def reload(self) -> None:
        """Fetch table counts and the diff, then the selected table's rows."""
        if not self.session.is_world:
            self.query_one("#state-title", Static).update("Not a world server: no episode state.")
            return
        ended = self.session.ended
        if self.session.episode is None and ended is not None:  # judged, so gone: its verdict kept the changes
            self.state = p.StateResult(episode=ended.episode, tables={}, diff=ended.verdict.evidence.get("diff", {}))
            return
        if self.session.episode is None:
            self.query_one("#state-title", Static).update("No episode yet: start a task in the console.")
            return
        try:
            state = await self.session.state(None if self.table == DIFF else self.table)
        except Exception as exc:
            self.query_one("#state-title", Static).update(Text(f"state failed: {error_text(exc)}", "red"))
            return
        self.state = state

    def watch_state(self) -> None:
        self._fill_tables()
        self._show_selected()

    def watch_table(self) -> None:
        self.reload()

    def _fill_tables(self) -> None:
        options = self.query_one("#state-tables", OptionList)
        changed = sum(1 for d in self.diff.values() if any(d.get(k) for k in ("inserted", "deleted", "updated")))
        highlighted = options.highlighted
        options.clear_options()
        options.add_option(Option(f"Δ diff ({changed} changed)", id=DIFF))
        for name, count in self.counts.items():
            options.add_option(Option(f"{name} ({count})", id=name))
        if highlighted is not None and highlighted < options.option_count:
            options.highlighted = highlighted
        else:
            options.highlighted = 0

    def _show_selected(self) -> None:
        title = self.query_one("#state-title", Static)
        rows_table = self.query_one("#state-rows", DataTable)
        diff_box = self.query_one("#state-diff-box")
        episode = self.session.episode or "?"
        if self.table == DIFF:
            ended = self.session.ended
            title.update(f"changes in {episode} since it started" if self.session.episode or ended is None else
                         f"changes in {ended.episode}, which its verdict ended")
            self.query_one("#state-diff", Static).update(diff_text(self.diff))
            rows_table.display, diff_box.display = False, True
            return
        title.update(f"{self.table}: {self.counts.get(self.table, 0)} rows (first 100) in {episode}")
        rows_table.display, diff_box.display = True, False
        rows_table.clear(columns=True)
        columns = list(self.rows[0]) if self.rows else []
        if columns:
            rows_table.add_columns(*columns)
            for row in self.rows:
                rows_table.add_row(*(str(row.get(c, "")) for c in columns))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self._select(event.option.id)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self._select(event.option.id)

    def _select(self, table: str | None) -> None:
        if table is not None:
            self.table = table
