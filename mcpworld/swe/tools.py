"""The SWE sandbox's tools as typed functions of the episode (`mcpworld.core.tools`): editor, bash, search, lsp, submit.

Names, arguments and descriptions are SWE-agent's, so a policy trained there sees the tools it knows; schemas and
argument errors come from the type hints, the same way as every other mcpworld server's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import anyio
import mcp_types as types
from pydantic import Field

from mcpworld.core.episode_server import text_result
from mcpworld.core.tools import Absent, tool
from mcpworld.swe.editor import Editor, EditorError
from mcpworld.swe.instances import Instance
from mcpworld.swe.lsp import LspError, LspSession
from mcpworld.swe.search import SearchError, search
from mcpworld.swe.shell import EpisodeShell, format_result, refusal, scrubbed_env
from mcpworld.swe.workspace import Workspace, WorkspaceError

EXPECTED_ERRORS = (EditorError, SearchError, LspError, WorkspaceError)  # their messages go to the agent as they are


@dataclass(eq=False)
class SWEEpisode:
    """Everything one episode's tools act on: its checkout, editor, language server and shell."""

    id: str
    instance: Instance
    workspace: Workspace
    editor: Editor
    lsp: LspSession
    shell: EpisodeShell
    default_timeout_s: float = 60.0
    max_timeout_s: float = 120.0
    submission: str | None = None
    last_used: float = field(default_factory=time.monotonic)
    busy: anyio.Lock = field(default_factory=anyio.Lock)  # one call at a time; held on the server's event loop


EDITOR = (
    "Custom editing tool for viewing, creating and editing files.\n"
    "* State is persistent across calls.\n"
    "* `view` on a file prints it with `cat -n` line numbers; on a directory it lists non-hidden files and "
    "directories up to 2 levels deep.\n"
    "* `create` cannot overwrite an existing file.\n"
    "* Long outputs are clipped and marked with `<response clipped>`.\n"
    "* `undo_edit` reverts the last edit made to the file at `path`.\n"
    "Notes for `str_replace`: `old_str` must match EXACTLY one or more consecutive lines of the file "
    "(whitespace included) and be unique in it; include enough context to make it unique. `new_str` "
    "replaces it."
)
BASH = (
    "Run one bash command in the repository root and return its output and exit code.\n"
    "* Each call is a fresh shell: `cd` and variables do not carry over, and background jobs end with the "
    "call.\n"
    "* Interactive programs (editors, pagers, a bare `python`) are refused: there is no terminal.\n"
    "* Long output is truncated in the middle; the command is killed, with everything it started, when the "
    "timeout passes."
)
SEARCH = (
    "Search the repository without a shell. kind=content: lines matching the regular expression `pattern` "
    "(as path:line:text). kind=files: files whose name (or repository-relative path) matches the glob "
    "`pattern`. Hidden folders, caches and binary files are skipped."
)
LSP = (
    "Python language server queries (jedi). definition / references / hover: name the `symbol` as written on "
    "1-based `line` of `file_path`; definitions come back as the numbered source of the enclosing function "
    "or class. document_symbols: the outline of `file_path`. workspace_symbols: symbols matching `query`."
)
SUBMIT = ("Submit your work: returns the patch (git diff of the repository against the base commit, new "
          "files included) that will be graded. Call it when the issue is fixed.")


def _d(text: str) -> Any:
    return Field(description=text)


@tool(writes=True, description=EDITOR)
def str_replace_editor(
    episode: SWEEpisode,
    command: Annotated[Literal["view", "create", "str_replace", "insert", "undo_edit"], _d("The command to run.")],
    path: Annotated[str, _d("Absolute path to a file or directory in the repository.")],
    file_text: Annotated[str | Absent, _d("Content of the file to create (`create`).")] = None,
    old_str: Annotated[str | Absent, _d("Exact text to replace (`str_replace`).")] = None,
    new_str: Annotated[str | Absent, _d("Replacement text (`str_replace`) or text to insert (`insert`).")] = None,
    insert_line: Annotated[int | Absent, _d("Insert `new_str` AFTER this line (0 = top).")] = None,
    view_range: Annotated[Annotated[list[int], Field(min_length=2, max_length=2)] | Absent,
                          _d("[start, end] lines to view, 1-based; end -1 means to the end.")] = None,
) -> str:
    """SWE-agent's editor on the episode's checkout (its undo history lives in the episode)."""
    return episode.editor.run(command, path, file_text, old_str, new_str, insert_line, view_range)


@tool(writes=True, description=BASH)
async def bash(
    episode: SWEEpisode,
    command: Annotated[str, _d("The bash command to run.")],
    timeout: Annotated[Annotated[int, Field(ge=1)] | Absent, _d("Seconds before the command is killed.")] = None,
) -> types.CallToolResult:
    """One command in the episode's shell (contained, or predicted in simulated mode); a timeout is an error."""
    why = refusal(command)
    if why:
        return text_result(why, error=True)
    limit = min(float(timeout or episode.default_timeout_s), episode.max_timeout_s)
    ws = episode.workspace
    result = await episode.shell.run(command, ws.root, limit, env=scrubbed_env(ws.home), writable=ws.parent)
    return text_result(format_result(result, limit), error=result.timed_out)


@tool(name="search", description=SEARCH)
def search_tool(
    episode: SWEEpisode,
    pattern: str,
    path: Annotated[str | Absent, _d("File or directory to search in (default: the repository).")] = None,
    kind: Literal["content", "files"] = "content",
    include: Annotated[str | Absent, _d("Only files whose name matches this glob, e.g. *.py.")] = None,
    ignore_case: bool = False,
    fixed_strings: Annotated[bool, _d("Treat `pattern` as plain text, not a regular expression.")] = False,
    max_results: Annotated[int, Field(ge=1, le=1000)] = 100,
) -> str:
    """Grep and find without a shell, confined to the checkout."""
    return search(episode.workspace.root, pattern, path, kind, include, ignore_case, fixed_strings, max_results)


@tool(description=LSP)
def lsp(
    episode: SWEEpisode,
    command: Literal["definition", "references", "hover", "document_symbols", "workspace_symbols"],
    file_path: Annotated[str | Absent, _d("Absolute path of a Python file in the repository.")] = None,
    symbol: Annotated[str | Absent, _d("The name to look up, as it appears on `line`.")] = None,
    line: Annotated[Annotated[int, Field(ge=1)] | Absent, _d("1-based line where `symbol` appears.")] = None,
    query: Annotated[str | Absent, _d("Name or prefix to find (workspace_symbols).")] = None,
) -> str:
    """The episode's language server (started on first use, stopped when the episode closes)."""
    return episode.lsp.run(command, file_path, symbol, line, query)


@tool(description=SUBMIT)
def submit(episode: SWEEpisode) -> types.CallToolResult:
    """Record the patch `verify` grades (the workspace's diff now), and show it."""
    patch = episode.workspace.diff()
    episode.submission = patch
    left_out = episode.workspace.left_out
    note = (f"\n\nLeft out of the patch (not regular files, or over 8 MiB): {', '.join(left_out[:20])}"
            if left_out else "")
    extra = {"left_out": left_out} if left_out else {}
    if not patch.strip():
        return text_result("Submitted an empty patch: the repository has no changes against the base commit."
                           + note, structured={"patch": "", **extra})
    return text_result(f"Submitted. The patch to be graded:\n\n{patch}{note}", structured={"patch": patch, **extra})


TOOL_FUNCTIONS = [str_replace_editor, bash, search_tool, lsp, submit]
