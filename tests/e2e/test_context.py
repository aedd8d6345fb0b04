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
from tests.fakes.scripts import Fault, Reply, ScriptedToolCall
from tests.harness import Deployment

KEY = "sk-ant-api03-" + secrets.token_hex(24)
OPENAI_KEY = "sk-proj-" + secrets.token_hex(24)
CLAUDE = "anthropic/fake-claude"
GPT = "openai/fake-gpt"
SMALL = "anthropic/fake-small"


def config_toml(fake: FakeProviderServer) -> str:
    return f"""
[[models]]
provider = "anthropic"
id = "fake-claude"
api = "anthropic"
base_url = "{fake.anthropic_base_url}"

[[models]]
provider = "anthropic"
id = "fake-small"
api = "anthropic"
base_url = "{fake.anthropic_base_url}"
context_window = 32000

[[models]]
provider = "anthropic"
id = "fake-sonnet"
api = "anthropic"
base_url = "{fake.anthropic_base_url}"
summariser = "anthropic/fake-haiku"

[[models]]
provider = "anthropic"
id = "fake-haiku"
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


@pytest.mark.parametrize(
    "words",
    [
        None,
        # Newer OpenAI models' words (review Q F-d: read as a bad request, the session stuck).
        "Your input exceeds the context window of this model. Please adjust your input and try "
        "again.",
    ],
    ids=["maximum-context-length", "exceeds-the-context-window"],
)
async def test_openai_overflow_shape_is_recovered_too(
    deployment: Deployment, fake: FakeProviderServer, ws: Path, words: str | None
) -> None:
    key = f"gpt-{uuid.uuid4().hex[:8]}"
    for n in range(10):
        filler = " ".join(f"word{i}" for i in range(250))
        done = await send(deployment, ws, key, f"message {n}. {filler}", model=GPT)
        assert done.result.status == ExecutionStatus.SUCCESS, done.result.error
    fake.reset()
    fake.script(
        Reply.error(Fault.named("context_overflow", message=words), api="openai-chat"),
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
    assert f"agentlane reset {key}" in done.result.error.message
    fake.reset()
    again = await send(deployment, ws, key, "hi")
    assert again.result.status == ExecutionStatus.SUCCESS, again.result.error


async def test_an_unfit_baseline_says_so_and_the_session_works_after_reset(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """On a 32 000-token window a message of ~24 000 tokens cannot fit even after compaction
    (it is the turn in progress): the run stops at once with the baseline error, which names the
    reset; after the reset named there, the next message goes out without it."""
    key = f"base-{uuid.uuid4().hex[:8]}"
    await send(deployment, ws, key, "hello", model=SMALL)
    huge = "lorem ipsum " * 7_500  # 90 000 characters
    done = await send(deployment, ws, key, huge, model=SMALL)
    assert done.result.status == ExecutionStatus.ERROR
    assert done.result.error is not None
    assert done.result.error.kind.value == "context_overflow"
    message = done.result.error.message
    assert "even after compaction" in message and f"agentlane reset {key}" in message
    assert not [e for e in fake.log() if e["outcome"] == "overflow"], "nothing oversized was sent"
    fake.reset()
    receipt = await done.client.reset(key)
    assert receipt.entry_id
    after = await send(deployment, ws, key, "hi again", model=SMALL)
    assert after.result.status == ExecutionStatus.SUCCESS, after.result.error
    sent = json.dumps(fake.requests("anthropic")[-1].body["messages"])
    assert "lorem ipsum" not in sent and "hi again" in sent


def read(path: str) -> Reply:
    return Reply(tool_calls=[ScriptedToolCall(name="read", arguments={"path": path})])


async def test_a_long_session_on_a_small_window_compacts_before_the_provider_refuses(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """A 32 000-token window, as the provider counts it, and a tool result of ~3 000 tokens a
    turn: the preemptive check compacts in time, so no request is ever refused, and the
    progress record keeps the task through every compaction."""
    fake.context_window(32_000)
    (ws / "big.txt").write_text("\n".join(f"line {i}: " + "data " * 20 for i in range(110)))
    key = f"long-{uuid.uuid4().hex[:8]}"
    for turn in range(18):
        fake.script(read("big.txt"), Reply(text=f"read it, turn {turn}"))
        done = await send(deployment, ws, key, f"turn {turn}: read big.txt", model=SMALL)
        assert done.result.status == ExecutionStatus.SUCCESS, (turn, done.result.error)
    log = fake.log()
    assert not [e for e in log if e["outcome"] == "overflow"], "a request was refused"
    chat = [e for e in log if e.get("purpose") != "summary"]
    assert max(int(e["prompt_tokens"]) for e in chat) < 32_000
    entries = done.client.transcript(key)
    markers = [e for e in entries if e.role == Role.COMPACTION]
    assert len(markers) >= 2, len(markers)
    assert markers[-1].meta["progress"]["task"].startswith("turn 0: read big.txt")
    assert "big.txt" in markers[-1].meta["progress"]["files_read"]
    assert_transcript_valid(entries)


async def test_repeated_overflows_compact_then_truncate_then_succeed(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """SPEC §4.5: an overflow compacts; when the provider still refuses and another compaction
    would free nothing (the turn in progress is all that is left), the one-shot truncation cuts
    the tool result that is oversized for the window the provider says it enforces, and the
    call goes through. The stored result stays whole."""
    for name in "abcde":
        (ws / f"{name}.txt").write_text(f"{name}: " + "w" * 8_000)
    (ws / "huge.txt").write_text("\n".join(f"row {i} " + "x" * 90 for i in range(700)))
    key = f"trunc-{uuid.uuid4().hex[:8]}"
    await history(deployment, ws, key, 10)
    fake.reset()
    overflow = Reply.overflow(prompt_tokens=70_000, limit_tokens=60_000)
    fake.script(
        *[read(f"{name}.txt") for name in "abcde"],
        read("huge.txt"),
        overflow,
        overflow,
        Reply(text="Made it."),
    )
    done = await send(deployment, ws, key, "read the files")
    assert done.result.status == ExecutionStatus.SUCCESS, done.result.error
    assert done.result.reply == "Made it."
    ends = [e for e in done.got.events if e.kind == EventKind.COMPACTION_END]
    assert [e.data["outcome"] for e in ends] == ["compacted", "no_progress"]
    assert ends[0].data["tokens_after"] < ends[0].data["tokens_before"]
    codes = [e.data.get("code") for e in done.got.events if e.kind == EventKind.WARNING]
    # The provider named a window (60 000) below the catalogue's: learned and said once.
    assert codes == ["provider_window", "tool_results_truncated"]
    sent = json.dumps(fake.requests("anthropic")[-1].body["messages"])
    assert "more characters truncated" in sent
    stored = [e for e in done.client.transcript(key) if e.role == Role.TOOL][-1]
    assert len(stored.text) > 45_000, "the stored result stays whole"


async def test_forced_overflows_that_nothing_can_fix_end_with_the_overflow_error(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """A provider that refuses whatever is sent: at most 3 compactions and one truncation,
    then the error; no loop."""
    key = f"never-{uuid.uuid4().hex[:8]}"
    await history(deployment, ws, key, 10)
    fake.reset()
    fake.script(*[Reply.overflow() for _ in range(8)])
    done = await send(deployment, ws, key, "again")
    assert done.result.status == ExecutionStatus.ERROR
    assert done.result.error is not None and done.result.error.kind.value == "context_overflow"
    ends = [e for e in done.got.events if e.kind == EventKind.COMPACTION_END]
    assert 1 <= len(ends) <= 3
    chats = [e for e in fake.log() if e.get("purpose") != "summary"]
    assert len(chats) <= 4


async def test_an_interrupt_in_the_middle_of_a_tool_call_leaves_a_request_the_provider_accepts(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """The fake checks tool-call / result pairing as the real API does (its 400 "unexpected
    `tool_use_id`" words): the new message's request must pair every call with one result."""
    key = f"intr-{uuid.uuid4().hex[:8]}"
    fake.script(
        Reply(tool_calls=[ScriptedToolCall(name="exec", arguments={"command": "sleep 20"})]),
        Reply(text="Answered the new message."),
    )
    client = await AgentlaneClient.connect(settings_for(deployment))
    first = await client.send_and_start(key, "run the slow thing", workspace=str(ws), model=CLAUDE)
    assert first.run_id
    async for item in client.watch(key, 0):
        if item.event.kind == EventKind.TOOL_EXECUTION_START:
            break
    second = await client.send_and_start(key, "stop that, answer this", mode="interrupt")
    assert second.run_id and second.run_id != first.run_id
    result = await client.wait_for_run(second.run_id)
    assert result.status == ExecutionStatus.SUCCESS, result.error
    assert result.reply == "Answered the new message."
    assert not [e for e in fake.log() if e["outcome"] == "rejected"]
    assert_transcript_valid(client.transcript(key))


async def test_an_orphan_tool_result_on_disk_never_reaches_the_provider(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """A tool result whose call is gone (a foreign write; a garbage line of an imported file is
    skipped by the import, tests/unit/test_file_import.py): the transcript still loads and the
    next request is one the provider accepts."""
    key = f"orphan-{uuid.uuid4().hex[:8]}"
    done = await send(deployment, ws, key, "hello")
    assert done.result.status == ExecutionStatus.SUCCESS
    from agentlane.transcript import TranscriptEntry
    from store.sync import run_sync

    orphan = {
        "id": "toolu_gone:result",
        "role": "tool",
        "ts": 1.0,
        "tool_call_id": "toolu_gone",
        "tool_name": "read",
        "text": "a result whose call is gone",
    }
    entry = TranscriptEntry.model_validate(orphan)
    run_sync(settings_for(deployment), lambda store: store.append_entries(key, [entry]))
    fake.reset()
    again = await send(deployment, ws, key, "still there?")
    assert again.result.status == ExecutionStatus.SUCCESS, again.result.error
    assert not [e for e in fake.log() if e["outcome"] == "rejected"]
    assert "toolu_gone" not in json.dumps(fake.requests("anthropic")[-1].body)


async def test_a_timed_out_call_with_a_large_prompt_compacts_and_is_made_again(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """SPEC §4.6.4: the last call's prompt filled 75 % of the window and the next call went
    silent past the idle limit: compact, then make the call again (not a profile rotation)."""
    from tests.fakes.scripts import ScriptedUsage

    key = f"slow-{uuid.uuid4().hex[:8]}"
    client = await AgentlaneClient.connect(settings_for(deployment))
    filler = " ".join(f"word{i}" for i in range(250))
    for n in range(6):
        big = ScriptedUsage(input=150_000) if n == 5 else ScriptedUsage()
        fake.script(Reply(text=f"noted {n}", usage=big))
        receipt = await client.send_and_start(
            key,
            f"message {n}: {filler}",
            workspace=str(ws),
            model=CLAUDE,
            session_overrides={"idle_timeout_seconds": 2},
        )
        assert receipt.run_id
        await client.wait_for_run(receipt.run_id)
    fake.reset()
    fake.script(
        Reply(text="too late", fault=Fault.stall(5, after_deltas=0)), Reply(text="Quick now.")
    )
    done = await send(deployment, ws, key, "one more")
    assert done.result.status == ExecutionStatus.SUCCESS, done.result.error
    assert done.result.reply == "Quick now."
    ends = [e for e in done.got.events if e.kind == EventKind.COMPACTION_END]
    assert [e.data["trigger"] for e in ends] == ["timeout_recovery"]
    assert ends[0].data["outcome"] == "compacted"


async def test_the_summary_is_written_by_the_lighter_sibling_the_catalogue_names(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    key = f"sib-{uuid.uuid4().hex[:8]}"
    filler = " ".join(f"word{i}" for i in range(250))
    for n in range(8):
        done = await send(
            deployment, ws, key, f"message {n}: {filler}", model="anthropic/fake-sonnet"
        )
        assert done.result.status == ExecutionStatus.SUCCESS, done.result.error
    fake.reset()
    fake.script(Reply.overflow(), Reply(text="done"))
    done = await send(deployment, ws, key, "go on", model="anthropic/fake-sonnet")
    assert done.result.status == ExecutionStatus.SUCCESS, done.result.error
    models = [(e.get("purpose"), e["model"]) for e in fake.log()]
    assert ("summary", "fake-haiku") in models
    assert all(model == "fake-sonnet" for purpose, model in models if purpose != "summary")
