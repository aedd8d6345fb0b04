"""Context that never breaks (issue 10), end to end: real provider SDKs in a real worker against
the fake provider server, which answers with each provider's real overflow error. Overflow, then
compaction, then success; repeated overflows, then truncation; an unfit baseline's clear error;
steering queued while compacting; the preemptive check; the summary the next request starts
from."""

from __future__ import annotations

import asyncio
import json
import secrets
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentlane.events import EventKind
from agentlane.run import ExecutionStatus
from agentlane.transcript import Role
from clients.api import AgentlaneClient
from tests.conftest import make_deployment, settings_for
from tests.e2e.support import assert_transcript_valid, collect
from tests.e2e.test_real_providers import Finished
from tests.fakes.provider_server import FakeProviderServer, RecordedRequest
from tests.fakes.scripts import Fault, Reply
from tests.harness import Deployment

KEY = "sk-ant-api03-" + secrets.token_hex(24)
OPENAI_KEY = "sk-proj-" + secrets.token_hex(24)
CLAUDE = "anthropic/fake-claude"
GPT = "openai/fake-gpt"


def config_toml(fake: FakeProviderServer) -> str:
    return f"""
[[models]]
provider = "anthropic"
id = "fake-claude"
api = "anthropic"
base_url = "{fake.anthropic_base_url}"

[[models]]
provider = "openai"
id = "fake-gpt"
api = "openai-chat"
base_url = "{fake.openai_base_url}"
"""


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProviderServer]:
    with FakeProviderServer(anthropic_keys=[KEY], openai_keys=[OPENAI_KEY]) as srv:
        yield srv


