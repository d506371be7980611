"""`python -m mcpworld.swe serve --stdio | list | grade | build-instances` without the main CLI."""

from __future__ import annotations

import click

from mcpworld.swe.cli import serve_swe, swe_group


@click.group(commands={**swe_group.commands, "serve": serve_swe})
def main() -> None:
    """The SWE sandbox on its own."""


if __name__ == "__main__":
    main(prog_name="python -m mcpworld.swe")
