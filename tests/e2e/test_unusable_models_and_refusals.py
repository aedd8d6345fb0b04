"""A model whose provider has no key is a failed candidate, not the end of the run: with a
fallback configured the run moves on to it (SPEC §3.6: the failure is a FailoverError when
fallbacks are configured), says why, and a session without one ends with an `auth` error.
And what `send` refuses before anything is stored: a message larger than the model's whole
window, session settings that are unknown or out of range."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentlane.errors import ExecutionErrorKind
from agentlane.events import EventKind
from agentlane.run import ExecutionStatus
from clients.api import AgentlaneClient, SendRejected
from tests.conftest import make_deployment, settings_for
from tests.e2e.support import collect
from tests.e2e.test_thinking_levels import MODELS, OPENAI_KEY, config_toml
from tests.fakes.provider_server import FakeProviderServer
from tests.fakes.scripts import Reply
from tests.harness import Deployment

TINY = "openai/tiny-gpt"
AGENTS = f"""
[agents.main]
model = "{MODELS["anthropic"]}"
fallbacks = ["{MODELS["openai-chat"]}"]

[agents.lonely]
model = "{MODELS["anthropic"]}"
"""


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProviderServer]:
    with FakeProviderServer(openai_keys=[OPENAI_KEY]) as server:
        yield server


@pytest.fixture(scope="module")
def deployment(
    server: object, fake: FakeProviderServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("nokey")
    tiny = (
        f'\n[[models]]\nprovider = "openai"\nid = "tiny-gpt"\napi = "openai-chat"\n'
        f'base_url = "{fake.openai_base_url}"\ncontext_window = 16000\n'
    )
    (root / "config.toml").write_text(config_toml(fake, tiny + AGENTS))
    # Only OpenAI's key: Anthropic has none anywhere (env, profiles, the auth store).
    dep = make_deployment(server, root, OPENAI_API_KEY=OPENAI_KEY, ANTHROPIC_API_KEY="")
    dep.start_worker()
    yield dep
    dep.stop_workers()


def workspace(dep: Deployment) -> Path:
    path = dep.data_dir / "ws" / uuid.uuid4().hex[:8]
    path.mkdir(parents=True)
    return path


async def test_a_model_without_a_key_falls_back_to_the_next(
    deployment: Deployment, fake: FakeProviderServer
) -> None:
    client = await AgentlaneClient.connect(settings_for(deployment))
    fake.reset()
    fake.script(Reply(text="from gpt", api="openai-chat"))
    key = f"nk-{uuid.uuid4().hex[:8]}"
    receipt = await client.send_and_start(key, "hello", workspace=str(workspace(deployment)))
    assert receipt.run_id
    got = await collect(client, key, receipt.run_id)
    result = await client.wait_for_run(receipt.run_id)
    assert result.status == ExecutionStatus.SUCCESS, result.error
    assert result.reply == "from gpt"
    assert not fake.requests("anthropic")
    moves = [e for e in got.events if e.kind == EventKind.WARNING]
    assert [m.data["code"] for m in moves] == ["model_fallback"], [m.text for m in moves]
    assert "No API key found for provider anthropic" in (moves[0].text or ""), moves[0].text
    print(moves[0].text)
    # The session stays on its model (a key set later serves it) and takes its next message.
    fake.reset()
    fake.script(Reply(text="again gpt", api="openai-chat"))
    again = await client.send_and_start(key, "and again")
    assert again.run_id
    assert (await client.wait_for_run(again.run_id)).reply == "again gpt"


async def test_without_a_fallback_the_run_ends_with_an_auth_error(
    deployment: Deployment, fake: FakeProviderServer
) -> None:
    client = await AgentlaneClient.connect(settings_for(deployment))
    fake.reset()
    key = f"nk-{uuid.uuid4().hex[:8]}"
    receipt = await client.send_and_start(
        key,
        "hello",
        workspace=str(workspace(deployment)),
        session_overrides={"agent_id": "lonely"},
    )
    assert receipt.run_id
    result = await client.wait_for_run(receipt.run_id)
    assert result.status == ExecutionStatus.ERROR
    assert result.error is not None
    assert result.error.kind == ExecutionErrorKind.AUTH, result.error
    assert "No API key found for provider anthropic" in result.error.message
    assert not fake.requests("anthropic")


async def test_a_message_larger_than_the_whole_window_is_refused(
    deployment: Deployment, fake: FakeProviderServer
) -> None:
    """Accepted, it would stay in every later request of the session and fail each one until a
    reset; refused, its sender keeps it and the session is as it was."""
    client = await AgentlaneClient.connect(settings_for(deployment))
    fake.reset()
    fake.script(Reply(text="fine", api="openai-chat"))
    key = f"big-{uuid.uuid4().hex[:8]}"
    first = await client.send_and_start(
        key, "hello", workspace=str(workspace(deployment)), model=TINY
    )
    assert first.run_id
    await client.wait_for_run(first.run_id)
    with pytest.raises(SendRejected, match="more than openai/tiny-gpt's whole context window"):
        await client.send(key, "word " * 16_000)
    entries = await asyncio.to_thread(client.transcript, key)
    assert not [e for e in entries if e.text and e.text.startswith("word word")]
    fake.script(Reply(text="still here", api="openai-chat"))
    after = await client.send_and_start(key, "a short one")
    assert after.run_id
    assert (await client.wait_for_run(after.run_id)).reply == "still here"


async def test_bad_session_settings_are_refused_plainly(deployment: Deployment) -> None:
    client = await AgentlaneClient.connect(settings_for(deployment))
    key = f"bad-{uuid.uuid4().hex[:8]}"
    with pytest.raises(SendRejected, match="unknown session setting"):
        await client.send(key, "hi", session_overrides={"bogus": 1})
    with pytest.raises(SendRejected, match="max_turns"):
        await client.send(key, "hi", session_overrides={"max_turns": "lots"})
    with pytest.raises(SendRejected, match="max_turns"):
        await client.send(key, "hi", session_overrides={"max_turns": -1})
    assert not await client.session_ever_existed(key)


async def test_a_workspace_named_for_an_existing_session_is_said_to_be_kept(
    deployment: Deployment, fake: FakeProviderServer
) -> None:
    client = await AgentlaneClient.connect(settings_for(deployment))
    fake.reset()
    fake.script(Reply(text="one", api="openai-chat"), Reply(text="two", api="openai-chat"))
    key = f"ws-{uuid.uuid4().hex[:8]}"
    first_ws, other_ws = workspace(deployment), workspace(deployment)
    first = await client.send_and_start(
        key, "hello", workspace=str(first_ws), model=MODELS["openai-chat"]
    )
    assert first.run_id
    await client.wait_for_run(first.run_id)
    second = await client.send(key, "again", workspace=str(other_ws))
    assert f"it stays {first_ws.resolve()}" in second.note, second.note
    assert (await client.status(key)).workspace == str(first_ws.resolve())
