"""Real provider SDKs (anthropic, openai) inside a real worker process, talking HTTP to the fake
provider server: streaming, tool calls, think tags, typed failures, idle limit, and no key in
any history, stream item or log."""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentlane.errors import ExecutionErrorKind
from agentlane.events import EventKind
from agentlane.run import ExecutionResult, ExecutionStatus, TerminationReason
from agentlane.transcript import Role
from clients.api import AgentlaneClient, SendRejected
from tests.conftest import make_deployment, settings_for
from tests.e2e.support import Collected, assert_transcript_valid, collect
from tests.fakes.provider_server import FakeProviderServer
from tests.fakes.scripts import Fault, Reply, ScriptedToolCall
from tests.harness import Deployment
from tests.store_support import clear_profile_state, write_profile_state
from workflows.policy.failure_text import in_this_engine

ANTHROPIC_KEY = "sk-ant-api03-" + secrets.token_hex(24)
OPENAI_KEY = "sk-proj-" + secrets.token_hex(24)
MODELS = ["anthropic/fake-claude", "openai/fake-gpt", "openai/fake-reasoner"]


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# Nothing listens here: a refused connection.
CLOSED_PORT = _closed_port()


def forget_cooldowns(deployment: Deployment) -> None:
    """Each case starts with healthy profiles: cooldowns are shared by every session (the
    point of them), so one case's 429 would otherwise hold back the next case's runs."""
    clear_profile_state(deployment.data_dir)


@pytest.fixture(autouse=True)
def _fresh_profiles(request: pytest.FixtureRequest) -> None:
    if "deployment" in request.fixturenames:
        forget_cooldowns(request.getfixturevalue("deployment"))


def config_toml(fake: FakeProviderServer) -> str:
    return f"""
[[models]]
provider = "anthropic"
id = "fake-claude"
api = "anthropic"
base_url = "{fake.anthropic_base_url}"
[models.capabilities]
tools = true
thinking_levels = ["off", "low", "medium", "high"]

[[models]]
provider = "openai"
id = "fake-gpt"
api = "openai-chat"
base_url = "{fake.openai_base_url}"

[[models]]
provider = "openai"
id = "fake-reasoner"
api = "openai-responses"
base_url = "{fake.openai_base_url}"

[[models]]
provider = "openai"
id = "fake-thinker"
api = "openai-responses"
base_url = "{fake.openai_base_url}"
[models.capabilities]
tools = true
thinking_levels = ["off", "low", "medium", "high"]

[[models]]
provider = "local"
id = "qwen"
api = "openai-compatible"
base_url = "{fake.openai_base_url}"
context_window = 32000

[[models]]
provider = "openai"
id = "fake-tiny"
api = "openai-chat"
base_url = "{fake.openai_base_url}"
context_window = 8000

[[models]]
provider = "openai"
id = "fake-small"
api = "openai-chat"
base_url = "{fake.openai_base_url}"
context_window = 20000

[[models]]
provider = "nowhere"
id = "ghost"
api = "openai-compatible"
base_url = "http://127.0.0.1:{CLOSED_PORT}/v1"

[agents.reasoner]
model = "anthropic/fake-claude"
thinking = "low"
reasoning = "stream"
"""


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProviderServer]:
    with FakeProviderServer(anthropic_keys=[ANTHROPIC_KEY], openai_keys=[OPENAI_KEY]) as server:
        yield server


