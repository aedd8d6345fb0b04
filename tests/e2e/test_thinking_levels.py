"""Thinking levels end to end (SPEC §6), through the real provider SDKs against the fake
provider server: the level a user asks for (`send --thinking`, the gateway's `thinking` field,
the agent's `thinking` in the config) reaches each API's request, shows in `status`, and a
provider's refusal of it, in that provider's own words, lowers it and the run goes on."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentlane.events import EventKind
from agentlane.run import ExecutionStatus
from clients.api import AgentlaneClient, SendRejected
from tests.conftest import make_deployment, settings_for
from tests.e2e.support import Collected, collect
from tests.fakes.provider_server import FakeProviderServer
from tests.fakes.scripts import Fault, Reply, ScriptedToolCall
from tests.harness import Deployment
from tests.store_support import clear_profile_state

ANTHROPIC_KEY = "sk-ant-api03-" + secrets.token_hex(24)
OPENAI_KEY = "sk-proj-" + secrets.token_hex(24)
MODELS = {
    "anthropic": "anthropic/think-claude",
    "openai-chat": "openai/think-gpt",
    "openai-responses": "openai/think-reasoner",
}


def config_toml(fake: FakeProviderServer, agent: str = "") -> str:
    return (
        f"""
[[models]]
provider = "anthropic"
id = "think-claude"
api = "anthropic"
base_url = "{fake.anthropic_base_url}"
[models.capabilities]
tools = true
thinking_levels = ["off", "low", "medium", "high"]

[[models]]
provider = "openai"
id = "think-gpt"
api = "openai-chat"
base_url = "{fake.openai_base_url}"
[models.capabilities]
tools = true
thinking_levels = ["off", "low", "medium", "high"]

[[models]]
provider = "openai"
id = "think-reasoner"
api = "openai-responses"
base_url = "{fake.openai_base_url}"
[models.capabilities]
tools = true
thinking_levels = ["off", "low", "medium", "high"]
"""
        + agent
    )


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProviderServer]:
    with FakeProviderServer(anthropic_keys=[ANTHROPIC_KEY], openai_keys=[OPENAI_KEY]) as server:
        yield server


@pytest.fixture(scope="module")
def deployment(
    server: object, fake: FakeProviderServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("thinking")
    (root / "config.toml").write_text(config_toml(fake))
    dep = make_deployment(server, root, ANTHROPIC_API_KEY=ANTHROPIC_KEY, OPENAI_API_KEY=OPENAI_KEY)
    dep.start_worker()
    yield dep
    dep.stop_workers()


@pytest.fixture
def ws(deployment: Deployment) -> Path:
    clear_profile_state(deployment.data_dir)  # no cooldown carried over
    path = deployment.data_dir / "ws" / uuid.uuid4().hex[:8]
    path.mkdir(parents=True)
    (path / "notes.txt").write_text("alpha line\nbeta line\n")
    return path


def sent_level(api: str, body: dict[str, Any]) -> object:
    """What a request asked for, in each API's own field (None: no thinking field at all)."""
    if api == "anthropic":
        return body.get("thinking")
    if api == "openai-chat":
        return body.get("reasoning_effort")
    reasoning = body.get("reasoning")
    return reasoning.get("effort") if isinstance(reasoning, dict) else None


EXPECTED_HIGH = {
    "anthropic": {"type": "enabled", "budget_tokens": 16384},
    "openai-chat": "high",
    "openai-responses": "high",
}


async def run_one(
    deployment: Deployment,
    fake: FakeProviderServer,
    ws: Path,
    model: str,
    *replies: Reply,
    thinking: str | None = None,
) -> tuple[AgentlaneClient, str, Collected, Any]:
    client = await AgentlaneClient.connect(settings_for(deployment))
    fake.reset()
    fake.script(*replies)
    key = f"t-{uuid.uuid4().hex[:8]}"
    receipt = await client.send_and_start(
        key, "think it over", workspace=str(ws), model=model, thinking=thinking
    )
    assert receipt.run_id
    got = await collect(client, key, receipt.run_id)
    return client, key, got, await client.wait_for_run(receipt.run_id)


