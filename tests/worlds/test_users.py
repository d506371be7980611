"""Conversational tasks (issue 32, item 3): the agent talks to a simulated user through `message_user`, served over
MCP like any tool. A scripted user is deterministic; a model user is an OpenAI-compatible endpoint (here a real
local server replaying recorded completions) prompted with the world's guidelines and the user's hidden
instructions, which the agent never sees. The user's stop signal ends the conversation; a failing user model is
the server's failure, never a verdict. `mcpworld run` plays such episodes end to end and prints pass^k."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcpworld.core.llm_replay import ReplayLLM, serve
from mcpworld.core.protocol import EpisodeControl
from mcpworld.core.testing import free_port, mcpworld_cmd, wait_http
from mcpworld.worlds.users import GREETING

WORLD = Path(__file__).resolve().parents[1] / "data" / "chat_world"
TOKEN = "t0ken-for-users-test"
USER_SCRIPT = [{"content": "Hi, I'd like my e-mail address changed."},
               {"content": "I'm Ada Byron, ada@example.com. Please change it to ada@byron.org."},
               {"content": "Perfect, thank you. ###STOP###"}]


@pytest.fixture(scope="module")
def user_llm() -> Iterator[tuple[ReplayLLM, str]]:
    llm = ReplayLLM({"How can I help": USER_SCRIPT})  # the user simulator's first "user" turn is the greeting
    with serve(llm, free_port()) as base:
        yield llm, base


@contextmanager
def served(home: Path, user_base_url: str) -> Iterator[str]:
    """`mcpworld serve world tests/data/chat_world` as a real process, its users played by the model at
    `user_base_url`; yields the world's MCP URL."""
    port = free_port()
    env = {**os.environ, "MCPWORLD_HOME": str(home), "MCPWORLD_USER_MODEL": "user-m",
           "MCPWORLD_USER_BASE_URL": user_base_url, "MCPWORLD_REGISTRY_TOKEN": TOKEN}
    proc = subprocess.Popen(mcpworld_cmd("serve", "world", str(WORLD), "--port", str(port)), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz", proc)
        yield f"http://127.0.0.1:{port}/worlds/chat/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def chat_url(user_llm: tuple[ReplayLLM, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with served(tmp_path_factory.mktemp("chat-home"), user_llm[1]) as url:
        yield url


def text(result) -> str:
    return result.content[0].text


def test_a_scripted_user_talks_and_ends_the_conversation(chat_url: str) -> None:
    async def main() -> None:
        async with Client(chat_url) as client:
            assert "message_user" in {t.name for t in (await client.list_tools()).tools}
            ctl = EpisodeControl(client)
            started = await ctl.start("balance-chat")
            assert started.user == "scripted"
            assert started.instruction.startswith("Hi, I'd like to know my balance.")
            assert "ada@example.com" not in started.instruction  # the agent must ask
            reply = await ctl.call(started.episode, "message_user", {"message": "What's your e-mail address?"})
            assert json.loads(text(reply)) == {"user": "Sure, it's ada@example.com."}
            found = await ctl.call(started.episode, "find_account", {"email": "ada@example.com"})
            assert not found.is_error
            await ctl.call(started.episode, "submit_answer", {"answer": 100})
            assert json.loads(text(await ctl.call(started.episode, "message_user",
                                                  {"message": "Your balance is 100."})))["user"] == "Thanks, bye!"
            last = json.loads(text(await ctl.call(started.episode, "message_user", {"message": "Anything else?"})))
            assert last["ended"] == "###STOP###"
            after = await ctl.call(started.episode, "find_account", {"email": "ada@example.com"})
            assert after.is_error and "ended the conversation" in text(after)
            verdict = (await ctl.verify(started.episode, token=TOKEN)).verdict
            assert verdict.passed, verdict.checks
    anyio.run(main)


def test_a_model_user_is_prompted_with_what_the_agent_never_sees(chat_url: str,
                                                                  user_llm: tuple[ReplayLLM, str]) -> None:
    llm, _ = user_llm

    async def main() -> None:
        async with Client(chat_url) as client:
            ctl = EpisodeControl(client)
            listed = {t.id: t for t in (await ctl.tasks()).tasks}
            assert "byron.org" not in listed["email-chat"].instruction  # not in the listing either
            llm.requests.clear()
            started = await ctl.start("email-chat")
            assert started.user == "model"
            assert started.instruction.startswith("Hi, I'd like my e-mail address changed.")
            assert "byron.org" not in started.instruction and "Give the new address" not in started.instruction
            reply = json.loads(text(await ctl.call(started.episode, "message_user",
                                                   {"message": "Sure. Which account, and what is the new address?"})))
            assert "ada@byron.org" in reply["user"]
            await ctl.call(started.episode, "set_email", {"account_id": "A1001", "email": "ada@byron.org"})
            done = json.loads(text(await ctl.call(started.episode, "message_user", {"message": "Done!"})))
            assert done["ended"] == "###STOP###"
            verdict = (await ctl.verify(started.episode, token=TOKEN)).verdict
            assert verdict.passed, verdict.checks
        first, last = llm.requests[0]["messages"], llm.requests[-1]["messages"]
        assert first[0]["role"] == "system" and "Give the new address only when asked" in first[0]["content"]
        assert "Polite and brief." in first[0]["content"] and llm.requests[0]["model"] == "user-m"
        assert first[1] == {"role": "user", "content": GREETING}  # roles flipped: the agent speaks as "user"
        assert [m["role"] for m in last[1:]] == ["user", "assistant", "user", "assistant", "user"]
        assert last[-1]["content"] == "Done!"
    anyio.run(main)


def test_a_failing_user_model_is_never_a_verdict(tmp_path: Path) -> None:
    """Start fails when the user cannot speak; an episode whose user fails mid-way is not judged."""
    llm = ReplayLLM({"How can I help": [{"content": "Hi, change my e-mail please."}, {"status": 500}]})
    with serve(llm, free_port()) as base, served(tmp_path, base) as url:
        async def main() -> None:
            async with Client(url) as client:
                ctl = EpisodeControl(client)
                started = await ctl.start("email-chat")
                broken = await ctl.call(started.episode, "message_user", {"message": "What's the new one?"})
                assert broken.is_error and "the server's failure" in text(broken)
                later = await ctl.call(started.episode, "set_email", {"account_id": "A1001", "email": "x@y.org"})
                assert later.is_error and "not judged" in text(later)
                with pytest.raises(MCPError, match="not judged: the user simulator failed"):
                    await ctl.verify(started.episode)
        anyio.run(main)
    with serve(ReplayLLM({"How can I help": [{"status": 500}]}), free_port()) as base, served(tmp_path, base) as url:
        async def start() -> None:
            async with Client(url) as client:
                with pytest.raises(MCPError, match="the user simulator failed"):
                    await EpisodeControl(client).start("email-chat")
        anyio.run(start)


def test_without_a_user_model_a_task_is_played_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    """No simulator for an unscripted user: the task is `direct`, its instruction the user's scenario, and
    message_user answers that there is no one to talk to (a scripted task still talks)."""
    from mcpworld.worlds.loader import load_world
    from mcpworld.worlds.runtime import WorldRuntime
    from mcpworld.worlds.server import WorldServer

    monkeypatch.delenv("MCPWORLD_USER_MODEL", raising=False)
    server = WorldServer(WorldRuntime(load_world(WORLD)))

    async def main() -> None:
        async with Client(server.server) as client:
            ctl = EpisodeControl(client)
            started = await ctl.start("email-chat")
            assert started.user == "direct" and "ada@byron.org" in started.instruction
            nobody = await ctl.call(started.episode, "message_user", {"message": "hello?"})
            assert nobody.is_error and "no user to talk to" in text(nobody)
            assert (await ctl.start("balance-chat")).user == "scripted"
    anyio.run(main)


def test_mcpworld_run_plays_a_conversation_end_to_end(chat_url: str, tmp_path: Path) -> None:
    """A recorded agent model asks the scripted user for their e-mail, looks the account up, answers; -k 2."""
    agent = [{"content": None, "tool_calls": [{"name": "message_user", "arguments": {"message": "Your e-mail?"}}]},
             {"content": None, "tool_calls": [{"name": "find_account", "arguments": {"email": "ada@example.com"}}]},
             {"content": None, "tool_calls": [{"name": "submit_answer", "arguments": {"answer": 100}}]},
             {"content": "Your balance is 100.00."}]
    with serve(ReplayLLM({"know my balance": agent}), free_port()) as base:
        out = tmp_path / "run.jsonl"
        proc = subprocess.run(mcpworld_cmd("run", "--server", chat_url, "--policy", "openai", "--model", "m",
                                           "--base-url", base, "--no-tool-check", "--task", "balance-chat",
                                           "-k", "2", "--seed", "0", "-o", str(out)),
                              env={**os.environ, "MCPWORLD_HOME": str(tmp_path), "COLUMNS": "200"},
                              capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [first, second] = [json.loads(line) for line in out.read_text().splitlines()]
    assert first["verdict"]["passed"] is True, first["verdict"]
    calls = [c["name"] for s in first["steps"] for c in s["calls"]]
    assert calls == ["message_user", "find_account", "submit_answer"]
    replies = [m["content"] for m in first["messages"] if m["role"] == "tool"]
    assert "Sure, it's ada@example.com." in replies[0]  # the conversation is in the trajectory, turn by turn
    assert "pass^2" in proc.stdout
    assert second["seed"] == 1  # on seed 1 the e-mail is renamed and the balance scaled: the recording fails
    assert second["verdict"]["passed"] is False


def test_a_person_with_interactive_tools_talks_to_the_user_too() -> None:
    """`--interactive` (people in a desktop client): start_task gives the user's first message, and message_user
    talks in that episode."""
    from mcpworld.worlds.loader import load_world
    from mcpworld.worlds.runtime import WorldRuntime
    from mcpworld.worlds.server import WorldServer

    server = WorldServer(WorldRuntime(load_world(WORLD)), interactive=True)

    async def main() -> None:
        async with Client(server.server) as client:
            started = json.loads(text(await client.call_tool("start_task", {"task_id": "balance-chat"})))
            assert started["instruction"].startswith("Hi, I'd like to know my balance.")
            reply = await client.call_tool("message_user", {"message": "Your e-mail?", "episode": started["episode"]})
            assert json.loads(text(reply)) == {"user": "Sure, it's ada@example.com."}
    anyio.run(main)
