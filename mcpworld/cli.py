"""The `mcpworld` command line. Each part of the project contributes its own command group."""

from __future__ import annotations

import logging

import click

from mcpworld import __version__
from mcpworld.agent.cli import run_command
from mcpworld.registry.cli import registry_group, up_command
from mcpworld.servers.envs.cli import serve_group, world_group
from mcpworld.servers.swe.cli import serve_swe, swe_group
from mcpworld.servers.synth.cli import synth_group
from mcpworld.servers.world.cli import collect_command, eval_command, serve_model_command, serve_world_model_command
from mcpworld.trainer.cli import train_group
from mcpworld.tui.cli import tui_command


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
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


main.add_command(world_group)
main.add_command(serve_group)
main.add_command(registry_group)
main.add_command(up_command)
main.add_command(run_command)
main.add_command(train_group)
main.add_command(swe_group)
serve_group.add_command(serve_swe)
main.add_command(synth_group)
main.add_command(tui_command)
world_group.add_command(collect_command)
world_group.add_command(eval_command)
world_group.add_command(serve_model_command)
serve_group.add_command(serve_world_model_command)
