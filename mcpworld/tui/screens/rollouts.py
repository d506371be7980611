"""Launch a rollout (tasks x samples with a scripted policy) through the agent runner and watch it finish.

`mcpworld.agent.runner.run` is async and I/O-bound, so it runs in an async worker on the app's loop; its
`on_done` callback counts each episode as it lands. The counts are reactive; one computed line (`counts`)
and its watcher show them, and `running` enables and disables the buttons.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Button, Footer, Header, Input, Label, ProgressBar, Select, Static

from mcpworld.agent.policies import Policy, make_policy
from mcpworld.agent.trajectory import Trajectory
from mcpworld.core.paths import runs_dir
from mcpworld.tui.errors import ReportsWorkerErrors, error_text
from mcpworld.tui.registry import ServerEntry

POLICIES = ["oracle", "random"]


def policy_factory(name: str, seed: int = 0) -> Callable[[int], Policy]:
    """A factory for `runner.run`: one policy per runner worker (random ones seeded apart)."""
    return lambda index: make_policy(name, seed=seed, index=index)


class RolloutsScreen(ReportsWorkerErrors, Screen):
    """A one-line-per-field form, then a progress bar and live counts, then 'open trajectories'."""

    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("ctrl+r", "launch", "Run", priority=True),
        Binding("ctrl+o", "open_results", "Open results", priority=True),
    ]

    running: reactive[bool] = reactive(False, init=False)
    finished: reactive[bool] = reactive(False, init=False)
    done: reactive[int] = reactive(0, init=False)
    total: reactive[int] = reactive(0, init=False)
    passed: reactive[int] = reactive(0, init=False)
    errors: reactive[int] = reactive(0, init=False)
    status: reactive[str] = reactive("", init=False)
    """What the counts line says while no run is counting (listing tasks, a failure)."""
    counts: reactive[str] = reactive("Pick a world and a policy, then Run (Ctrl+R).", init=False)

    def __init__(self, registry: str, servers: list[ServerEntry] | None = None, output_dir: Path | None = None):
        super().__init__()
        self.registry = registry
        self.servers = servers or []
        self.output_dir = output_dir
        self.output: Path | None = None
        self.default_output = ""
        self.results: list[Trajectory] = []

    def compose(self) -> ComposeResult:
        yield Header()
        names = [e.short_name if e.name.startswith("io.mcpworld/") else e.name for e in self.servers]
        with Vertical(id="rollout-form"):
            with Horizontal(classes="row"):
                yield Label("server")
                yield Select([(n, n) for n in names], id="server", compact=True, prompt="world",
                             value=names[0] if names else Select.NULL)
            with Horizontal(classes="row"):
                yield Label("policy")
                yield Select([(p, p) for p in POLICIES], id="policy", value="oracle", compact=True,
                             allow_blank=False)
            with Horizontal(classes="row"):
                yield Label("tasks")
                yield Select([("every task", "all"), ("train split", "train"), ("test split", "test")], id="split",
                             value="all", compact=True, allow_blank=False)
            with Horizontal(classes="row"):
                yield Label("samples/task")
                yield Input("1", id="samples", type="integer", compact=True)
            with Horizontal(classes="row"):
                yield Label("concurrency")
                yield Input("4", id="concurrency", type="integer", compact=True)
            with Horizontal(classes="row"):
                yield Label("output")
                yield Input("", id="output", placeholder="trajectories file (.jsonl), under ~/.mcpworld/runs",
                            compact=True)
        with Horizontal(id="buttons"):
            yield Button("Run", id="run", variant="primary", compact=True)
            yield Button("Open trajectories", id="open-results", compact=True, disabled=True)
        yield ProgressBar(id="progress", show_eta=False)
        yield Static(self.counts, id="counts", markup=False)
        yield Static("", id="summary", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.title = "Rollouts"
        self.sub_title = "scripted policies through the agent runner"
        self._default_output()

    def _default_output(self) -> None:
        """A new file named for the world, the policy and the time, in `output_dir` ($MCPWORLD_HOME/runs by
        default, where `mcpworld run` writes too), never the current folder."""
        server = self.query_one("#server", Select).value
        policy = self.query_one("#policy", Select).value
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", server if isinstance(server, str) else "run").strip("-") or "run"
        stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
        folder = self.output_dir or runs_dir()
        self.default_output = str(folder / f"{slug}-{policy}-{stamp}.jsonl")
        self.query_one("#output", Input).value = self.default_output

    def on_select_changed(self, event: Select.Changed) -> None:
        if event.select.id in ("server", "policy") and not self.running:
            self._default_output()

    def _new_default_output(self) -> None:
        """After a run, the next one gets a file of its own (unless the person typed a path)."""
        if self.query_one("#output", Input).value == self.default_output:
            self._default_output()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "run":
            self.action_launch()
        elif event.button.id == "open-results":
            self.action_open_results()

    # -- running -----------------------------------------------------------------------------------------

    def action_launch(self) -> None:
        if self.running:
            self.notify("A rollout is already running.", severity="warning")
            return
        server = self.query_one("#server", Select).value
        policy = self.query_one("#policy", Select).value
        if not isinstance(server, str):
            self.notify("Pick a world first (is the registry up?).", severity="error")
            return
        try:
            samples = int(self.query_one("#samples", Input).value or "1")
            concurrency = int(self.query_one("#concurrency", Input).value or "4")
            if samples < 1 or concurrency < 1:
                raise ValueError
        except ValueError:
            self.notify("samples and concurrency must be whole numbers ≥ 1.", severity="error")
            return
        output_text = self.query_one("#output", Input).value.strip()
        if not output_text:
            self.notify("Give an output file.", severity="error")
            return
        output = Path(output_text).expanduser()
        try:
            output.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            self.notify(f"Cannot write {output}: {exc.strerror or exc}", severity="error")
            return
        if output.exists():
            self.notify(f"{output.name} exists: new episodes are appended to it.", severity="warning")
        split = self.query_one("#split", Select).value
        self.launch(server, str(policy), samples, concurrency, output, None if split == "all" else str(split))

    @work(group="rollout", exclusive=True, exit_on_error=False)
    async def launch(self, server: str, policy: str, samples: int, concurrency: int, output: Path,
                     split: str | None = None) -> None:
        from mcpworld.agent.runner import RunSpec, list_tasks, run

        self.done = self.passed = self.errors = self.total = 0
        self.results, self.output = [], output
        self.finished, self.running = False, True
        self.status = f"listing the tasks of {server}…"
        self.query_one("#summary", Static).update("")
        try:
            tasks = await list_tasks(server, self.registry, split)
            self.total = len(tasks) * samples
            self.status = ""
            spec = RunSpec(server=server, tasks=tasks, samples=samples, concurrency=concurrency, output=output,
                           registry=self.registry)
            _, summary = await run(spec, policy_factory(policy), on_done=self._on_done)
        except Exception as exc:
            self.status = f"rollout failed: {error_text(exc)}"
            self.notify(f"rollout failed: {error_text(exc)}", severity="error", timeout=10)
            return
        finally:
            self.running = False
        self.finished = True
        self._new_default_output()
        self.query_one("#summary", Static).update(
            "  ".join(f"{k}: {v}" for k, v in summary.rows()) + f"\n→ {output}   (Ctrl+O opens it)")
        self.notify(f"Rollout finished: {summary.episodes} episodes, {summary.success_rate:.0%} passed.")

    def _on_done(self, traj: Trajectory) -> None:
        self.results.append(traj)
        self.passed += bool(traj.verdict and traj.verdict.passed)
        self.errors += traj.is_infra
        self.done += 1

    def compute_counts(self) -> str:
        if self.status or not (self.running or self.finished):
            return self.status or "Pick a world and a policy, then Run (Ctrl+R)."
        failed = self.done - self.passed - self.errors
        state = "done" if self.finished else "running"
        return (f"{state}: {self.done}/{self.total} episodes · {self.passed} passed · {failed} failed · "
                f"{self.errors} errors")

    def watch_counts(self, counts: str) -> None:
        if not self.is_mounted:  # computed once before the widgets exist
            return
        self.query_one("#counts", Static).update(counts)
        bar = self.query_one("#progress", ProgressBar)
        if self.total:
            bar.update(total=self.total, progress=self.done)
            bar.display = True

    def watch_running(self, running: bool) -> None:
        self.query_one("#run", Button).disabled = running

    def watch_finished(self, finished: bool) -> None:
        self.query_one("#open-results", Button).disabled = not finished

    # -- after -------------------------------------------------------------------------------------------

    def action_open_results(self) -> None:
        if not self.finished or self.output is None:
            self.notify("Run a rollout first.", severity="warning")
            return
        from mcpworld.tui.screens.trajectories import TrajectoriesScreen

        self.app.push_screen(TrajectoriesScreen(self.output))

    def action_back(self) -> None:
        if self.running:
            self.notify("Rollout cancelled.", severity="warning")
        self.dismiss()