@pytest.fixture(scope="module")
def deployment(
    server: object, fake: FakeProviderServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("providers")
    (root / "config.toml").write_text(config_toml(fake))
    dep = make_deployment(
        server,
        root,
        ANTHROPIC_API_KEY=ANTHROPIC_KEY,
        OPENAI_API_KEY=OPENAI_KEY,
        AGENTLANE_LOG_LEVEL="DEBUG",
    )
    dep.start_worker()
    yield dep
    dep.stop_workers()


@pytest.fixture
def ws(deployment: Deployment) -> Path:
    path = deployment.data_dir / "ws" / uuid.uuid4().hex[:8]
    path.mkdir(parents=True)
    (path / "notes.txt").write_text("alpha line\nbeta line\n")
    return path


@dataclass
class Finished:
    client: AgentlaneClient
    key: str
    got: Collected
    result: ExecutionResult


async def send_and_finish(
    deployment: Deployment,
    fake: FakeProviderServer,
    ws: Path,
    text: str,
    model: str,
    *replies: Reply,
    overrides: dict[str, object] | None = None,
) -> Finished:
    """Script the fake server's replies, send one message to a new session, and wait for the
    run: the events a watcher saw and the run's result."""
    client = await AgentlaneClient.connect(settings_for(deployment))
    fake.reset()
    if replies:
        fake.script(*replies)
    key = f"p-{uuid.uuid4().hex[:8]}"
    receipt = await client.send_and_start(
        key, text, workspace=str(ws), model=model, session_overrides=overrides
    )
    assert receipt.run_id
    got = await collect(client, key, receipt.run_id)
    return Finished(client, key, got, await client.wait_for_run(receipt.run_id))


@pytest.mark.parametrize("model", MODELS)
async def test_tool_loop_through_real_sdk(
    deployment: Deployment, fake: FakeProviderServer, ws: Path, model: str
) -> None:
    done = await send_and_finish(
        deployment,
        fake,
        ws,
        "what do my notes say?",
        model,
        Reply(
            text="Let me look.",
            tool_calls=[ScriptedToolCall(name="read", arguments={"path": "notes.txt"})],
        ),
        Reply(
            text="<think>the user wants the first line</think>The notes start with alpha.",
            delay=0.01,
        ),
    )
    got, result = done.got, done.result
    assert result.status == ExecutionStatus.SUCCESS, result.error
    assert result.reply == "The notes start with alpha."
    assert result.tool_calls == 1 and result.turns == 2
    assert result.usage.accumulated.output > 0 and result.usage.model_calls == 2
    assert result.usage.last_call.input <= result.usage.accumulated.input
    # The think block never reached the user; it is kept as reasoning.
    assert "the user wants" not in got.visible
    assert got.visible == "Let me look.The notes start with alpha."
    entries = done.client.transcript(done.key)
    assert_transcript_valid(entries)
    tool = next(e for e in entries if e.role == Role.TOOL)
    assert tool.text == "alpha line\nbeta line" and not tool.is_error
    final = entries[-1]
    assert final.reasoning == "the user wants the first line"
    # What the provider received on the second call: the tool result and the tool schema.
    api = {"anthropic": "anthropic", "openai/fake-gpt": "openai-chat"}.get(
        model.split("/")[0] if model.startswith("anthropic") else model, "openai-responses"
    )
    second = fake.requests(api)[-1].body
    assert "alpha line" in str(second)
    assert "read" in str(second.get("tools"))


async def test_a_server_reusing_tool_call_ids_gets_every_call_run_and_answered(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    # Compatible servers number calls per reply (`call_0` every turn) or in forms Anthropic
    # refuses (`functions.write:0`): each call still runs once, answered under an id of its own.
    done = await send_and_finish(
        deployment,
        fake,
        ws,
        "write two files",
        "openai/fake-gpt",
        Reply(tool_calls=[ScriptedToolCall(name="write", id="call_0", arguments=WRITE_A)]),
        Reply(tool_calls=[ScriptedToolCall(name="write", id="call_0", arguments=WRITE_B)]),
        Reply(tool_calls=[ScriptedToolCall(name="read", id="functions.read:0", arguments=READ)]),
        Reply(text="both written"),
    )
    assert done.result.status == ExecutionStatus.SUCCESS, done.result.error
    assert (ws / "a.txt").read_text() == "A" and (ws / "b.txt").read_text() == "B"
    entries = done.client.transcript(done.key)
    assert_transcript_valid(entries)
    ids = [c.id for e in entries for c in e.tool_calls]
    assert len(ids) == 3 and len(set(ids)) == 3
    results = [e for e in entries if e.role == Role.TOOL]
    assert [r.is_error for r in results] == [False, False, False]
    # The last request carries all three turns, each call paired with its own result.
    last = fake.requests("openai-chat")[-1].body["messages"]
    sent = [c["id"] for m in last for c in m.get("tool_calls") or []]
    answered = [m["tool_call_id"] for m in last if m["role"] == "tool"]
    assert sent == answered and len(set(sent)) == 3
    # The same session on Claude: every id in the form its API takes.
    fake.reset()
    fake.script(Reply(text="on claude"))
    receipt = await done.client.send_and_start(done.key, "and now?", model="anthropic/fake-claude")
    assert receipt.run_id
    result = await done.client.wait_for_run(receipt.run_id)
    assert result.status == ExecutionStatus.SUCCESS, result.error
    body = fake.requests("anthropic")[-1].body
    uses = [
        b["id"]
        for m in body["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_use"
    ]
    assert len(uses) == 3 and all(re.fullmatch(r"[A-Za-z0-9_-]+", u) for u in uses)


WRITE_A = {"path": "a.txt", "content": "A"}
WRITE_B = {"path": "b.txt", "content": "B"}
READ = {"path": "a.txt"}


async def test_a_call_with_arguments_larger_than_the_window_does_not_block_the_session(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    # A model writes a file bigger than its whole window (a generated CSV): the file is
    # written, and this run and the next go on with the call's arguments cut in requests.
    big = "row,value\n" + "x" * 100_000
    done = await send_and_finish(
        deployment,
        fake,
        ws,
        "generate the data",
        "openai/fake-small",
        Reply(
            tool_calls=[
                ScriptedToolCall(name="write", arguments={"path": "gen.csv", "content": big})
            ]
        ),
        Reply(text="written"),
    )
    assert done.result.status == ExecutionStatus.SUCCESS, done.result.error
    assert (ws / "gen.csv").read_text() == big
    fake.script(Reply(text="still here"))
    receipt = await done.client.send_and_start(done.key, "and now?")
    assert receipt.run_id
    result = await done.client.wait_for_run(receipt.run_id)
    assert result.status == ExecutionStatus.SUCCESS, result.error
    body = json.dumps(fake.requests("openai-chat")[-1].body)
    assert len(body) < 60_000 and "more characters truncated" in body
    # The transcript keeps the call as the model made it.
    [call] = [c for e in done.client.transcript(done.key) for c in e.tool_calls]
    assert call.arguments["content"] == big


@pytest.mark.parametrize(
    ("model", "stop", "words"),
    [
        ("anthropic/fake-claude", "max_tokens", "output-token limit"),
        ("openai/fake-gpt", "content_filter", "content filter"),
    ],
)
async def test_a_reply_the_provider_cut_short_says_so(
    deployment: Deployment, fake: FakeProviderServer, ws: Path, model: str, stop: str, words: str
) -> None:
    done = await send_and_finish(
        deployment,
        fake,
        ws,
        "tell me everything",
        model,
        Reply(text="Here is the st", stop_reason=stop),
    )
    assert done.result.status == ExecutionStatus.SUCCESS, done.result.error
    assert done.result.reply == "Here is the st"
    warnings = [e for e in done.got.events if e.kind == EventKind.WARNING]
    assert [w.data.get("code") for w in warnings] == ["reply_cut"]
    assert words in (warnings[0].text or "")


async def test_a_reasoning_models_encrypted_reasoning_goes_back_with_the_tool_result(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    # Nothing is stored at OpenAI: the reasoning of a tool-use turn reaches the next call only
    # as the encrypted items it was asked to return.
    done = await send_and_finish(
        deployment,
        fake,
        ws,
        "what do my notes say?",
        "openai/fake-thinker",
        Reply(
            thinking="the notes file has it",
            tool_calls=[ScriptedToolCall(name="read", arguments={"path": "notes.txt"})],
        ),
        Reply(text="alpha"),
        overrides={"thinking": "high"},
    )
    assert done.result.status == ExecutionStatus.SUCCESS, done.result.error
    first, second = (r.body for r in fake.requests("openai-responses"))
    assert first["include"] == ["reasoning.encrypted_content"]
    kinds = [item.get("type", item.get("role")) for item in second["input"]]
    assert kinds == ["user", "reasoning", "function_call", "function_call_output"]
    reasoning = second["input"][1]
    assert reasoning["encrypted_content"].startswith("enc:rs_fake")
    assert reasoning["summary"] == [{"type": "summary_text", "text": "the notes file has it"}]


async def test_provider_failures_are_typed(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    cases = [
        (Fault.http(429, retry_after=7), "rate_limit", 429),
        (Fault.http(401), "auth", 401),
        (Fault.named("context_overflow"), "context_overflow", 400),
        (Fault.http(529), "overloaded", 529),
        (Fault.http(402), "billing", 402),
    ]
    for fault, reason, status in cases:
        forget_cooldowns(deployment)
        # No waiting for a cooldown here: this test is about what the failure says.
        done = await send_and_finish(
            deployment,
            fake,
            ws,
            "hello",
            "anthropic/fake-claude",
            Reply.error(fault),
            overrides={"max_wait_seconds": 0},
        )
        got, result = done.got, done.result
        assert result.status == ExecutionStatus.ERROR
        assert result.error is not None and result.error.failure is not None
        failure = result.error.failure
        assert (failure.reason, failure.status) == (reason, status), failure
        assert failure.provider == "anthropic" and failure.model == "fake-claude"
        assert failure.profile_id == "anthropic:env"
        if reason == "rate_limit":
            assert failure.retry_after_seconds == 7
        kinds = {
            "rate_limit": "quota_exceeded",
            "billing": "billing",
            "overloaded": "runtime_unavailable",
            "context_overflow": "context_overflow",
            "auth": "auth",
        }
        assert result.error.kind.value == kinds.get(reason, "runtime_error")
        errors = [e for e in got.events if e.kind == EventKind.ERROR]
        assert errors and errors[0].text == result.error.message
        if reason in ("rate_limit", "overloaded"):
            # Every profile is cooling and the run may not wait: when one is ready, and where.
            message = result.error.message
            # The 429 said Retry-After 7 s: the window is what the provider said.
            ready = "~7s" if reason == "rate_limit" else "~30s"
            assert f"Rate-limited — ready in {ready}" in message, message
            assert f"anthropic/fake-claude: HTTP {status}, {reason}" in message
            assert "profiles tried: anthropic:env" in message
        elif reason == "context_overflow":
            # Recovery had nothing to compact or cut (issue 10): what to do, in this engine's
            # terms, naming the session.
            assert f"agentlane reset {done.key}" in result.error.message
            assert "larger-context model" in result.error.message
        else:
            # The provider's classified words, with the original's chat commands put in this
            # engine's terms.
            assert result.error.message == in_this_engine(failure.message)
            assert "/new" not in result.error.message and "/reset" not in result.error.message
        assert len(fake.requests("anthropic")) == 1, "a typed failure is not retried blindly"
    # One line per expected provider error in the worker's log (the SDK's own report with its
    # traceback is at DEBUG only).
    log = "".join(w.log.read_text() for w in deployment.workers)
    for _, reason, status in cases:
        assert f"model call failed: {reason} typed failure for the run (status {status}" in log


async def test_dropped_stream_is_retried_without_duplicate_text(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    text = "One two three four five six seven eight nine ten."
    done = await send_and_finish(
        deployment,
        fake,
        ws,
        "count",
        "openai/fake-gpt",
        Reply(text=text, delay=0.02, fault=Fault.drop(after_deltas=4)),
        Reply(text=text, delay=0.02),
    )
    got, result = done.got, done.result
    assert result.status == ExecutionStatus.SUCCESS
    assert result.reply == text
    assert got.visible == text
    assert len(fake.requests("openai-chat")) == 2
    # The retried call does not announce the run or its turn again.
    starts = [e.kind for e in got.events if e.kind in (EventKind.AGENT_START, EventKind.TURN_START)]
    assert starts == [EventKind.AGENT_START, EventKind.TURN_START], starts


async def test_model_silence_hits_the_idle_limit(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    result = (
        await send_and_finish(
            deployment,
            fake,
            ws,
            "hello",
            "anthropic/fake-claude",
            Reply(text="Thinking about it", fault=Fault.stall(30, after_deltas=1)),
            overrides={"idle_timeout_seconds": 2},
        )
    ).result
    assert result.termination_reason == TerminationReason.IDLE_TIMEOUT_120S
    assert result.error is not None and "idle timeout" in result.error.message.lower()
    # It had begun (the user saw "Thinking about it"): not "did not produce a response".
    assert "began to answer, then went silent: no output for 2 s" in result.error.message


async def test_silent_reply_delivers_nothing(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    done = await send_and_finish(
        deployment, fake, ws, "ok thanks", "openai/fake-gpt", Reply(text="NO_REPLY")
    )
    got, result = done.got, done.result
    assert result.status == ExecutionStatus.SUCCESS
    assert result.reply == "" and got.visible == ""


async def test_no_key_in_any_history_stream_or_log(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """Runs after the others in this module: every workflow history in the namespace, every
    stream item and the worker's log are searched for the provider keys."""
    client = (
        await send_and_finish(
            deployment, fake, ws, "hi", "anthropic/fake-claude", Reply(text="fine")
        )
    ).client
    needles = [ANTHROPIC_KEY, OPENAI_KEY, ANTHROPIC_KEY[-16:], OPENAI_KEY[-16:]]
    searched = 0
    async for wf in client.client.list_workflows(""):
        history = await client.client.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()
        text = history.to_json()
        searched += 1
        for needle in needles:
            assert needle not in text, f"key material in history of {wf.id}"
    assert searched >= 10
    for worker in deployment.workers:
        log = worker.log.read_text()
        assert log, "the worker log is empty: the check would prove nothing"
        for needle in needles:
            assert needle not in log
    for path in deployment.data_dir.rglob("*"):
        if path.is_file() and path.suffix in (".jsonl", ".json") and path.name != "auth.json":
            content = path.read_text(errors="replace")
            for needle in needles:
                assert needle not in content, f"key material in {path}"


LONG_REPLY = (
    "Here is the plan.\n\n"
    + "\n\n".join(f"Paragraph {i}: " + "words " * 60 for i in range(6))
    + "\n\n```python\n"
    + "\n".join(f"print({i})  # a line of code that is long enough to matter" for i in range(40))
    + "\n```\n\nThat is all."
)


async def test_block_replies_respect_fences_and_sizes(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    got = (
        await send_and_finish(
            deployment,
            fake,
            ws,
            "explain",
            "anthropic/fake-claude",
            Reply(text=LONG_REPLY, chunk_size=40),
        )
    ).got
    blocks = [e.text or "" for e in got.events if e.kind == EventKind.BLOCK_REPLY]
    assert len(blocks) >= 3
    for block in blocks:
        assert block.count("```") % 2 == 0, f"a block breaks a code fence: {block[-80:]!r}"
        assert len(block) <= 1200 + 20  # a re-opened or closed fence line may be added

    def words(text: str) -> str:
        return "".join(text.replace("```python", "").replace("```", "").split())

    # Nothing lost or repeated (cuts may drop whitespace and add fence lines).
    assert words("".join(blocks)) == words(LONG_REPLY)
    assert got.visible == LONG_REPLY


@pytest.mark.parametrize("mode", ["off", "on", "stream"])
async def test_reasoning_modes(
    deployment: Deployment, fake: FakeProviderServer, ws: Path, mode: str
) -> None:
    done = await send_and_finish(
        deployment,
        fake,
        ws,
        "think",
        "anthropic/fake-claude",
        Reply(thinking="First, check the notes.\nThen answer.", text="The answer."),
        overrides={"reasoning_mode": mode, "thinking": "low"},
    )
    got, result = done.got, done.result
    assert result.reply == "The answer." and got.visible == "The answer."
    reasoning = "".join(e.text or "" for e in got.events if e.kind == EventKind.REASONING_DELTA)
    blocks = [e.text for e in got.events if e.kind == EventKind.BLOCK_REPLY]
    if mode == "stream":
        assert reasoning == "First, check the notes.\nThen answer."
    else:
        assert reasoning == ""
    if mode == "on":
        assert blocks[0] == "Reasoning:\n_First, check the notes._\n_Then answer._"
        marked = [e.data.get("reasoning") for e in got.events if e.kind == EventKind.BLOCK_REPLY]
        assert marked[0] is True and not any(marked[1:]), marked
        assert blocks[-1] == "The answer."
    else:
        assert blocks == ["The answer."]
    request = fake.requests("anthropic")[-1].body
    assert request["thinking"]["type"] == "enabled"


async def test_a_message_sets_the_reasoning_mode_for_the_runs_after_it(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """`send --reasoning`, the gateway's `reasoning` field (both this message field): a session
    made with the mode off shows its reasoning from the message that says `stream` on, and a
    mode that is not one is refused with the words that are."""
    thought = Reply(thinking="Weigh it.", text="Done.")
    done = await send_and_finish(
        deployment,
        fake,
        ws,
        "think",
        "anthropic/fake-claude",
        thought,
        overrides={"thinking": "low"},
    )
    assert not [e for e in done.got.events if e.kind == EventKind.REASONING_DELTA]
    client, key = done.client, done.key
    fake.script(thought)
    receipt = await client.send_and_start(key, "think again", reasoning="stream")
    assert receipt.run_id
    got = await collect(client, key, receipt.run_id)
    reasoning = "".join(e.text or "" for e in got.events if e.kind == EventKind.REASONING_DELTA)
    assert reasoning == "Weigh it."
    assert (await client.status(key)).reasoning_mode == "stream"
    with pytest.raises(SendRejected, match="not one of off, on, stream"):
        await client.send(key, "x", reasoning="loud")
    # An agent's `reasoning` in the config is where its new sessions start.
    fake.script(thought)
    other = f"p-{uuid.uuid4().hex[:8]}"
    receipt = await client.send_and_start(
        other, "think", workspace=str(ws), session_overrides={"agent_id": "reasoner"}
    )
    assert receipt.run_id
    got = await collect(client, other, receipt.run_id)
    assert [e.text for e in got.events if e.kind == EventKind.REASONING_DELTA] == ["Weigh it."]


async def test_unsupported_thinking_level_is_lowered_and_the_run_succeeds(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """SPEC §6: the refusal names the supported levels; the run tries the next one and goes on.
    The refused level never reaches the provider, and the turn is announced once."""
    done = await send_and_finish(
        deployment,
        fake,
        ws,
        "think hard",
        "anthropic/fake-claude",
        Reply(text="Thought it through."),
        overrides={"thinking": "xhigh"},
    )
    result = done.result
    assert result.status == ExecutionStatus.SUCCESS, result.error
    assert result.reply == "Thought it through."
    sent = fake.requests("anthropic")
    assert len(sent) == 1, "the refused level was never sent"
    kinds = [e.kind for e in done.got.events]
    assert kinds.count(EventKind.AGENT_START) == 1
    assert kinds.count(EventKind.TURN_START) == 1


async def test_anthropic_signed_thinking_goes_back_with_the_tool_result(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """With thinking on, Anthropic wants the signed thinking block of a tool-use turn back in
    the next request; it is kept in the transcript entry's meta, not in history."""
    done = await send_and_finish(
        deployment,
        fake,
        ws,
        "read my notes",
        "anthropic/fake-claude",
        Reply(
            thinking="I should read the notes first.",
            tool_calls=[ScriptedToolCall(name="read", arguments={"path": "notes.txt"})],
        ),
        Reply(text="Done."),
        overrides={"thinking": "low"},
    )
    result = done.result
    assert result.reply == "Done."
    second = fake.requests("anthropic")[-1].body
    assistant = [m for m in second["messages"] if m["role"] == "assistant"][-1]
    thinking = [b for b in assistant["content"] if b["type"] == "thinking"]
    assert thinking and thinking[0]["thinking"] == "I should read the notes first."
    assert thinking[0]["signature"].startswith("sig-fake-")
    assert assistant["content"][-1]["type"] == "tool_use"
    history = await done.client.client.get_workflow_handle(result.run_id).fetch_history()
    assert "sig-fake-" not in history.to_json()


async def test_openai_compatible_server_without_a_key(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """A local vLLM / Ollama / llama.cpp server by base URL: no key configured, and the OpenAI
    key in the worker's environment is not sent to it."""
    fake.set_keys(openai=[])  # a keyless server
    try:
        result = (
            await send_and_finish(
                deployment, fake, ws, "hi", "local/qwen", Reply(text="Hello from a local model.")
            )
        ).result
        assert result.status == ExecutionStatus.SUCCESS, result.error
        assert result.reply == "Hello from a local model."
        sent = fake.requests("openai-chat")[-1]
        assert sent.body["model"] == "qwen"
        assert OPENAI_KEY not in str(sent.headers)
    finally:
        fake.set_keys(openai=[OPENAI_KEY])


async def test_a_refused_connection_is_announced_at_once_and_reported_with_its_url(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """Nothing listens at the URL: the run says so at once (a warning naming the host) and
    knocks again within the session's wait budget (a provider restarting comes back); past it,
    the error names the URL tried and has a kind of its own (issue 24, 25)."""
    started = time.monotonic()
    done = await send_and_finish(
        deployment, fake, ws, "hello", "nowhere/ghost", overrides={"max_wait_seconds": 2}
    )
    took = time.monotonic() - started
    result = done.result
    assert result.status == ExecutionStatus.ERROR and result.error is not None
    assert result.error.kind == ExecutionErrorKind.CONNECTION_REFUSED
    assert f"http://127.0.0.1:{CLOSED_PORT}/v1" in result.error.message
    first = next(e for e in done.got.events if e.kind == EventKind.WARNING)
    assert (first.text or "").startswith(
        f"Connection refused by 127.0.0.1:{CLOSED_PORT} (nowhere); retrying in "
    ), first.text
    assert took < 12, f"{took:.1f}s to report a refused connection past a 2 s budget"


async def test_a_model_added_to_the_config_while_the_worker_runs(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    config = deployment.data_dir / "config.toml"
    before = config.read_text()
    config.write_text(
        before
        + f"""
[[models]]
provider = "late"
id = "added"
api = "openai-compatible"
base_url = "{fake.openai_base_url}"
"""
    )
    fake.set_keys(openai=[])  # the new entry is a keyless local server
    try:
        done = await send_and_finish(
            deployment, fake, ws, "hello", "late/added", Reply(text="hi from the new model")
        )
        assert done.result.status == ExecutionStatus.SUCCESS, done.result.error
        assert done.result.reply == "hi from the new model"
    finally:
        config.write_text(before)
        fake.set_keys(openai=[OPENAI_KEY])


async def test_the_context_window_guard(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """SPEC §9: under 16 000 tokens no run can start, so a message naming such a model is
    refused at send, nothing stored (the run's own guard stays for a window the config shrank
    later); under 32 000 the run warns once and goes on."""
    client = await AgentlaneClient.connect(settings_for(deployment))
    fake.reset()
    key = f"tiny-{uuid.uuid4().hex[:8]}"
    with pytest.raises(SendRejected, match="context window is 8000 tokens, under the 16000"):
        await client.send(key, "hello", workspace=str(ws), model="openai/fake-tiny")
    assert fake.requests("openai-chat") == []
    assert not await client.session_exists(key)
    small = await send_and_finish(
        deployment, fake, ws, "hello", "openai/fake-small", Reply(text="small but fine")
    )
    assert small.result.status == ExecutionStatus.SUCCESS
    warnings = [e for e in small.got.events if e.kind == EventKind.WARNING]
    assert len(warnings) == 1 and "ctx=20000" in (warnings[0].text or "")


async def test_a_rate_limited_profile_is_rotated_to_the_next(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """The first 429 no longer ends the run: profile A is marked (cooling down) and the same
    call is made again with profile B; tools that already ran are not run again."""
    from activities.auth_store import AuthStore

    second = "sk-ant-api03-" + secrets.token_hex(24)
    store = AuthStore.for_data_dir(deployment.data_dir)
    store.set_key("anthropic:work", "anthropic", second)
    fake.set_keys(anthropic=[ANTHROPIC_KEY, second])
    # Start on the env profile: a recent use makes the work profile the less rested one.
    state = {"usage": {"anthropic:work": {"last_used": time.time()}}}
    write_profile_state(deployment.data_dir, state)
    try:
        done = await send_and_finish(
            deployment,
            fake,
            ws,
            "hello",
            "anthropic/fake-claude",
            Reply.error(Fault.http(429, retry_after=7)),
            Reply(text="Answered by the second key."),
        )
        result = done.result
        assert result.status == ExecutionStatus.SUCCESS, result.error
        assert result.reply == "Answered by the second key."
        keys = [
            r.headers.get("x-api-key") or r.headers.get("authorization", "").removeprefix("Bearer ")
            for r in fake.requests("anthropic")
        ]
        assert keys == [ANTHROPIC_KEY, second]
        rotated = [e for e in done.got.events if e.kind == EventKind.WARNING]
        assert rotated and rotated[0].data["code"] == "profile_rotated"
        assert rotated[0].data["from"] == "anthropic:env"
        assert rotated[0].data["to"] == "anthropic:work"
        assert second not in str(rotated[0].model_dump()), "no key in an event"
        kinds = [e.kind for e in done.got.events]
        assert kinds.count(EventKind.AGENT_START) == kinds.count(EventKind.TURN_START) == 1

        # Another session avoids the cooling profile from its first call.
        other = await send_and_finish(
            deployment, fake, ws, "hello", "anthropic/fake-claude", Reply(text="Second session.")
        )
        assert other.result.status == ExecutionStatus.SUCCESS, other.result.error
        first = fake.requests("anthropic")[0]
        assert first.headers.get("authorization", "").removeprefix("Bearer ") == second

        # Both profiles rate-limited, and a wait bound (5 s) shorter than the cooldown: the run
        # says when one is ready, and sends nothing more.
        limited = await send_and_finish(
            deployment,
            fake,
            ws,
            "hello",
            "anthropic/fake-claude",
            Reply.error(Fault.http(429)),
            overrides={"max_wait_seconds": 5},
        )
        assert fake.requests("anthropic") and len(fake.requests("anthropic")) == 1
        # With a wait bound shorter than the cooldown, the run says when one will be ready.
        again = await send_and_finish(
            deployment,
            fake,
            ws,
            "hello",
            "anthropic/fake-claude",
            overrides={"max_wait_seconds": 5},
        )
        assert again.result.status == ExecutionStatus.ERROR and again.result.error is not None
        assert "Rate-limited — ready in ~" in again.result.error.message
        assert fake.requests("anthropic") == []
        assert limited.result.status == ExecutionStatus.ERROR
    finally:
        store.remove("anthropic:work")
        fake.set_keys(anthropic=[ANTHROPIC_KEY])


async def test_all_profiles_cooling_the_run_waits_and_abort_ends_the_wait(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """Beyond the original: a run whose only profile is rate-limited waits (durably) for it,
    status says `waiting`, an abort ends the wait at once, and a later run waits and succeeds."""
    client = await AgentlaneClient.connect(settings_for(deployment))
    fake.reset()
    fake.script(Reply.error(Fault.http(429)))
    key = f"p-{uuid.uuid4().hex[:8]}"
    first = await client.send_and_start(
        key, "hello", workspace=str(ws), model="anthropic/fake-claude"
    )
    assert first.run_id

    for _ in range(200):
        if (await client.status(key)).phase.value == "waiting":
            break
        await asyncio.sleep(0.1)
    status = await client.status(key)
    assert status.waiting_reason == "rate_limit" and status.waiting_until
    asked = time.monotonic()
    await client.abort(key, "not now")
    aborted = await client.wait_for_run(first.run_id)
    assert aborted.status == ExecutionStatus.ABORTED
    assert time.monotonic() - asked < 3
    # A new message: the profile is still cooling; the run waits for it, then succeeds.
    fake.script(Reply(text="Waited, then answered."))
    started = time.monotonic()
    second = await client.send_and_start(key, "hello again")
    assert second.run_id
    got = await collect(client, key, second.run_id, timeout=90)
    result = await client.wait_for_run(second.run_id)
    assert result.status == ExecutionStatus.SUCCESS, result.error
    assert result.reply == "Waited, then answered."
    assert time.monotonic() - started > 5, "it did wait"
    notes = [e for e in got.events if e.kind == EventKind.WARNING]
    assert notes and notes[0].data["code"] == "waiting_for_profile"


async def test_kill_9_in_the_middle_of_a_rotation_keeps_its_decisions(
    server: object, fake: FakeProviderServer, tmp_path: Path
) -> None:
    """The worker running the call made after a rotation is killed: the other worker goes on
    with the profile the run chose (it is in history), and the run finishes on it."""
    from activities.auth_store import AuthStore
    from tests.e2e.test_crash_recovery import worker_running_activity

    second = "sk-ant-api03-" + secrets.token_hex(24)
    (tmp_path / "config.toml").write_text(config_toml(fake))
    dep = make_deployment(server, tmp_path, ANTHROPIC_API_KEY=ANTHROPIC_KEY)
    AuthStore.for_data_dir(tmp_path).set_key("anthropic:work", "anthropic", second)
    # Start on the env profile: a recent use makes the work profile the less rested one.
    state = {"usage": {"anthropic:work": {"last_used": time.time()}}}
    write_profile_state(tmp_path, state)
    fake.set_keys(anthropic=[ANTHROPIC_KEY, second])
    fake.reset()
    text = " ".join(f"word{i}" for i in range(60))
    fake.script(
        Reply.error(Fault.http(429)),
        Reply(text=text, delay=0.1),
        Reply(text=text, delay=0.01),
    )
    dep.start_worker()
    dep.start_worker()
    try:
        client = await AgentlaneClient.connect(settings_for(dep))
        ws = tmp_path / "ws"
        ws.mkdir()
        receipt = await client.send_and_start(
            "kr", "hello", workspace=str(ws), model="anthropic/fake-claude"
        )
        assert receipt.run_id
        for _ in range(100):
            if len(fake.requests("anthropic")) >= 2:
                break
            await asyncio.sleep(0.05)
        victim = await worker_running_activity(client, dep, receipt.run_id, "call_model")
        victim.kill9()
        result = await asyncio.wait_for(client.wait_for_run(receipt.run_id), 60)
        assert result.status == ExecutionStatus.SUCCESS, result.error
        assert result.reply == text
        keys = [
            r.headers.get("x-api-key") or r.headers.get("authorization", "").removeprefix("Bearer ")
            for r in fake.requests("anthropic")
        ]
        assert keys[0] == ANTHROPIC_KEY and keys[1:] == [second] * (len(keys) - 1)
        assert len(keys) == 3
    finally:
        dep.stop_workers()
        fake.set_keys(anthropic=[ANTHROPIC_KEY])
