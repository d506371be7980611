"""The help screen (? or F1): every screen's keys on one page, so nothing depends on reading the footer."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

SECTIONS: list[tuple[str, str, list[tuple[str, str]]]] = [
    ("Everywhere", "", [
        ("F1  ?", "this page (Esc closes it)"),
        ("Ctrl+Q", "quit (open connections are closed first)"),
        ("F2", "next open server (several stay open at once); from another screen, the one shown last"),
        ("Esc", "back one level: out of a text box, then to the previous screen"),
    ]),
    ("Servers", "", [
        ("/", "filter: words (name, description, kind, health, tags), or kind:world, health:down, tag:travel"),
        ("↑ ↓  Enter", "pick a server, open it (● marks the open ones)"),
        ("a", "add a server by its MCP URL (saved for next time)"),
        ("x  Del", "delete the highlighted saved server"),
        ("r  F5", "refresh from the registry"),
        ("t", "trajectories: open a JSONL file, or a folder of them"),
        ("n", "new rollout with the oracle or random policy"),
    ]),
    ("Server", "Tabs (Alt+digit): 1 Tools · 2 Tasks · 3 Resources · 4 State · 5 Console · 6 Log · 7 History. "
               "A world opens with a free-play episode, so tools and tables work at once; starting a task "
               "replaces it.", [
        ("Enter", "on a tool: its arguments in the console, ready to type; on a task: start it; "
                  "on a resource: read it"),
        ("Ctrl+N", "start the task picked in the console"),
        ("Ctrl+R", "call the picked tool in the live episode"),
        ("Ctrl+T", "arguments: form ⇄ JSON (paste a JSON object anywhere in the console)"),
        ("Ctrl+O", "copy the shown result (or verdict) as JSON"),
        ("Ctrl+G", "verify the episode: verdict, checks, state diff"),
        ("F5", "reload (on the State tab: the episode's tables)"),
        ("Alt+1 … 7", "switch tabs (bare digits never do)"),
        ("Esc", "leave a text box; then back to the Tools tab; then to the list (the server stays open)"),
        ("Ctrl+W", "close the server: its episode and its connection"),
    ]),
    ("Log", "Every JSON-RPC message as it crossed the wire: → sent, ← received.", [
        ("/", "search messages"),
        ("c", "copy the selected entry as JSON"),
        ("C", "copy every shown entry as JSON"),
        ("Ctrl+S", "save the shown entries to a .json file"),
    ]),
    ("History", "", [
        ("Enter", "put the call back in the console to edit and call again"),
        ("c", "copy the call as JSON"),
    ]),
    ("Trajectories", "", [
        ("o", "type a file or folder path; Enter opens it (a folder lists its files, newest first)"),
        ("↑ ↓", "pick an episode"),
        ("n  p", "next / previous turn (g: the task, G: the outcome)"),
    ]),
    ("Rollouts", "", [
        ("Ctrl+R", "run every task × samples, written to the output file (under ~/.mcpworld/runs)"),
        ("Ctrl+O", "open the finished run's trajectories"),
    ]),
]


def help_text() -> Text:
    out = Text()
    out.append("mcpworld tui", "bold")
    out.append("  ·  keyboard first; the footer shows the keys of the focused screen\n")
    for title, note, keys in SECTIONS:
        out.append(f"\n{title}\n", "bold underline")
        if note:
            out.append(note + "\n", "italic")
        for key, does in keys:
            out.append(f"  {key:<12}", "bold cyan")
            out.append(does + "\n")
    return out


class HelpScreen(ModalScreen[None]):
    """A scrollable page of keys; any of Esc, q, F1 or ? closes it."""

    BINDINGS = [
        Binding("escape,q,f1,question_mark", "close", "Close"),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Static(help_text(), id="help-text")

    def on_mount(self) -> None:
        self.query_one("#help-box").focus()

    def action_close(self) -> None:
        self.dismiss(None)