@pytest.mark.parametrize("api", list(MODELS))
async def test_high_reaches_the_request_and_shows_in_status(
    deployment: Deployment, fake: FakeProviderServer, ws: Path, api: str
) -> None:
    client, key, _, result = await run_one(
        deployment, fake, ws, MODELS[api], Reply(text="deep thoughts"), thinking="high"
    )
    assert result.status == ExecutionStatus.SUCCESS, result.error
    sent = fake.requests(api)
    assert [sent_level(api, r.body) for r in sent] == [EXPECTED_HIGH[api]]
    status = await client.status(key)
    assert status.thinking == "high"
    # The next message keeps the session's level; a word for a level is taken ("max" = high)
    # and a new one applies from that message on.
    fake.reset()
    fake.script(Reply(text="less"))
    receipt = await client.send_and_start(key, "now quickly", thinking="low")
    assert receipt.run_id
    await client.wait_for_run(receipt.run_id)
    assert [sent_level(api, r.body) for r in fake.requests(api)] == [
        {"type": "enabled", "budget_tokens": 4096} if api == "anthropic" else "low"
    ]
    assert (await client.status(key)).thinking == "low"


async def test_an_unknown_level_is_refused_before_anything_is_sent(
    deployment: Deployment, ws: Path
) -> None:
    client = await AgentlaneClient.connect(settings_for(deployment))
    with pytest.raises(SendRejected, match="thinking level 'hgih' is not one of off, minimal"):
        await client.send("t-bad", "hi", workspace=str(ws), thinking="hgih")


# Each provider's own refusal, and the level SPEC §6 picks from it: OpenAI lists the values it
# takes (the first one not tried yet is used); Anthropic names none, so thinking goes off.
REFUSALS = {
    "anthropic": (Fault.named("thinking_unsupported"), None),
    "openai-chat": (Fault.named("thinking_unsupported", supported=["low", "medium"]), "low"),
    "openai-responses": (
        Fault.named("thinking_unsupported", supported=["low", "medium"]),
        "low",
    ),
}


@pytest.mark.parametrize("api", list(MODELS))
async def test_a_refused_level_is_lowered_once_and_the_run_finishes(
    deployment: Deployment, fake: FakeProviderServer, ws: Path, api: str
) -> None:
    fault, expected = REFUSALS[api]
    client, key, got, result = await run_one(
        deployment,
        fake,
        ws,
        MODELS[api],
        Reply.error(fault),
        Reply(text="answered anyway"),
        thinking="high",
    )
    assert result.status == ExecutionStatus.SUCCESS, result.error
    assert result.reply == "answered anyway"
    sent = [sent_level(api, r.body) for r in fake.requests(api)]
    assert sent == [EXPECTED_HIGH[api], expected]
    warnings = [e for e in got.events if e.kind == EventKind.WARNING]
    assert len(warnings) == 1, [w.text for w in warnings]
    to = expected or "off"
    assert warnings[0].text == f"{MODELS[api]} does not take thinking level high; using {to}"
    assert warnings[0].data["code"] == "thinking_lowered"
    # The session keeps the level the user asked for: the next run tries it again.
    assert (await client.status(key)).thinking == "high"


