"""The docs' examples run from a user's clone: the complete world in docs/worlds.md validates and plays, every
`mcpworld ...` line in the docs and README parses against the real CLI, no example points into a development
workspace, the registry's example record is valid, and the README's main install gives the next steps all they
import."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import warnings
from importlib import metadata
from pathlib import Path

import click
import pytest

from mcpworld.core.testing import mcpworld_cmd

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = [*sorted(DOCS.glob("*.md")), ROOT / "README.md"]


def example(doc: str, label: str) -> str:
    text = (DOCS / doc).read_text()
    match = re.search(rf"<!-- example: {label} -->\s*```python\n(.*?)```", text, re.S)
    assert match, f"{doc} has no example labelled {label}"
    return match.group(1)


def test_worlds_md_example_validates_and_plays(isolated_home: Path) -> None:
    pkg = isolated_home / "worlds" / "pantry"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(example("worlds.md", "world"))
    result = subprocess.run(mcpworld_cmd("world", "validate", "pantry"), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "ok  pantry: 2 tools, 4 tasks" in result.stdout
    audited = subprocess.run(mcpworld_cmd("world", "audit", "pantry", "--quiet"), capture_output=True, text=True,
                             timeout=300)
    assert audited.returncode == 0, audited.stdout + audited.stderr
    listed = subprocess.run(mcpworld_cmd("world", "list", "--json"), capture_output=True, text=True, timeout=120)
    assert '"name": "pantry"' in listed.stdout


def code_blocks(text: str) -> list[str]:
    return re.findall(r"```[a-z]*\n(.*?)```", text, re.S)


def documented_commands(text: str) -> list[str]:
    """Every `mcpworld ...` command in the code blocks of `text` (continuations joined, comments and chaining cut)."""
    out = []
    for block in code_blocks(text):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            for part in re.split(r"&&|\|\||\||;", line.split(" #")[0]):
                part = part.strip().rstrip("&").strip()
                if part.startswith("mcpworld "):
                    out.append(part)
    return out


def parse(args: list[str]) -> None:
    """Parse `mcpworld ARGS` exactly as the CLI would, down to the last subcommand, without running it."""
    from mcpworld.app.cli import main

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # ctx.protected_args: what click 8 leaves for the group
        ctx = main.make_context("mcpworld", list(args))
        command: click.Command = main
        rest = [*ctx.protected_args, *ctx.args]
        while isinstance(command, click.Group) and rest:
            name, sub, rest = command.resolve_command(ctx, rest)
            assert sub is not None and name is not None
            ctx = sub.make_context(name, rest, parent=ctx)
            command = sub
            rest = [*ctx.protected_args, *ctx.args] if isinstance(sub, click.Group) else []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_documented_command_parses(page: Path) -> None:
    for line in documented_commands(page.read_text()):
        args = shlex.split(line)[1:]
        if any(a.startswith("<") or "…" in a for a in args):
            continue  # a placeholder the reader fills in
        try:
            parse(args)
        except click.exceptions.Exit:
            pass  # --help, --version
        except click.BadParameter as exc:
            if "does not exist" not in str(exc):  # a file the reader has made by then
                raise AssertionError(f"{page.name}: `{line}`: {exc.format_message()}") from None
        except click.UsageError as exc:
            raise AssertionError(f"{page.name}: `{line}`: {exc.format_message()}") from None


def test_examples_point_at_nothing_outside_a_clone() -> None:
    for page in PAGES:
        for block in code_blocks(page.read_text()):
            for dev_only in ("../shared", "shared/thirdparty", "/work/"):
                assert dev_only not in block, f"{page.name}: an example uses {dev_only!r}, which a user's clone lacks"


def test_the_registry_example_record_is_valid() -> None:
    from mcpworld.registry.records import validate_record

    text = (DOCS / "registry.md").read_text()
    match = re.search(r"<!-- example: record -->\s*```json\n(.*?)```", text, re.S)
    assert match, "docs/registry.md has no example labelled record"
    validate_record(json.loads(match.group(1)))


def _base_closure() -> set[str]:
    """Every distribution `pip install -e .` installs: the base dependencies, and theirs (with the extras they ask
    for, like `pyjwt[crypto]`), markers applied."""
    from packaging.requirements import Requirement

    def norm(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    def wanted(req: Requirement, extras: set[str]) -> bool:
        return req.marker is None or any(req.marker.evaluate({"extra": e}) for e in {"", *extras})

    seen: set[tuple[str, frozenset[str]]] = set()
    todo = [(Requirement(r), frozenset[str]()) for r in metadata.requires("mcpworld") or []]
    while todo:
        req, parent_extras = todo.pop()
        if not wanted(req, set(parent_extras)):
            continue  # an extra nobody asked for, or another platform's
        key = (norm(req.name), frozenset(req.extras))
        if key in seen:
            continue
        seen.add(key)
        try:
            todo += [(Requirement(r), frozenset(req.extras)) for r in metadata.requires(req.name) or []]
        except metadata.PackageNotFoundError:
            pass
    return {name for name, _ in seen}


def test_the_main_install_gives_the_next_steps_everything_they_import() -> None:
    """README "Next steps" after `pip install -e .`: every third-party module those commands import comes with the
    base install (the TUI's textual included), not with an extra the README never names."""
    next_steps = (ROOT / "README.md").read_text().split("## Next steps", 1)[1]
    commands = {shlex.split(c)[1] for c in documented_commands(next_steps)}
    modules = {"world": "mcpworld.worlds.cli", "registry": "mcpworld.registry.cli", "run": "mcpworld.agent.cli",
               "tui": "mcpworld.tui.app", "serve": "mcpworld.worlds.cli", "up": "mcpworld.app.up_cli"}
    assert commands <= set(modules), f"add the modules of {commands - set(modules)} here"
    code = ("import sys, importlib; [importlib.import_module(m) for m in sys.argv[1:]]; "
            "print('\\n'.join(sorted({n.split('.')[0] for n in sys.modules})))")
    out = subprocess.run([sys.executable, "-c", code, *sorted({modules[c] for c in commands}), "mcpworld.tui.cli"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    top = {m for m in out.stdout.split() if m not in sys.stdlib_module_names and not m.startswith("_")}
    owners = metadata.packages_distributions()
    base = _base_closure()
    missing = {dist for m in top - {"mcpworld"} for dist in owners.get(m, [])
               if re.sub(r"[-_.]+", "-", dist).lower() not in base}
    assert not missing, f"the next steps import {sorted(missing)}, which `pip install -e .` does not install"

