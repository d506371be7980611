"""Plain renderers shared by the screens: tools, results, verdicts, diffs and trajectory turns as Rich Text.

Rich `Text` (not markup strings) so that brackets in server data can never be read as markup, and so tests
can read `.plain`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from rich.text import Text

from mcpworld.agent.trajectory import Step, Trajectory
from mcpworld.core.models import Verdict


def dumps(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def plain(renderable: Any) -> str:
    """The text of whatever a Static holds (str, Text or Content), for tests and copying."""
    return getattr(renderable, "plain", None) or str(renderable)


def tool_detail(tool: types.Tool) -> Text:
    out = Text()
    out.append(tool.name, "bold")
    if tool.title:
        out.append(f"  {tool.title}", "italic")
    out.append("\n\n")
    out.append((tool.description or "(no description)").strip() + "\n\n")
    if tool.annotations is not None:
        hints = tool.annotations.model_dump(by_alias=True, exclude_none=True)
        if hints:
            out.append("annotations  ", "bold")
            out.append(", ".join(f"{k}={json.dumps(v)}" for k, v in hints.items()) + "\n\n")
    out.append("input schema\n", "bold")
    out.append(dumps(tool.input_schema) + "\n")
    if tool.output_schema:
        out.append("\noutput schema\n", "bold")
        out.append(dumps(tool.output_schema) + "\n")
    return out


def call_result(name: str, result: types.CallToolResult, latency_ms: float | None = None) -> Text:
    out = Text()
    if result.is_error:
        out.append(f"✗ {name} returned an error", "bold red")
    else:
        out.append(f"✓ {name}", "bold green")
    if latency_ms is not None:
        out.append(f"  {latency_ms:.1f} ms", "dim")
    out.append("\n")
    if result.structured_content is not None:
        out.append(dumps(result.structured_content) + "\n")
    else:
        for block in result.content:
            out.append((block.text if isinstance(block, types.TextContent) else dumps(
                block.model_dump(mode="json", by_alias=True, exclude_none=True))) + "\n")
    return out


def diff_text(diff: dict[str, Any] | None) -> Text:
    """A state diff (table -> inserted/deleted/updated rows) as `+`, `-` and `~` lines."""
    out = Text()
    changed = {t: d for t, d in (diff or {}).items() if any(d.get(k) for k in ("inserted", "deleted", "updated"))}
    if not changed:
        out.append("no changes\n", "dim")
        return out
    for table, d in changed.items():
        out.append(f"{table}\n", "bold")
        for row in d.get("inserted") or []:
            out.append(f"  + {json.dumps(row, default=str)}\n", "green")
        for row in d.get("deleted") or []:
            out.append(f"  - {json.dumps(row, default=str)}\n", "red")
        for row in d.get("updated") or []:
            changes = ", ".join(f"{k}: {json.dumps(v[0], default=str)} → {json.dumps(v[1], default=str)}"
                                for k, v in (row.get("changed") or {}).items())
            out.append(f"  ~ {row.get('key')}: {changes}\n", "yellow")
    return out


def verdict_text(verdict: Verdict, reward: float | None = None) -> Text:
    out = Text()
    if verdict.passed:
        out.append("PASSED", "bold green")
    else:
        out.append("FAILED", "bold red")
    out.append(f"  score {verdict.score:.2f}")
    if reward is not None:
        out.append(f"  reward {reward:g}")
    out.append("\n\nchecks\n", "bold")
    for check in verdict.checks:
        out.append("  ✓ " if check.passed else "  ✗ ", "green" if check.passed else "red")
        out.append(check.name + (f"  ({check.detail})" if check.detail else "") + "\n")
    if not verdict.checks:
        out.append("  (none)\n", "dim")
    if verdict.evidence.get("answer") is not None:
        out.append("\nanswer  ", "bold")
        out.append(str(verdict.evidence["answer"]) + "\n")
    out.append("\nstate diff\n", "bold")
    out.append_text(diff_text(verdict.evidence.get("diff")))
    return out


# -- trajectories ----------------------------------------------------------------------------------------

@dataclass
class Page:
    """One screenful of a trajectory: the task, one turn, or the verdict."""

    title: str
    body: Text


def _calls_of(message: dict[str, Any]) -> list[tuple[str, str]]:
    calls = []
    for raw in message.get("tool_calls") or []:
        fn = raw.get("function") or {}
        calls.append((str(fn.get("name")), str(fn.get("arguments") or "{}")))
    return calls


def _turn_page(index: int, total: int, assistant: dict[str, Any], results: list[dict[str, Any]],
               step: Step | None) -> Page:
    out = Text()
    if step is not None:
        out.append(f"policy {step.policy_ms:.1f} ms\n", "dim")
    content = assistant.get("content")
    if content:
        out.append("assistant\n", "bold cyan")
        out.append(str(content).strip() + "\n")
    calls = _calls_of(assistant)
    for i, (name, arguments) in enumerate(calls):
        out.append(f"→ call {name}", "bold")
        record = step.calls[i] if step is not None and i < len(step.calls) else None
        if record is not None:
            out.append(f"  {record.latency_ms:.1f} ms" + ("  error" if record.is_error else ""),
                       "red" if record.is_error else "dim")
        out.append(f"\n  {arguments}\n")
    if step is not None and not calls:
        for record in step.calls:
            out.append(f"→ call {record.name}", "bold")
            out.append(f"  {record.latency_ms:.1f} ms" + ("  error" if record.is_error else ""), "dim")
            out.append(f"\n  {json.dumps(record.arguments)}\n")
    for message in results:
        out.append(f"← {message.get('role')}" + (f" {message['tool_call_id']}" if message.get("tool_call_id") else ""),
                   "bold magenta")
        out.append("\n" + str(message.get("content") or "").strip() + "\n")
    return Page(f"turn {index}/{total}", out)


def trajectory_pages(traj: Trajectory) -> list[Page]:
    """The task (system + user), each assistant turn with the results that answered it, and the outcome."""
    messages = traj.messages
    first = next((i for i, m in enumerate(messages) if m.get("role") == "assistant"), len(messages))
    intro = Text()
    intro.append(f"{traj.server} · {traj.task} · sample {traj.sample} · {traj.policy}"
                 + (f" ({traj.model})" if traj.model else "") + "\n", "bold")
    for m in messages[:first]:
        intro.append(f"\n{m.get('role')}\n", "bold cyan")
        intro.append(str(m.get("content") or "").strip() + "\n")
    pages = [Page("task", intro)]
    turns: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    for m in messages[first:]:
        if m.get("role") == "assistant":
            turns.append((m, []))
        elif turns:
            turns[-1][1].append(m)
    for i, (assistant, results) in enumerate(turns):
        step = traj.steps[i] if i < len(traj.steps) else None
        pages.append(_turn_page(i + 1, len(turns), assistant, results, step))
    outcome = Text()
    outcome.append(f"termination {traj.termination}  reward {traj.reward:g}  {traj.duration_s:.2f} s\n")
    if traj.error:
        outcome.append(f"error: {traj.error}\n", "red")
    outcome.append("\n")
    if traj.verdict is not None:
        outcome.append_text(verdict_text(traj.verdict, traj.reward))
    else:
        outcome.append("no verdict\n", "dim")
    pages.append(Page("outcome", outcome))
    return pages
