"""Failover end to end (issue 9): real provider SDKs in a real worker, talking to the fake
provider server whose scripted replies target one profile's key or one model. Profile rotation
after a 401 and a 402, model fallback when every profile of the primary is exhausted, the single
idle retry, a stalled profile rotated without a cooldown, a failure after text was shown, user
and automatic profile pins, and the order of a fresh session's first profile."""

from __future__ import annotations

import asyncio
import json
import secrets
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from activities.auth_store import AuthStore
from agentlane.events import EventKind
from agentlane.run import ExecutionStatus, TerminationReason
from agentlane.transcript import Role
from clients.api import AgentlaneClient
from tests.conftest import make_deployment, settings_for
from tests.e2e.support import assert_transcript_valid, collect, wait_idle
from tests.e2e.test_real_providers import Finished
from tests.fakes.provider_server import FakeProviderServer, RecordedRequest
from tests.fakes.scripts import Fault, Reply, ScriptedToolCall
from tests.harness import Deployment
from tests.store_support import clear_profile_state, read_profile_state, write_profile_state

ENV_KEY = "sk-ant-api03-" + secrets.token_hex(24)
WORK_KEY = "sk-ant-api03-" + secrets.token_hex(24)
OPENAI_KEY = "sk-proj-" + secrets.token_hex(24)
CLAUDE = "anthropic/fake-claude"


def config_toml(fake: FakeProviderServer) -> str:
    # `main` falls back from Claude to GPT; `solo` has no fallback (the idle retry is only for
    # runs with nowhere else to go, SPEC §4.4.2).
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

[agents.main]
model = "{CLAUDE}"
fallbacks = ["openai/fake-gpt"]

