"""The `mcpworld` command line. Each layer contributes its own commands; they load only when used.

`mcpworld --help` lists every command without importing any of them (the MCP SDK, torch and Textual are
slow to import): a command's module is imported when it runs or when its own `--help` is asked for.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

import click

from mcpworld import __version__


class LazyGroup(click.Group):
    """A group whose commands are "module:attribute" references, imported on first use."""

    def __init__(self, *args: Any, lazy: dict[str, tuple[str, str]] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = lazy or {}  # name -> (reference, one-line help shown in listings)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.lazy and name not in self.commands:
            module, _, attr = self.lazy[name][0].partition(":")
            self.add_command(getattr(importlib.import_module(module), attr), name)
        return super().get_command(ctx, name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, self.lazy[name][1] if name in self.lazy and name not in self.commands
                 else (self.commands[name].get_short_help_str(80)))
                for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
             lazy={
                 "world": ("mcpworld.worlds.cli:world_group", "Inspect, validate and audit world packages."),
                 "registry": ("mcpworld.registry.cli:registry_group", "List, check, publish and export servers."),
                 "up": ("mcpworld.app.up_cli:up_command", "Start everything: registry, worlds, SWE, one port."),
                 "run": ("mcpworld.agent.cli:run_command", "Play tasks with a policy and record trajectories."),
                 "rescore": ("mcpworld.agent.cli:rescore_command",
                             "Judge stored trajectories again against the worlds as they are now."),
                 "train": ("mcpworld.trainer.cli:train_group", "Rollouts, rewards, curriculum, SFT, GRPO, OpenRLHF."),
                 "swe": ("mcpworld.swe.cli:swe_group", "The SWE sandbox: list, grade, build instances."),
                 "synth": ("mcpworld.synth.cli:synth_group", "Synthesize worlds and tasks; import Agent-World."),
                 "tui": ("mcpworld.tui.cli:tui_command", "Browse and drive servers from a terminal."),
                 "worldmodel": ("mcpworld.worldmodels.cli:worldmodel_group",
                                "World models SWT and SWR: distillation data, fidelity, serving."),
             })
@click.version_option(__version__, prog_name="mcpworld")
@click.option("-v", "--verbose", is_flag=True, help="Log debug detail to stderr.")
def main(verbose: bool) -> None:
    """mcpworld: environments for tool-using agents, each a real MCP server behind one registry.

    \b
    Start here:
      mcpworld up                      registry + every world over HTTP, registered and ready
      mcpworld world list              the worlds installed, with tool and task counts
      mcpworld serve world airline --stdio --interactive   one world for Claude Desktop
    """
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")


@main.group("serve", cls=LazyGroup, lazy={
    "world": ("mcpworld.worlds.cli:serve_world", "One world over stdio or Streamable HTTP."),
    "worlds": ("mcpworld.worlds.cli:serve_worlds", "Several worlds on one HTTP port."),
    "swe": ("mcpworld.swe.cli:serve_swe", "The SWE sandbox over stdio or HTTP."),
    "world-model": ("mcpworld.worldmodels.cli:serve_world_model_command", "SWT or SWR as an MCP server."),
    "nemo-gym": ("mcpworld.registry.cli:serve_nemo_gym", "Worlds as a NeMo Gym resources server (NeMo RL)."),
})
def serve_group() -> None:
    """Serve worlds, the SWE sandbox or a world model (stdio or HTTP)."""
