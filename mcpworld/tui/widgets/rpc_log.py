"""The JSON-RPC log of one connection: a searchable table of messages, the selected one as JSON, copy/save.

It listens to the session's `RpcLog` (fed from the wire), so messages appear as they are sent and a request's
row completes when its response arrives, whatever screen made the call. `query_text` is reactive: typing in
the search box re-filters through its watcher.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.reactive import reactive
from textual.widgets import DataTable, Input, Static

from mcpworld.tui.render import dumps
from mcpworld.tui.rpclog import RpcEntry, RpcLog

ARROW = {"sent": "→", "received": "←"}
STATUS_WIDTH = 3  # "…", "ok", "err"
MS_WIDTH = 5  # up to 99999 ms


def status_of(entry: RpcEntry) -> Text:
    if entry.pending:
        return Text("…", "yellow")
    return Text("ok", "green") if entry.ok else Text("err", "red")


class RpcLogView(Vertical):
    """Search box, message table and detail pane over an `RpcLog`."""

    BINDINGS = [
        Binding("slash", "focus_search", "Search"),
        Binding("c", "copy_entry", "Copy"),
        Binding("C", "copy_all", "Copy shown", show=False),  # the footer fits 80 columns; F1 lists these
        Binding("ctrl+s", "save", "Save log", show=False),
    ]

    query_text: reactive[str] = reactive("", init=False)

    def __init__(self, log: RpcLog, label: str = "log", save_dir: Path | None = None, **kwargs: object):
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.rpc_log = log
        self.log_name = label
        self.save_dir = save_dir or Path.cwd()
        self.shown: list[RpcEntry] = []
        self.shown_seqs: set[int] = set()
        self.saved_path: Path | None = None

    def compose(self) -> ComposeResult:
        yield Input(placeholder="search messages (words, any order)", id="log-search", compact=True)
        with Horizontal(id="log-body"):
            yield DataTable(id="log-table", cursor_type="row", zebra_stripes=True)
            with VerticalScroll(id="log-detail"):
                yield Static("No messages yet.", id="log-json")

    def on_mount(self) -> None:
        table = self.query_one("#log-table", DataTable)
        # fixed widths for what fills in later (a row is added before its response: "…", then "err", "1234"),
        # and the method last, so a long one is what the table's edge cuts, never the outcome
        for label, key, width in (("#", "seq", None), ("", "dir", 1), ("", "status", STATUS_WIDTH),
                                  ("ms", "ms", MS_WIDTH), ("method", "method", None)):
            table.add_column(label, key=key, width=width)
        self.rpc_log.listeners.append(self._on_entry)
        self.watch_query_text()

    def on_unmount(self) -> None:
        if self._on_entry in self.rpc_log.listeners:
            self.rpc_log.listeners.remove(self._on_entry)

    def _on_entry(self, entry: RpcEntry) -> None:
        """A new message, or a request's response: add its row, or complete the row it has."""
        if entry.seq in self.shown_seqs:
            table = self.query_one("#log-table", DataTable)
            key = str(entry.seq)
            table.update_cell(key, "ms", "" if entry.latency_ms is None else f"{entry.latency_ms:.0f}")
            table.update_cell(key, "status", status_of(entry))
            if self.selected() is entry:
                self._show(entry)
        elif entry.matches(self.query_text):
            self.shown.append(entry)
            self.shown_seqs.add(entry.seq)
            self._add_row(entry)

    def _add_row(self, entry: RpcEntry) -> None:
        table = self.query_one("#log-table", DataTable)
        method = entry.method.removeprefix("io.mcpworld/")
        ms = "" if entry.latency_ms is None else f"{entry.latency_ms:.0f}"
        table.add_row(str(entry.seq), ARROW[entry.direction], status_of(entry), ms, method[:32], key=str(entry.seq))
        if table.row_count == 1:
            self._show(entry)

    def watch_query_text(self) -> None:
        table = self.query_one("#log-table", DataTable)
        table.clear()
        self.shown = self.rpc_log.search(self.query_text)
        self.shown_seqs = {e.seq for e in self.shown}
        for entry in self.shown:
            self._add_row(entry)
        if not self.shown:
            self.query_one("#log-json", Static).update(
                "No messages yet." if not self.rpc_log.entries else f"No entry matches {self.query_text!r}.")

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "log-search":
            self.query_text = event.value

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "log-search":
            self.query_one("#log-table", DataTable).focus()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "log-table" and 0 <= event.cursor_row < len(self.shown):
            self._show(self.shown[event.cursor_row])

    def _show(self, entry: RpcEntry) -> None:
        self.query_one("#log-json", Static).update(Text(dumps(entry.to_json())))

    def selected(self) -> RpcEntry | None:
        table = self.query_one("#log-table", DataTable)
        row = table.cursor_row
        return self.shown[row] if 0 <= row < len(self.shown) else None

    def action_focus_search(self) -> None:
        self.query_one("#log-search", Input).focus()

    def action_copy_entry(self) -> None:
        entry = self.selected()
        if entry is None:
            self.notify("Nothing to copy: the log is empty.", severity="warning")
            return
        self.app.copy_to_clipboard(dumps(entry.to_json()))
        self.notify(f"Copied message #{entry.seq} ({entry.method}) as JSON.")

    def action_copy_all(self) -> None:
        self.app.copy_to_clipboard(self.rpc_log.dumps(self.shown))
        self.notify(f"Copied {len(self.shown)} entries as JSON.")

    def action_save(self) -> None:
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in self.log_name)
        self.save(self.save_dir / f"mcpworld-rpc-{safe}-{stamp}.json", list(self.shown))

    @work(thread=True, group="save", exit_on_error=False)
    def save(self, path: Path, entries: list[RpcEntry]) -> None:
        """Thread worker: the file is written off the event loop."""
        try:
            self.rpc_log.save(path, entries)
        except OSError as exc:
            self.app.call_from_thread(self.notify, f"Could not save the log: {exc}", severity="error")
            return
        self.app.call_from_thread(self._saved, path, len(entries))

    def _saved(self, path: Path, count: int) -> None:
        self.saved_path = path
        self.notify(f"Saved {count} entries to {path}")