[agents.solo]
model = "{CLAUDE}"
"""


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProviderServer]:
    with FakeProviderServer(anthropic_keys=[ENV_KEY, WORK_KEY], openai_keys=[OPENAI_KEY]) as srv:
        yield srv


@pytest.fixture(scope="module")
def deployment(
    server: object, fake: FakeProviderServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("failover")
    (root / "config.toml").write_text(config_toml(fake))
    dep = make_deployment(server, root, ANTHROPIC_API_KEY=ENV_KEY, OPENAI_API_KEY=OPENAI_KEY)
    AuthStore.for_data_dir(root).set_key("anthropic:work", "anthropic", WORK_KEY)
    dep.start_worker()
    yield dep
    dep.stop_workers()


@pytest.fixture(autouse=True)
def _healthy(deployment: Deployment, fake: FakeProviderServer) -> None:
    """Each case starts with healthy profiles and both keys valid."""
    clear_profile_state(deployment.data_dir)
    fake.set_keys(anthropic=[ENV_KEY, WORK_KEY], openai=[OPENAI_KEY])
    fake.reset()


@pytest.fixture
def ws(deployment: Deployment) -> Path:
    path = deployment.data_dir / "ws" / uuid.uuid4().hex[:8]
    path.mkdir(parents=True)
    (path / "notes.txt").write_text("alpha line\nbeta line\n")
    return path


def key_of(request: RecordedRequest) -> str:
    headers = request.headers
    return headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")


def start_on_env(deployment: Deployment) -> None:
    """New sessions spread over equally rested profiles; a recent use of the work profile makes
    the env profile the one a new session starts on."""
    state = {"usage": {"anthropic:work": {"last_used": time.time()}}}
    write_profile_state(deployment.data_dir, state)


def usage(deployment: Deployment, profile: str) -> dict[str, object]:
    state = read_profile_state(deployment.data_dir)
    return dict(state.get("usage", {}).get(profile, {}))


async def run(
    deployment: Deployment,
    ws: Path,
    text: str,
    *,
    key: str | None = None,
    overrides: dict[str, object] | None = None,
) -> Finished:
    client = await AgentlaneClient.connect(settings_for(deployment))
    key = key or f"f-{uuid.uuid4().hex[:8]}"
    receipt = await client.send_and_start(
        key, text, workspace=str(ws), model=CLAUDE, session_overrides=overrides
    )
    assert receipt.run_id
    got = await collect(client, key, receipt.run_id, timeout=60)
    return Finished(client, key, got, await client.wait_for_run(receipt.run_id))


def warnings(done: Finished) -> list[str]:
    return [str(e.data.get("code")) for e in done.got.events if e.kind == EventKind.WARNING]


async def test_a_401_rotates_to_the_next_profile_and_cools_the_first(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    fake.set_keys(anthropic=[WORK_KEY])  # the env key is revoked: a real 401 body
    start_on_env(deployment)
    done = await run(deployment, ws, "hello", overrides={"agent_id": "solo"})
    assert done.result.status == ExecutionStatus.SUCCESS, done.result.error
    assert [key_of(r) for r in fake.requests("anthropic")] == [ENV_KEY, WORK_KEY]
    assert warnings(done) == ["profile_rotated"]
    marked = usage(deployment, "anthropic:env")
    assert marked["cooldown_reason"] == "auth" and marked["error_count"] == 1
    assert 25 < float(str(marked["cooldown_until"])) - time.time() <= 30
    # The answering profile is marked used and good (SPEC §7.7).
    state = read_profile_state(deployment.data_dir)
    assert state["last_good"] == {"anthropic": "anthropic:work"}
    assert usage(deployment, "anthropic:work").get("last_used")


async def test_a_402_disables_the_profile_for_hours(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    fake.script(Reply.error(Fault.http(402), key=ENV_KEY), Reply(text="paid for", key=WORK_KEY))
    start_on_env(deployment)
    done = await run(deployment, ws, "hello", overrides={"agent_id": "solo"})
    assert done.result.status == ExecutionStatus.SUCCESS, done.result.error
    assert done.result.reply == "paid for"
    marked = usage(deployment, "anthropic:env")
    assert marked["disabled_reason"] == "billing"
    hours = (float(str(marked["disabled_until"])) - time.time()) / 3600
    assert 4.9 < hours <= 5.0, hours
    # A second session does not touch the disabled profile.
    fake.reset()
    other = await run(deployment, ws, "hello", overrides={"agent_id": "solo"})
    assert other.result.status == ExecutionStatus.SUCCESS
    assert [key_of(r) for r in fake.requests("anthropic")] == [WORK_KEY]


async def test_every_profile_exhausted_falls_back_to_the_next_model_without_rerunning_tools(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """The first call reads a file; the second gets 429 on both Claude profiles: the run moves
    to GPT for that call only. The read ran once, and GPT sees its result."""
    fake.script(
        Reply(tool_calls=[ScriptedToolCall(name="read", arguments={"path": "notes.txt"})]),
        Reply.error(Fault.http(429), key=ENV_KEY),
        Reply.error(Fault.http(429), key=WORK_KEY),
        Reply(text="GPT took over.", api="openai-chat"),
    )
    done = await run(deployment, ws, "read my notes")
    result = done.result
    assert result.status == ExecutionStatus.SUCCESS, result.error
    assert result.reply == "GPT took over."
    assert result.fallback_model == "openai/fake-gpt"
    claude = [key_of(r) for r in fake.requests("anthropic")]
    assert len(claude) == 3 and sorted(claude[1:]) == sorted([ENV_KEY, WORK_KEY])
    gpt = fake.requests("openai-chat")
    assert len(gpt) == 1
    tool_results = [m for m in gpt[0].body["messages"] if m["role"] == "tool"]
    assert len(tool_results) == 1 and "alpha line" in tool_results[0]["content"]
    assert warnings(done) == ["profile_rotated", "model_fallback"]
    entries = done.client.transcript(done.key)
    assert sum(1 for e in entries if e.role == Role.TOOL) == 1, "the read ran once"
    assert_transcript_valid(entries)
    fallback = [e for e in done.got.events if e.data.get("code") == "model_fallback"][0]
    assert fallback.data["from"] == CLAUDE and fallback.data["to"] == "openai/fake-gpt"


async def test_every_model_failing_says_all_models_failed(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    fake.script(
        Reply.error(Fault.http(401), key=ENV_KEY),
        Reply.error(Fault.http(401), key=WORK_KEY),
        Reply.error(Fault.http(401), api="openai-chat"),
    )
    done = await run(deployment, ws, "hello")
    error = done.result.error
    assert done.result.status == ExecutionStatus.ERROR and error is not None
    assert "All models failed (2): anthropic/fake-claude:" in error.message, error.message
    assert "| openai/fake-gpt:" in error.message and "(auth)" in error.message
    # No model answered: the result names no fallback, and the session keeps its model.
    assert done.result.fallback_model is None
    assert (await done.client.status(done.key)).model == CLAUDE


async def test_a_stalled_stream_gets_the_single_idle_retry(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """No fallback, nothing shown, one profile locked: the same call is made once more (SPEC
    §4.4.2), and a timeout never cools the profile down."""
    overrides: dict[str, object] = {
        "agent_id": "solo",
        "idle_timeout_seconds": 2,
        "auth_profile": "anthropic:env",
    }
    fake.script(
        Reply(text="late", fault=Fault.stall(6, after_deltas=0)),
        Reply(text="answered the second time"),
    )
    done = await run(deployment, ws, "hello", overrides=overrides)
    assert done.result.status == ExecutionStatus.SUCCESS, done.result.error
    assert done.result.reply == "answered the second time"
    assert warnings(done) == ["idle_retry"]
    assert usage(deployment, "anthropic:env").get("cooldown_until") is None

    # Silent twice: the run ends with the idle-timeout message naming the setting.
    fake.reset()
    fake.script(
        Reply(text="late", fault=Fault.stall(6, after_deltas=0)),
        Reply(text="late", fault=Fault.stall(6, after_deltas=0)),
    )
    twice = await run(deployment, ws, "hello", overrides=overrides)
    result = twice.result
    assert result.status == ExecutionStatus.ERROR and result.error is not None
    assert result.termination_reason == TerminationReason.IDLE_TIMEOUT_120S
    assert "idle_timeout_seconds" in result.error.message
    assert len(fake.requests("anthropic")) == 2


async def test_a_stalled_profile_is_rotated_without_a_cooldown(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """SPEC §18.5 T34: a timed-out attempt rotates to the next profile; the first gets no
    cooldown."""
    fake.script(
        Reply(text="late", key=ENV_KEY, fault=Fault.stall(6, after_deltas=0)),
        Reply(text="from the other key", key=WORK_KEY),
    )
    start_on_env(deployment)
    done = await run(
        deployment, ws, "hello", overrides={"agent_id": "solo", "idle_timeout_seconds": 2}
    )
    assert done.result.status == ExecutionStatus.SUCCESS, done.result.error
    assert done.result.reply == "from the other key"
    assert [key_of(r) for r in fake.requests("anthropic")] == [ENV_KEY, WORK_KEY]
    assert usage(deployment, "anthropic:env").get("cooldown_until") is None


async def test_a_failure_after_text_was_shown_is_retried_cleanly(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """An overload in the middle of a streamed reply: the same call is made again on the same
    profile, as after a 529. The watcher ends up with the new reply alone, the transcript keeps
    what was shown under the failed attempt's own entry, and the next request does not send
    that partial text."""
    fake.script(
        Reply(
            text="The first attempt says this and then",
            key=ENV_KEY,
            fault=Fault.stream_error("overloaded", after_deltas=3),
        ),
        Reply(text="The second attempt answers in full.", key=ENV_KEY),
        Reply(text="Next turn.", key=ENV_KEY),
    )
    start_on_env(deployment)
    done = await run(deployment, ws, "hello", overrides={"agent_id": "solo"})
    assert done.result.status == ExecutionStatus.SUCCESS, done.result.error
    assert done.result.reply == "The second attempt answers in full."
    shown = list(done.got.view.texts.values())
    assert shown == ["The second attempt answers in full."], shown
    entries = done.client.transcript(done.key)
    partial = [e for e in entries if e.id.endswith("/partial")]
    assert len(partial) == 1 and partial[0].text.startswith("The first")
    # The call made again is the same request: the failed attempt's text is no prefill.
    first, again = (r.body["messages"] for r in fake.requests("anthropic")[:2])
    assert again == first and again[-1]["role"] == "user"
    assert [key_of(r) for r in fake.requests("anthropic")[:2]] == [ENV_KEY, ENV_KEY]
    # No status to name: the notice says where the overload was reported.
    told = [e.text or "" for e in done.got.events if e.kind == EventKind.WARNING]
    assert any(t.startswith("An overload reported in the stream by anthropic;") for t in told), told
    assert not any("HTTP 0" in t for t in told), told
    client = done.client
    receipt = await client.send_and_start(done.key, "and then?")
    assert receipt.run_id
    assert (await client.wait_for_run(receipt.run_id)).status == ExecutionStatus.SUCCESS
    last = fake.requests("anthropic")[-1].body
    assert "The first attempt" not in json.dumps(last["messages"])
    assert "The second attempt answers in full." in json.dumps(last["messages"])


@pytest.mark.parametrize("model", [CLAUDE, "openai/fake-gpt"])
async def test_a_server_error_said_inside_the_stream_is_made_again(
    deployment: Deployment, fake: FakeProviderServer, ws: Path, model: str
) -> None:
    """Anthropic's `api_error` event (an OpenAI `server_error` chunk) after some text is the
    server's 500 without the status: the call is made again, not the run ended, and a run that
    gives up on it calls it `server_error`, not `timeout`."""
    api = "anthropic" if model == CLAUDE else "openai-chat"
    fake.script(
        Reply(
            thinking="Think one",
            text="Half an answer and then",
            fault=Fault.stream_error("server", after_deltas=4),
        ),
        Reply(thinking="Think two", text="The whole answer."),
    )
    start_on_env(deployment)
    client = await AgentlaneClient.connect(settings_for(deployment))
    key = f"f-{uuid.uuid4().hex[:8]}"
    receipt = await client.send_and_start(
        key,
        "hello",
        workspace=str(ws),
        model=model,
        session_overrides={
            "agent_id": "solo",
            "max_wait_seconds": 5,
            "reasoning_mode": "stream",
            "thinking": "low",
        },
    )
    assert receipt.run_id
    result = await client.wait_for_run(receipt.run_id)
    assert result.status == ExecutionStatus.SUCCESS, result.error
    assert result.reply == "The whole answer."
    assert len(fake.requests(api)) == 2
    # The call made again streams its own reasoning under ids of its own (review R F-R6: a
    # reader passing each id on once showed the failed call's reasoning, not this one's).
    reasoning = [
        item.event
        async for item in client.read_events(key, 0)
        if item.event.kind == EventKind.REASONING_DELTA
    ]
    seen: dict[str, str] = {}
    for event in reasoning:
        seen.setdefault(event.event_id, event.text or "")
    assert "Think two" in "".join(seen.values()), seen
    # Every attempt fails: the run ends on the wait budget, named for what it was.
    fake.script(
        *[Reply(text="Half", fault=Fault.stream_error("server", after_deltas=1))] * 12,
    )
    receipt = await client.send_and_start(key, "again")
    assert receipt.run_id
    failed = await client.wait_for_run(receipt.run_id)
    assert failed.status == ExecutionStatus.ERROR and failed.error is not None
    assert failed.error.kind == "server_error", failed.error
    assert len(fake.requests(api)) >= 4


async def test_a_server_error_said_in_the_stream_falls_back_naming_no_status(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """Past the wait budget the run moves to the fallback model; the notice says what failed
    without the failover table's made-up "HTTP 408" (the stream said no status)."""
    fake.script(
        *[Reply(text="Half", fault=Fault.stream_error("server", after_deltas=1), api="anthropic")]
        * 4,
        Reply(text="From the fallback.", api="openai-chat"),
    )
    start_on_env(deployment)
    done = await run(deployment, ws, "hello", overrides={"max_wait_seconds": 3})
    assert done.result.status == ExecutionStatus.SUCCESS, done.result.error
    assert done.result.reply == "From the fallback."
    told = [e.text or "" for e in done.got.events if e.kind == EventKind.WARNING]
    moved = [t for t in told if "falling back to openai/fake-gpt" in t]
    assert moved and "HTTP" not in moved[0], told


