"""The call history of one server: every console call (this run and earlier ones), newest first.

Enter puts a call back in the console to edit and run again; `c` copies it as JSON. `records` is reactive:
adding one redraws the table.
"""

from __future__ import annotations

from datetime import datetime

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import DataTable, Static

from mcpworld.tui.render import dumps
from mcpworld.tui.store import CallRecord


class CallHistory(Horizontal):
    """Calls on the left (time, ok, ms, tool); the highlighted call's arguments and result on the right."""

    BINDINGS = [
        Binding("c", "copy_call", "Copy call"),
    ]

    class Rerun(Message):
        """Load this call into the console."""

        def __init__(self, record: CallRecord):
            super().__init__()
            self.record = record

    records: reactive[list[CallRecord]] = reactive(list, init=False, always_update=True)
    """Oldest first, as the history file keeps them; shown newest first."""

    def compose(self) -> ComposeResult:
        yield DataTable(id="history-table", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="history-detail"):
            yield Static("No calls yet: calls made in the console appear here.", id="history-json", markup=False)

    def on_mount(self) -> None:
        table = self.query_one("#history-table", DataTable)
        # fixed widths for the outcome and latency, the tool last: a long name is what the table's edge cuts
        for label, width in (("time", 8), ("ok", 3), ("ms", 5), ("tool", None)):
            table.add_column(label, key=label, width=width)

    def set_records(self, records: list[CallRecord]) -> None:
        """The earlier calls read from disk, before any made in this run."""
        self.records = [*records, *self.records]

    def add(self, record: CallRecord) -> None:
        self.records = [*self.records, record]

    @property
    def newest_first(self) -> list[CallRecord]:
        return self.records[::-1]

    def watch_records(self) -> None:
        table = self.query_one("#history-table", DataTable)
        table.clear()
        for record in self.newest_first:
            ok = Text("ok", "green") if record.ok else Text("err", "red")
            when = datetime.fromtimestamp(record.at).strftime("%H:%M:%S")
            table.add_row(when, ok, f"{record.latency_ms:.0f}", record.tool[:32])
        self._show(self.selected())

    def selected(self) -> CallRecord | None:
        row = self.query_one("#history-table", DataTable).cursor_row
        shown = self.newest_first
        return shown[row] if 0 <= row < len(shown) else None

    def _show(self, record: CallRecord | None) -> None:
        body = self.query_one("#history-json", Static)
        if record is None:
            body.update("No calls yet: calls made in the console appear here.")
            return
        body.update(Text(dumps({"tool": record.tool, "arguments": record.arguments, "result": record.result})
                         + "\n\nEnter: back to the console with these arguments · c: copy as JSON"))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self._show(self.selected())

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        record = self.selected()
        if record is not None:
            self.post_message(self.Rerun(record))

    def action_copy_call(self) -> None:
        record = self.selected()
        if record is None:
            self.notify("Nothing to copy: no calls yet.", severity="warning")
            return
        self.app.copy_to_clipboard(dumps(record.to_json()))
        self.notify(f"Copied the {record.tool} call as JSON.")