async def test_the_agent_config_sets_a_new_sessions_level(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    config = deployment.data_dir / "config.toml"
    before = config.read_text()
    agent = '\n[agents.main]\nmodel = "anthropic/think-claude"\nthinking = "medium"\n'
    config.write_text(config_toml(fake, agent))
    try:
        client, key, _, result = await run_one(
            deployment, fake, ws, MODELS["anthropic"], Reply(text="medium it is")
        )
        assert result.status == ExecutionStatus.SUCCESS, result.error
        assert [r.body.get("thinking") for r in fake.requests("anthropic")] == [
            {"type": "enabled", "budget_tokens": 8192}
        ]
        assert (await client.status(key)).thinking == "medium"
    finally:
        config.write_text(before)


async def test_signed_thinking_streams_and_goes_back_first_in_the_tool_use_turn(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """Anthropic's thinking blocks stream as reasoning, and the next request carries them back
    with their signature, first in the assistant message, before the tool use."""
    _, _, _, result = await run_one(
        deployment,
        fake,
        ws,
        MODELS["anthropic"],
        Reply(
            thinking="Read the notes first.",
            tool_calls=[ScriptedToolCall(name="read", arguments={"path": "notes.txt"})],
        ),
        Reply(thinking="Now answer.", text="Done."),
        thinking="high",
    )
    assert result.status == ExecutionStatus.SUCCESS, result.error
    second = fake.requests("anthropic")[-1].body
    assert second["thinking"] == {"type": "enabled", "budget_tokens": 16384}
    assistant = [m for m in second["messages"] if m["role"] == "assistant"][-1]
    first = assistant["content"][0]
    assert first["type"] == "thinking" and first["thinking"] == "Read the notes first."
    assert first["signature"].startswith("sig-fake-")
    assert assistant["content"][-1]["type"] == "tool_use"


async def test_the_gateway_takes_a_thinking_field(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    from tests.e2e.gateway_support import GatewayServer

    fake.reset()
    fake.script(Reply(text="via the gateway"))
    key = f"gw-{uuid.uuid4().hex[:8]}"
    with GatewayServer(settings_for(deployment)) as gateway:
        async with gateway.http(gateway.token(name="t")) as http:
            bad = await http.post(
                f"/v1/sessions/{key}/messages", json={"text": "hi", "thinking": "hgih"}
            )
            assert bad.status_code in (400, 422), bad.text
            assert "is not one of off, minimal" in bad.text
            r = await http.post(
                f"/v1/sessions/{key}/messages",
                json={"text": "hi", "model": MODELS["openai-chat"], "thinking": "max"},
            )
            assert r.status_code == 200, r.text
            client = await AgentlaneClient.connect(settings_for(deployment))
            fate = await client.wait_started(key, r.json()["message_seq"])
            assert fate.run_id is not None
            result = await client.wait_for_run(fate.run_id)
            assert result.status == ExecutionStatus.SUCCESS, result.error
            status = await http.get(f"/v1/sessions/{key}")
            assert status.json()["thinking"] == "high"
    assert [r.body.get("reasoning_effort") for r in fake.requests("openai-chat")] == ["high"]


async def test_the_cli_sends_with_a_thinking_level(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    from tests.e2e.test_cli import acli

    fake.reset()
    fake.script(Reply(text="from the command line"))
    key = f"cli-{uuid.uuid4().hex[:8]}"
    out = await acli(
        deployment,
        "send",
        key,
        "hi",
        "--workspace",
        str(ws),
        "--model",
        MODELS["openai-responses"],
        "--thinking",
        "medium",
    )
    assert out.returncode == 0, out.stderr
    assert [sent_level("openai-responses", r.body) for r in fake.requests()] == ["medium"]
    status = await acli(deployment, "status", key)
    assert '"thinking": "medium"' in status.stdout, status.stdout
    bad = await acli(deployment, "send", key, "hi", "--thinking", "hgih")
    assert bad.returncode != 0 and "is not one of off, minimal" in bad.stderr, bad.stderr


async def test_a_bare_not_supported_refusal_turns_thinking_off_and_the_run_goes_on(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """The issue's case: a 400 "thinking level high is not supported" with no list of levels
    (SPEC §6 step 4) is a thinking refusal, not "LLM request rejected": thinking goes off."""
    refusal = Fault.named("bad_request", message="thinking level high is not supported")
    _, _, got, result = await run_one(
        deployment,
        fake,
        ws,
        MODELS["anthropic"],
        Reply.error(refusal),
        Reply(text="without thinking"),
        thinking="high",
    )
    assert result.status == ExecutionStatus.SUCCESS, result.error
    assert [r.body.get("thinking") for r in fake.requests("anthropic")] == [
        EXPECTED_HIGH["anthropic"],
        None,
    ]
    warnings = [e.data["code"] for e in got.events if e.kind == EventKind.WARNING]
    assert warnings == ["thinking_lowered"]