async def test_a_pinned_profile_that_cannot_be_is_refused_or_said(
    deployment: Deployment, ws: Path
) -> None:
    """Review T F-e: `--profile` took any id: another provider's profile, a typo (the runs then
    used another key, silently), or a pin on an existing session (ignored without a word)."""
    client = await AgentlaneClient.connect(settings_for(deployment))
    key = f"pin-{uuid.uuid4().hex[:8]}"
    other = await client.send(
        f"{key}-gpt",
        "hi",
        workspace=str(ws),
        model="openai/fake-gpt",
        session_overrides={"auth_profile": "anthropic:work"},
    )
    assert "warning: profile anthropic:work is a profile of anthropic" in other.note, other.note
    typo = await client.send_and_start(
        key,
        "hi",
        workspace=str(ws),
        model=CLAUDE,
        session_overrides={"auth_profile": "anthropic:wrok"},
    )
    assert "warning: no profile anthropic:wrok" in typo.note, typo.note
    assert "anthropic:work" in typo.note
    assert typo.run_id
    await client.wait_for_run(typo.run_id)
    later = await client.send(key, "again", session_overrides={"auth_profile": "anthropic:work"})
    assert "--profile anthropic:work is not taken: the session exists" in later.note, later.note
    known = await client.send(
        f"{key}-ok",
        "hi",
        workspace=str(ws),
        model=CLAUDE,
        session_overrides={"auth_profile": "anthropic:work"},
    )
    assert "profile" not in known.note, known.note
    # A pin sent to an existing session without naming its model is only said not taken.
    again = await client.send(f"{key}-ok", "more", session_overrides={"auth_profile": "x:y"})
    assert "--profile x:y is not taken" in again.note, again.note
    # Every run ends here: a later test's scripted replies are its own (two messages sent
    # together may run as one: idle with nothing queued is the end).
    for session in (f"{key}-gpt", key, f"{key}-ok"):
        await wait_idle(client, session, runs=1)


