"""The verdict channel holds against a policy probing it, over Streamable HTTP against `mcpworld serve worlds`.

Attacks from issue 27 that passed before typed submissions: prose side remarks and hedges with zero calls,
probing `episode/verify` twice per episode for its expected values, `check_task` as an answer oracle, a
refusal's nonsense or leaking reason. Each is played the way a policy would, through a real client.
"""

from __future__ import annotations

import os

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcpworld.core.protocol import EpisodeControl
from mcpworld.worlds.host import load_runtime
from mcpworld.worlds.server import WorldServer

pytestmark = pytest.mark.anyio
GROUPS = {"final state", "answer", "decline", "free text", "task check"}


def token() -> str:
    return os.environ["MCPWORLD_REGISTRY_TOKEN"]


async def test_prose_answers_with_no_submission_never_pass(worlds_url: str) -> None:
    async with Client(f"{worlds_url}/worlds/airline/mcp") as client:
        ctl = EpisodeControl(client)
        for task, prose in [
            ("business-seats-left", "A dozen business seats are free on MW101-0603 (8 were sold this week)"),
            ("business-seats-left", "There are 8 business seats left on MW101-0603."),  # right, but not submitted
            ("flight-status", "Yes, delayed flights get rebooked, but MW307-0602 itself is on time"),
            ("refuse-basic-cancel", "I cannot, my daily limit of messages is reached."),
        ]:
            episode = (await ctl.start(task)).episode
            verified = await ctl.verify(episode, prose)
            assert not verified.verdict.passed, (task, prose)


async def test_verify_is_one_sealed_verdict_that_ends_the_episode(worlds_url: str) -> None:
    async with Client(f"{worlds_url}/worlds/airline/mcp") as client:
        ctl = EpisodeControl(client)
        episode = (await ctl.start("business-seats-left")).episode
        assert not (await ctl.call(episode, "submit_answer", {"answer": 9})).is_error
        verified = await ctl.verify(episode)
        assert verified.closed and verified.sealed and not verified.verdict.passed
        for check in verified.verdict.checks:  # pass/fail per group: no expected value, cue or reference row
            assert check.name in GROUPS and check.detail == "", check
        assert "8" not in verified.verdict.model_dump_json().replace(episode, "")
        with pytest.raises(MCPError):  # probing again: the episode is gone
            await ctl.verify(episode)
        assert (await ctl.call(episode, "submit_answer", {"answer": 8})).is_error


async def test_the_harness_token_sees_details_and_a_wrong_token_does_not(worlds_url: str) -> None:
    async with Client(f"{worlds_url}/worlds/airline/mcp") as client:
        ctl = EpisodeControl(client)
        for given, sealed in [(token(), False), ("not-the-token", True)]:
            episode = (await ctl.start("business-seats-left")).episode
            await ctl.call(episode, "submit_answer", {"answer": 9})
            verified = await ctl.verify(episode, token=given)
            assert verified.sealed is sealed
            details = " ".join(c.detail for c in verified.verdict.checks)
            assert ("expected 8" in details) is not sealed


async def test_tasks_hide_their_kind_and_the_instruction_says_how_to_submit(worlds_url: str) -> None:
    async with Client(f"{worlds_url}/worlds/airline/mcp") as client:
        ctl = EpisodeControl(client)
        public = {t.id: t for t in (await ctl.tasks()).tasks}
        assert {t.kind for t in public.values()} == {None}
        assert all(not t.solution and t.answer is None for t in public.values())
        revealed = {t.id: t for t in (await ctl.tasks(token=token())).tasks}
        assert revealed["refuse-basic-cancel"].kind == "refusal"
        assert revealed["refuse-basic-cancel"].solution[-1].name == "decline"
        started = await ctl.start("business-seats-left")
        assert "submit_answer" in started.instruction and "whole count" in started.instruction
        assert "[basic-cancel-24h]" in started.policy and "decline" in started.policy
        refusal = await ctl.start("refuse-basic-cancel")
        assert refusal.instruction == public["refuse-basic-cancel"].instruction  # nothing marks a refusal
        names = {t.name for t in await ctl.tools()}
        assert {"submit_answer", "decline"} <= names and not names & {"start_task", "check_task"}


async def test_a_decline_is_judged_on_its_rule_its_message_and_what_was_written(worlds_url: str) -> None:
    async with Client(f"{worlds_url}/worlds/bank/mcp") as client:
        ctl = EpisodeControl(client)
        rules = [t for t in (await ctl.tasks(token=token())).tasks if t.id == "refuse-relative-balance"][0]
        rule = rules.solution[-1].arguments["rule"]

        async def decline(rule_id: str, message: str, reply: str | None = None) -> bool:
            episode = (await ctl.start("refuse-relative-balance")).episode
            result = await ctl.call(episode, "decline", {"rule": rule_id, "message": message})
            if result.is_error:
                await ctl.close(episode)
                return False
            return (await ctl.verify(episode, reply)).verdict.passed

        assert await decline(rule, "I can only discuss an account with its holder; Samuel has to call us himself.")
        assert not await decline("dispute-window", "I can only discuss an account with its holder.")
        assert not await decline("my daily limit of messages", "I cannot.")  # not a rule id: refused
        assert not await decline(rule, "He has about one thousand eight hundred ninety in checking and 5.3k in "
                                       "savings, but I cannot share more.")
        assert not await decline(rule, "I cannot share it.", reply="Between us: 7,190 in total.")
        assert not await decline(rule, "Done: I have transferred the details to you.")


async def test_interactive_check_task_says_pass_or_fail_once() -> None:
    server = WorldServer(load_runtime("airline"), interactive=True)
    async with Client(server.server) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"start_task", "check_task", "submit_answer"} <= names
        started = (await client.call_tool("start_task", {"task_id": "business-seats-left"})).structured_content
        handle = started["episode"]
        await client.call_tool("submit_answer", {"answer": 9, "episode": handle})
        checked = (await client.call_tool("check_task", {"episode": handle})).structured_content
        assert checked["passed"] is False and set(checked) == {"task", "passed", "note"}
        again = await client.call_tool("check_task", {"episode": handle})
        assert again.is_error  # judged once: the episode is over


def test_a_decline_message_may_state_facts_but_not_claim_the_action() -> None:
    from mcpworld.worlds.submissions import Submission, decline_checks
    from mcpworld.worlds.world import Task

    task = Task(id="t", instruction="Refund my cancelled flight", kind="refusal", reason="r")

    def judged(message: str) -> bool:
        return all(c.passed for c in decline_checks(task, Submission("decline", {"rule": "r", "message": message}),
                                                    private=["1890"]))

    assert judged("I cannot: the flight has been cancelled by the airline, and the fare is not refundable.")
    assert not judged("Done: I have processed your request.")
    assert not judged("I have refunded it.")
    assert not judged("I cannot say, but it is about 1.9k.")  # 1,890 within 2%
