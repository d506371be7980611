"""Step through recorded episodes (trajectory JSONL) turn by turn: messages, calls, results, verdict, diff.

`trajectories`, `current` and `page` are reactive: loading a file, picking an episode and turning a page only
set them; watchers draw the table and the page (and `validate_page` keeps the page in range).
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Button, DataTable, Footer, Header, Input, Static

from mcpworld.agent.trajectory import Trajectory, read_trajectories
from mcpworld.tui.errors import ReportsWorkerErrors, error_text
from mcpworld.tui.render import Page, trajectory_pages


class TrajectoriesScreen(ReportsWorkerErrors, Screen):
    """File path on top; episodes on the left; the current page (task, turn k, outcome) on the right."""

    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("n", "next_page", "Next turn"),
        Binding("p", "prev_page", "Prev turn"),
        Binding("g", "first_page", "Task", show=False),
        Binding("G", "last_page", "Outcome", show=False),
        Binding("o", "focus_path", "Open file"),
    ]

    trajectories: reactive[list[Trajectory]] = reactive(list, init=False, always_update=True)
    current: reactive[Trajectory | None] = reactive(None, init=False, always_update=True)
    page: reactive[int] = reactive(0, init=False, always_update=True)

    def __init__(self, path: str | Path | None = None):
        super().__init__()
        self.path = Path(path) if path else None
        self.pages: list[Page] = []

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="path-bar"):
            yield Input(str(self.path or ""), placeholder="trajectory file (.jsonl), Enter to open", id="path",
                        compact=True)
            yield Button("Open", id="open", compact=True)
        with Horizontal(id="traj-body"):
            yield DataTable(id="episodes", cursor_type="row", zebra_stripes=True)
            with Vertical(id="page-side"):
                yield Static("", id="page-title", markup=False)
                with VerticalScroll(id="page-box"):
                    yield Static("Open a trajectory file: type its path above and press Enter.", id="page",
                                 markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.title = "Trajectories"
        self.query_one("#episodes", DataTable).add_columns("task", "#", "reward", "ok")
        if self.path is not None:
            self.load(self.path)
        else:
            self.query_one("#path", Input).focus()

    # -- loading -----------------------------------------------------------------------------------------

    @work(thread=True, group="read", exclusive=True, exit_on_error=False)
    def load(self, path: Path) -> None:
        """Thread worker: big files are parsed off the event loop."""
        try:
            if not path.is_file():
                raise FileNotFoundError(f"no such file: {path}")
            trajectories = read_trajectories(path)
        except Exception as exc:
            self.app.call_from_thread(self._failed, error_text(exc))
            return
        self.app.call_from_thread(self._loaded, path, trajectories)

    def _failed(self, message: str) -> None:
        self.query_one("#page", Static).update(Text(message, "red"))
        self.notify(message, title="Trajectories", severity="error")

    def _loaded(self, path: Path, trajectories: list[Trajectory]) -> None:
        self.path = path
        self.trajectories = trajectories

    def watch_trajectories(self, trajectories: list[Trajectory]) -> None:
        name = self.path.name if self.path else ""
        self.sub_title = f"{name} · {len(trajectories)} episode" + ("" if len(trajectories) == 1 else "s")
        table = self.query_one("#episodes", DataTable)
        table.clear()
        for i, t in enumerate(trajectories):
            ok = Text("✓", "green") if t.verdict and t.verdict.passed else Text("✗", "red")
            table.add_row(t.task[:20], str(t.sample), f"{t.reward:g}", ok, key=str(i))
        if not trajectories:
            self.query_one("#page", Static).update(f"{name} holds no complete trajectory.")
            return
        self.current = trajectories[0]
        table.focus()

    def watch_current(self, current: Trajectory | None) -> None:
        self.pages = trajectory_pages(current) if current is not None else []
        self.page = 0

    def validate_page(self, page: int) -> int:
        return max(0, min(page, len(self.pages) - 1))

    def watch_page(self, page: int) -> None:
        if not self.pages:
            return
        current = self.pages[page]
        self.query_one("#page-title", Static).update(f" {current.title}  ·  page {page + 1}/{len(self.pages)}")
        self.query_one("#page", Static).update(current.body)
        self.query_one("#page-box", VerticalScroll).scroll_home(animate=False)

    # -- events ------------------------------------------------------------------------------------------

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if 0 <= event.cursor_row < len(self.trajectories):
            self.current = self.trajectories[event.cursor_row]

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "path":
            self.open_path()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "open":
            self.open_path()

    def open_path(self) -> None:
        text = self.query_one("#path", Input).value.strip()
        if not text:
            self.notify("Type the path of a trajectory file first.", severity="warning")
            return
        self.load(Path(text).expanduser())

    # -- actions -----------------------------------------------------------------------------------------

    def action_next_page(self) -> None:
        self.page += 1

    def action_prev_page(self) -> None:
        self.page -= 1

    def action_first_page(self) -> None:
        self.page = 0

    def action_last_page(self) -> None:
        self.page = len(self.pages) - 1

    def action_focus_path(self) -> None:
        self.query_one("#path", Input).focus()

    def action_back(self) -> None:
        self.dismiss()