async def test_a_user_pinned_profile_is_never_rotated_away_from(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    fake.script(Reply.error(Fault.http(429), key=WORK_KEY))
    done = await run(
        deployment,
        ws,
        "hello",
        overrides={"agent_id": "solo", "auth_profile": "anthropic:work", "max_wait_seconds": 0},
    )
    assert done.result.status == ExecutionStatus.ERROR
    error = done.result.error
    assert error is not None and error.message.startswith(
        "The AI service is temporarily rate-limited. Please try again in a moment. "
        "anthropic/fake-claude kept refusing (HTTP 429 from anthropic); the run waited 0 s of "
        "the 0-second bound on waiting"
    ), error.message
    assert [key_of(r) for r in fake.requests("anthropic")] == [WORK_KEY]
    bad = await run(
        deployment, ws, "hello", overrides={"agent_id": "solo", "auth_profile": "anthropic:nope"}
    )
    assert bad.result.status == ExecutionStatus.SUCCESS, "an unknown id is ignored (SPEC §4.1)"


async def test_sessions_spread_over_profiles_and_keep_theirs(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """Round robin by oldest use for a new session (SPEC §7.3), then the session keeps its
    profile (an automatic pin, §7.4: its prompt cache stays warm)."""
    solo: dict[str, object] = {"agent_id": "solo"}
    first = await run(deployment, ws, "hello", overrides=solo)
    second = await run(deployment, ws, "hello", overrides=solo)
    again = await run(deployment, ws, "hello again", key=first.key, overrides=solo)
    keys = [key_of(r) for r in fake.requests("anthropic")]
    assert keys[0] != keys[1], "a new session takes the least recently used profile"
    assert keys[2] == keys[0], "a session keeps the profile it had"
    assert all(d.result.status == ExecutionStatus.SUCCESS for d in (first, second, again))


async def test_a_profile_and_a_fallback_added_while_the_worker_runs_are_used(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """The auth store and the config are read again when they change: a key stored and a
    fallback written while the worker runs serve the next run, no restart."""
    late_key = "sk-ant-api03-" + secrets.token_hex(24)
    store = AuthStore.for_data_dir(deployment.data_dir)
    config = deployment.data_dir / "config.toml"
    before = config.read_text()
    fake.set_keys(anthropic=[late_key], openai=[OPENAI_KEY])  # only the new key is valid
    try:
        store.set_key("anthropic:late", "anthropic", late_key)
        done = await run(deployment, ws, "hello", overrides={"agent_id": "solo"})
        assert done.result.status == ExecutionStatus.SUCCESS, done.result.error
        assert [key_of(r) for r in fake.requests("anthropic")][-1] == late_key

        config.write_text(
            before + '\n[agents.late]\nmodel = "anthropic/fake-claude"\n'
            'fallbacks = ["openai/fake-gpt"]\n'
        )
        fake.reset()
        fake.set_keys(anthropic=[], openai=[OPENAI_KEY])
        fake.script(
            Reply.error(Fault.http(401), api="anthropic"),
            Reply.error(Fault.http(401), api="anthropic"),
            Reply.error(Fault.http(401), api="anthropic"),
            Reply(text="from the new fallback", api="openai-chat"),
        )
        late = await run(deployment, ws, "hello", overrides={"agent_id": "late"})
        assert late.result.status == ExecutionStatus.SUCCESS, late.result.error
        assert late.result.fallback_model == "openai/fake-gpt"
    finally:
        store.remove("anthropic:late")
        config.write_text(before)


async def test_a_call_is_not_sent_on_a_profile_another_session_just_cooled(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """The run keeps its profile between calls; while its tool runs, another session's 429
    cools that profile in the shared state. The next call is not sent on it: the run rotates,
    and the profile is not marked a second time."""
    fake.script(
        Reply(tool_calls=[ScriptedToolCall(name="exec", arguments={"command": "sleep 2"})]),
        Reply(text="answered on the other profile"),
    )
    client = await AgentlaneClient.connect(settings_for(deployment))
    key = f"f-{uuid.uuid4().hex[:8]}"
    receipt = await client.send_and_start(
        key, "hello", workspace=str(ws), model=CLAUDE, session_overrides={"agent_id": "solo"}
    )
    assert receipt.run_id
    for _ in range(100):
        if fake.requests("anthropic"):
            break
        await asyncio.sleep(0.05)
    first = key_of(fake.requests("anthropic")[0])
    profile = "anthropic:env" if first == ENV_KEY else "anthropic:work"
    now = time.time()
    cooled = {
        "usage": {
            profile: {
                "cooldown_until": now + 60,
                "cooldown_reason": "rate_limit",
                "error_count": 1,
                "failure_counts": {"rate_limit": 1},
                "last_failure_at": now,
            }
        }
    }
    write_profile_state(deployment.data_dir, cooled)
    result = await client.wait_for_run(receipt.run_id)
    assert result.status == ExecutionStatus.SUCCESS, result.error
    assert result.reply == "answered on the other profile"
    keys = [key_of(r) for r in fake.requests("anthropic")]
    assert len(keys) == 2 and keys[1] != first, "the second call went out on the other profile"
    assert usage(deployment, profile)["error_count"] == 1, "found cooling, not marked again"


async def test_a_damaged_transcript_still_loads_and_the_next_request_is_valid(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """An orphan tool result lands in a session's transcript (a foreign write): the next
    message still runs, and the provider gets a request without the orphan (the "unexpected
    tool_use_id" users reported)."""
    from agentlane.transcript import TranscriptEntry
    from store.sync import run_sync

    solo: dict[str, object] = {"agent_id": "solo"}
    first = await run(deployment, ws, "hello", overrides=solo)
    assert first.result.status == ExecutionStatus.SUCCESS
    orphan = {
        "id": "toolu_gone:result",
        "role": "tool",
        "ts": time.time(),
        "tool_call_id": "toolu_gone",
        "tool_name": "read",
        "text": "from a call that is not in the transcript",
    }
    entry = TranscriptEntry.model_validate(orphan)
    run_sync(settings_for(deployment), lambda store: store.append_entries(first.key, [entry]))
    fake.reset()
    fake.script(Reply(text="still here"))
    second = await run(deployment, ws, "are you there?", key=first.key, overrides=solo)
    assert second.result.status == ExecutionStatus.SUCCESS, second.result.error
    assert second.result.reply == "still here"
    sent = json.dumps(fake.requests("anthropic")[-1].body["messages"])
    assert "toolu_gone" not in sent and "are you there?" in sent
