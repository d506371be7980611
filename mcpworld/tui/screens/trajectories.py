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
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, DataTable, Footer, Header, Input, OptionList, Static
from textual.widgets.option_list import Option

from mcpworld.agent.trajectory import Trajectory, read_trajectories
from mcpworld.core.paths import home
from mcpworld.tui.errors import ReportsWorkerErrors, UserError, error_text
from mcpworld.tui.render import Page, trajectory_pages

SUFFIXES = (".jsonl",)


class OpenError(UserError):
    """A path that cannot be opened as trajectories; the message says what to type instead."""


def trajectory_files(folder: Path) -> list[Path]:
    """The trajectory files (.jsonl) directly in `folder`, newest first."""
    files = [p for p in folder.iterdir() if p.is_file() and p.name.endswith(SUFFIXES)]
    return sorted(files, key=lambda p: (p.stat().st_mtime, p.name), reverse=True)


def to_open(path: Path) -> Path | list[Path]:
    """The file to read for `path`: itself, the only trajectory file of a folder, or a folder's files to choose
    from (newest first). OpenError says why there is none."""
    if path.is_file():
        return path
    if path.is_dir():
        files = trajectory_files(path)
        if not files:
            raise OpenError(f"{path} holds no trajectory files (.jsonl): type the path of one, or of a folder "
                            "that holds some (`mcpworld run` writes them under ~/.mcpworld/runs).")
        return files[0] if len(files) == 1 else files
    if path.exists():
        raise OpenError(f"{path} is neither a file nor a folder.")
    raise OpenError(f"{path} does not exist: type the path of a trajectory file (.jsonl) or of a folder "
                    "of them.")


class ChooseFileScreen(ModalScreen[Path | None]):
    """A folder's trajectory files, newest first: Enter opens one, Esc cancels."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, folder: Path, files: list[Path]):
        super().__init__()
        self.folder, self.files = folder, files

    def compose(self) -> ComposeResult:
        from datetime import datetime

        with Vertical():
            yield Static(f"{len(self.files)} trajectory files in {self.folder}, newest first: Enter opens one, "
                         "Esc cancels.", markup=False)
            options = []
            for p in self.files:
                stat = p.stat()
                when = datetime.fromtimestamp(stat.st_mtime).strftime("%Y-%m-%d %H:%M")
                options.append(Option(Text.assemble(p.name, (f"  {when} · {stat.st_size / 1024:.0f} KiB", "dim")),
                                      id=str(p)))
            yield OptionList(*options, id="files")

    def on_mount(self) -> None:
        files = self.query_one("#files", OptionList)
        files.highlighted = 0
        files.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(Path(event.option.id) if event.option.id else None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class TrajectoriesScreen(ReportsWorkerErrors, Screen):
    """File path on top; episodes on the left; the current page (task, turn k, outcome) on the right."""

    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("n", "next_page", "Next turn"),
        Binding("p", "prev_page", "Prev turn"),
        Binding("g", "first_page", "Task", show=False),
        Binding("G", "last_page", "Outcome", show=False),
        Binding("o", "focus_path", "Open"),
    ]

    trajectories: reactive[list[Trajectory]] = reactive(list, init=False, always_update=True)
    current: reactive[Trajectory | None] = reactive(None, init=False, always_update=True)
    page: reactive[int] = reactive(0, init=False, always_update=True)

    def __init__(self, path: str | Path | None = None):
        super().__init__()
        self.path = Path(path) if path else None
        self.pages: list[Page] = []
        runs = home() / "runs"  # where `mcpworld run` and the rollouts screen write: Enter lists them
        self.suggested = runs if self.path is None and runs.is_dir() else None

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="path-bar"):
            yield Input(str(self.path or self.suggested or ""), id="path", compact=True,
                        placeholder="trajectory file (.jsonl) or a folder, Enter to open")
            yield Button("Open", id="open", compact=True)
        with Horizontal(id="traj-body"):
            yield DataTable(id="episodes", cursor_type="row", zebra_stripes=True)
            with Vertical(id="page-side"):
                yield Static("", id="page-title", markup=False)
                with VerticalScroll(id="page-box"):
                    yield Static("Open trajectories: type the path of a file (.jsonl) or of a folder above and "
                                 "press Enter.", id="page", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.title = "Trajectories"
        self.query_one("#episodes", DataTable).add_columns("task", "#", "reward", "ok")
        if self.path is not None:
            self.load(self.path)
        else:
            self._refocus()

    # -- loading -----------------------------------------------------------------------------------------

    @work(thread=True, group="read", exclusive=True, exit_on_error=False)
    def load(self, path: Path) -> None:
        """Thread worker: big files are parsed off the event loop."""
        try:
            found = to_open(path)
            if isinstance(found, list):  # a folder of several files: the person picks one
                self.app.call_from_thread(self._choose, path, found)
                return
            trajectories = read_trajectories(found)
        except Exception as exc:
            self.app.call_from_thread(self._failed, error_text(exc))
            return
        self.app.call_from_thread(self._loaded, found, trajectories)

    def _choose(self, folder: Path, files: list[Path]) -> None:
        def chosen(path: Path | None) -> None:
            if path is not None:
                self.load(path)
            else:
                self._refocus()

        self.app.push_screen(ChooseFileScreen(folder, files), chosen)

    def _failed(self, message: str) -> None:
        """Say what is wrong, and leave the keys working: back on the episodes shown, else in the path box with
        its text selected, so typing replaces it."""
        self.query_one("#page-title", Static).update(" could not open")
        self.query_one("#page", Static).update(Text(message, "red"))
        self.notify(message, title="Trajectories", severity="error")
        self._refocus()

    def _refocus(self) -> None:
        if self.trajectories:
            self.query_one("#episodes", DataTable).focus()
            return
        path = self.query_one("#path", Input)
        path.focus()
        path.select_all()

    def _loaded(self, path: Path, trajectories: list[Trajectory]) -> None:
        self.path = path
        self.query_one("#path", Input).value = str(path)
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
            self.query_one("#page-title", Static).update("")
            self.query_one("#page", Static).update(f"{name} holds no complete trajectory.")
            self._refocus()
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
            self.notify("Type the path of a trajectory file or folder first.", severity="warning")
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
        """Esc in the path box leaves the box (for the episodes, when there are some); elsewhere goes back."""
        if isinstance(self.focused, Input) and self.trajectories:
            self.query_one("#episodes", DataTable).focus()
            return
        self.dismiss()
