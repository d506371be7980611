"""`mcpworld tui`: the click command (the lead wires it into `mcpworld.app.cli`)."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("tui")
@click.option("--registry", default=None, metavar="URL",
              help="Registry base URL (default: $MCPWORLD_REGISTRY or http://127.0.0.1:8765).")
@click.option("--open", "open_file", type=click.Path(exists=True, path_type=Path), default=None,
              help="Open this trajectory file (JSONL) straight away; a folder lists its files.")
def tui_command(registry: str | None, open_file: Path | None) -> None:
    """Browse registered servers, call tools in live episodes, read trajectories, launch rollouts.

    \b
    Start the servers first (`mcpworld up`), then:
      mcpworld tui
      mcpworld tui --open trajectories.jsonl
      mcpworld tui --open ~/.mcpworld/runs
    Press F1 (or ?) in the app for its keys.
    """
    from mcpworld.core.extras import MissingExtra, require
    from mcpworld.registry.connect import registry_url  # here, not above: `tui --help` answers at once

    try:
        require("tui", "textual", why="the TUI")
    except MissingExtra as exc:
        raise click.ClickException(str(exc)) from None
    from mcpworld.tui.app import MCPWorldApp
    MCPWorldApp(registry=registry or registry_url(), open_file=open_file).run()
