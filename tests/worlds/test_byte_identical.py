"""The same task, seed and calls give byte-identical tool results and verdicts in any process (issue 29).

Two fresh world server processes (stdio), with different hash seeds, play every airline task's reference
solution on seed 3 (whose data and references rename ids, names and dates); every tool result's text and every
verdict must be the same bytes. Before, a row's keys came out in
the order SQLAlchemy happened to load its attributes, which changed with the calls before it.
"""

from __future__ import annotations

import json
import os
import sys

import pytest
from mcp import Client, StdioServerParameters

from mcpworld.core.protocol import EpisodeControl

pytestmark = pytest.mark.anyio


async def play_all(hash_seed: str, order: int) -> list[str]:
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "mcpworld", "serve", "world", "airline", "--stdio"],
                                   env={**os.environ, "PYTHONHASHSEED": hash_seed})
    out: list[str] = []
    async with Client(params) as client:
        ctl = EpisodeControl(client)
        tasks = (await ctl.tasks(token=os.environ["MCPWORLD_REGISTRY_TOKEN"], seed=3)).tasks[::order]
        for task in tasks:
            started = await ctl.start(task.id, seed=3)
            for step in task.solution:
                result = await ctl.call(started.episode, step.name, step.arguments)
                out.append(f"{task.id} {step.name} " + "\n".join(c.text for c in result.content))
            verified = await ctl.verify(started.episode, task.answer, token=os.environ["MCPWORLD_REGISTRY_TOKEN"])
            out.append(f"{task.id} verdict " + json.dumps(verified.verdict.model_dump(mode="json")))
    return out


async def test_two_processes_give_the_same_bytes() -> None:
    first = await play_all("1", 1)
    second = await play_all("4242", -1)  # another hash seed, and the tasks in the other order
    assert len(first) == len(second) > 60
    assert sorted(first) == sorted(second)
    flight = next(line for line in first if " get_flight " in line)
    assert json.loads(flight.split(" ", 2)[2])["id"]  # rows dump in their fields' order: id first
    assert list(json.loads(flight.split(" ", 2)[2]))[:3] == ["id", "number", "origin"]