@pytest.fixture(scope="module")
def deployment(
    server: object, fake: FakeProviderServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("context")
    (root / "config.toml").write_text(config_toml(fake))
    dep = make_deployment(server, root, ANTHROPIC_API_KEY=KEY, OPENAI_API_KEY=OPENAI_KEY)
    dep.start_worker()
    yield dep
    dep.stop_workers()


@pytest.fixture(autouse=True)
def _fresh(fake: FakeProviderServer) -> None:
    fake.reset()


@pytest.fixture
def ws(deployment: Deployment) -> Path:
    path = deployment.data_dir / "ws" / uuid.uuid4().hex[:8]
    path.mkdir(parents=True)
    (path / "notes.txt").write_text("alpha line\nbeta line\n")
    return path


async def send(
    deployment: Deployment, ws: Path, key: str, text: str, model: str = CLAUDE
) -> Finished:
    client = await AgentlaneClient.connect(settings_for(deployment))
    receipt = await client.send_and_start(key, text, workspace=str(ws), model=model)
    assert receipt.run_id
    got = await collect(client, key, receipt.run_id, timeout=60)
    return Finished(client, key, got, await client.wait_for_run(receipt.run_id))


def summary_request(request: RecordedRequest) -> bool:
    system = request.body.get("system")
    text = system if isinstance(system, str) else str(system)
    return "You summarise a conversation" in text


def first_user_text(request: RecordedRequest) -> str:
    content = request.body["messages"][0]["content"]
    return content if isinstance(content, str) else " ".join(b.get("text", "") for b in content)


async def history(deployment: Deployment, ws: Path, key: str, turns: int) -> None:
    for n in range(turns):
        filler = " ".join(f"word{i}" for i in range(250))
        done = await send(
            deployment, ws, key, f"message {n}: remember the number {n * 7}. {filler}"
        )
        assert done.result.status == ExecutionStatus.SUCCESS, done.result.error


async def test_an_overflow_compacts_and_the_same_call_succeeds(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    key = f"ctx-{uuid.uuid4().hex[:8]}"
    await history(deployment, ws, key, 10)
    fake.reset()
    fake.script(
        Reply.error(Fault.named("context_overflow")),
        Reply(
            text="## Decisions\n- numbers were remembered\n## Open TODOs\nNone.", purpose="summary"
        ),
        Reply(text="Fits now."),
    )
    done = await send(deployment, ws, key, "and now?")
    assert done.result.status == ExecutionStatus.SUCCESS, done.result.error
    assert done.result.reply == "Fits now."
    requests = fake.requests("anthropic")
    assert [summary_request(r) for r in requests] == [False, True, False]
    # The retried call starts from the summary, and still carries the new message.
    retried = requests[2]
    assert "<summary>" in first_user_text(retried)
    assert "numbers were remembered" in first_user_text(retried)
    assert "and now?" in str(retried.body["messages"][-1])
    kinds = [e.kind for e in done.got.events]
    assert EventKind.COMPACTION_START in kinds and EventKind.COMPACTION_END in kinds
    end = next(e for e in done.got.events if e.kind == EventKind.COMPACTION_END)
    assert end.data["outcome"] == "compacted" and end.data["will_retry"] is True
    assert end.data["tokens_after"] < end.data["tokens_before"]
    entries = done.client.transcript(key)
    markers = [e for e in entries if e.role == Role.COMPACTION]
    assert len(markers) == 1
    assert markers[0].meta["progress"]["task"].startswith("message 0")
    assert_transcript_valid(entries)


async def test_steering_during_a_compaction_is_answered_after_it(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """Status says `compacting` while the summariser works; a steering message sent then is
    neither lost nor summarised away: the retried call carries it."""
    key = f"steer-{uuid.uuid4().hex[:8]}"
    await history(deployment, ws, key, 10)
    fake.reset()
    fake.script(
        Reply.error(Fault.named("context_overflow")),
        Reply(text="## Decisions\n- slow summary", ttft=3.0, purpose="summary"),
        Reply(text="Answered both."),
    )
    client = await AgentlaneClient.connect(settings_for(deployment))
    receipt = await client.send_and_start(key, "first question", workspace=str(ws), model=CLAUDE)
    assert receipt.run_id
    phases: list[str] = []
    for _ in range(100):
        status = await client.status(key)
        phases.append(status.phase.value)
        if status.phase.value == "compacting":
            break
        await asyncio.sleep(0.05)
    assert "compacting" in phases, phases
    await client.send_and_start(key, "also this, please", mode="steer")
    result = await client.wait_for_run(receipt.run_id)
    assert result.status == ExecutionStatus.SUCCESS, result.error
    chats = [r for r in fake.requests("anthropic") if not summary_request(r)]
    assert "also this, please" in json.dumps(chats[-1].body["messages"])
    assert "first question" in json.dumps(chats[-1].body["messages"])


async def test_openai_overflow_shape_is_recovered_too(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    key = f"gpt-{uuid.uuid4().hex[:8]}"
    for n in range(10):
        filler = " ".join(f"word{i}" for i in range(250))
        done = await send(deployment, ws, key, f"message {n}. {filler}", model=GPT)
        assert done.result.status == ExecutionStatus.SUCCESS, done.result.error
    fake.reset()
    fake.script(
        Reply.error(Fault.named("context_overflow"), api="openai-chat"),
        Reply(text="## Decisions\n- talked a lot", api="openai-chat", purpose="summary"),
        Reply(text="GPT fits now.", api="openai-chat"),
    )
    done = await send(deployment, ws, key, "and now?", model=GPT)
    assert done.result.status == ExecutionStatus.SUCCESS, done.result.error
    assert done.result.reply == "GPT fits now."
    last = fake.requests("openai-chat")[-1].body["messages"]
    assert any("<summary>" in str(m.get("content")) for m in last)


async def test_an_overflow_that_compaction_cannot_fix_says_what_to_do_and_the_session_lives_on(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """A fresh session whose one message is over the window: nothing to summarise, no tool
    result to cut. The error names the way out; the next message still works."""
    key = f"unfit-{uuid.uuid4().hex[:8]}"
    fake.script(Reply.error(Fault.named("context_overflow")))
    done = await send(deployment, ws, key, "a message the provider says is too long")
    assert done.result.status == ExecutionStatus.ERROR
    assert done.result.error is not None
    assert done.result.error.kind.value == "context_overflow"
    assert "/reset" not in done.result.error.message and "/new" not in done.result.error.message
    assert "larger-context model" in done.result.error.message
    fake.reset()
    again = await send(deployment, ws, key, "hi")
    assert again.result.status == ExecutionStatus.SUCCESS, again.result.error
