"""Transport faults end to end (issue 24): a connection reset before the answer, a stream cut
short mid-way (dropped, or ended without its final event) and a refused connection, on every
API, through the real provider SDKs in a real worker against the fake provider server. The run
makes the call again after 0.5 s, 1 s, 2 s, ... (±20 %), each wait announced once and counted in
the session's `max_wait_seconds` together with the waits for server errors; past the budget the
run ends naming what failed, the provider, the attempts and the time waited (or falls back to
the next model). A refused connection is the fake's *door*: a port that refuses until the test
opens it, as a provider restarting does."""

from __future__ import annotations

import asyncio
import re
import secrets
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from activities.auth_store import AuthStore
from agentlane.errors import ExecutionErrorKind
from agentlane.events import EventKind
from agentlane.run import ExecutionStatus, TerminationReason
from clients.api import AgentlaneClient
from tests.conftest import settings_for
from tests.e2e.support import Collected
from tests.e2e.test_real_providers import Finished
from tests.e2e.test_transient_errors import (
    APIS,
    MODELS,
    OPENAI_KEY,
    WORK_KEY,
    config_toml,
    deployed,
    fake_server,
    gaps,
    key_of,
    new_workspace,
    run,
    warnings,
)
from tests.fakes.provider_server import Door, FakeProviderServer
from tests.fakes.scripts import Api, Fault, Reply
from tests.harness import Deployment
from tests.store_support import clear_profile_state, read_profile_state

OPENAI_WORK_KEY = "sk-proj-" + secrets.token_hex(24)
# The same models behind the door (a port that refuses until opened).
DOOR_MODELS: dict[Api, str] = {
    "anthropic": "anthropic/door-claude",
    "openai-chat": "openai/door-gpt",
    "openai-responses": "openai/door-reasoner",
}
Cut = str  # "reset", "drop", "truncate"
CUTS: list[Cut] = ["reset", "drop", "truncate"]
TEXT = "made again in full"


def door_toml(door: Door) -> str:
    return f"""
[[models]]
provider = "anthropic"
id = "door-claude"
api = "anthropic"
base_url = "{door.base_url}"

[[models]]
provider = "openai"
id = "door-gpt"
api = "openai-chat"
base_url = "{door.base_url}/v1"

[[models]]
provider = "openai"
id = "door-reasoner"
api = "openai-responses"
base_url = "{door.base_url}/v1"

[agents.door_a]
model = "anthropic/door-claude"
fallbacks = ["openai/fake-gpt"]

[agents.door_chat]
model = "openai/door-gpt"
fallbacks = ["anthropic/fake-claude"]

[agents.door_resp]
model = "openai/door-reasoner"
fallbacks = ["anthropic/fake-claude"]

[agents.chain_a]
model = "anthropic/fake-claude"
fallbacks = ["openai/fake-gpt"]

[agents.chain_chat]
model = "openai/fake-gpt"
fallbacks = ["anthropic/fake-claude"]

[agents.chain_resp]
model = "openai/fake-reasoner"
fallbacks = ["anthropic/fake-claude"]
"""


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProviderServer]:
    with fake_server() as srv:
        srv.set_keys(openai=[OPENAI_KEY, OPENAI_WORK_KEY])  # a second OpenAI profile's too
        yield srv


@pytest.fixture(scope="module")
def door(fake: FakeProviderServer) -> Door:
    return fake.door()


@pytest.fixture(scope="module")
def deployment(
    server: object, fake: FakeProviderServer, door: Door, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    dep = deployed(
        server, tmp_path_factory.mktemp("transport"), config_toml(fake) + door_toml(door)
    )
    yield dep
    dep.stop_workers()


@pytest.fixture(autouse=True)
def _healthy(deployment: Deployment, fake: FakeProviderServer, door: Door) -> Iterator[None]:
    clear_profile_state(deployment.data_dir)
    fake.reset()
    door.close()
    yield
    door.close()
    store = AuthStore.for_data_dir(deployment.data_dir)
    store.remove("anthropic:work")
    store.remove("openai:work")


@pytest.fixture
def ws(deployment: Deployment) -> Path:
    return new_workspace(deployment)


def cut(kind: Cut, api: Api) -> Reply:
    """The fault: a reset before any answer, or a stream of TEXT cut after two deltas (12
    characters)."""
    if kind == "reset":
        return Reply.error(Fault.reset(), api=api)
    fault = Fault.drop(after_deltas=2) if kind == "drop" else Fault.truncate(after_deltas=2)
    return Reply(text=TEXT, fault=fault, api=api)


def what(kind: Cut, host: str, provider: str) -> str:
    """How the run names the fault (workflows/policy/transient_retry.transport_what)."""
    if kind == "reset":
        return f"connection to {host} lost ({provider}, ECONNRESET)"
    code = "ECONNRESET" if kind == "drop" else "stream_incomplete"
    return f"stream from {host} cut short after 12 characters ({provider}, {code})"


def retrying(said: str, attempt: int) -> re.Pattern[str]:
    """The warning of one wait, its jittered delay left open."""
    head = said[0].upper() + said[1:]
    return re.compile(re.escape(head) + rf"; retrying in \d(\.\d)? s \(attempt {attempt}\)")


def transport_warnings(done: Finished) -> list[str]:
    return [text for code, text in warnings(done) if code == "transport_retry"]


@pytest.mark.parametrize("times", [1, 3])
@pytest.mark.parametrize("kind", CUTS)
@pytest.mark.parametrize("api", APIS)
async def test_a_transport_fault_is_waited_out_and_the_call_answers(
    deployment: Deployment, fake: FakeProviderServer, ws: Path, api: Api, kind: Cut, times: int
) -> None:
    """Once and three times: the same call goes out again after 0.5 s, 1 s, 2 s (±20 %), each
    wait announced once in the run's words, and the run answers in full. A stream that ends
    without a stop reason is made again twice only: twice here for three."""
    if kind == "truncate":
        times = min(times, 2)
    fake.script(*[cut(kind, api) for _ in range(times)], Reply(text=TEXT, api=api))
    done = await run(deployment, ws, MODELS[api])
    assert done.result.status == ExecutionStatus.SUCCESS, done.result.error
    assert done.result.reply == TEXT
    assert done.got.visible == TEXT, "what the cut streams showed is not shown twice"
    sent = fake.requests(api)
    assert len(sent) == times + 1
    for waited, least in zip(gaps(sent), [0.4, 0.8, 1.6], strict=False):
        assert waited >= least, gaps(sent)
    provider = MODELS[api].split("/")[0]
    said = transport_warnings(done)
    assert len(said) == times, said
    for attempt, text in enumerate(said, start=2):
        assert retrying(what(kind, f"127.0.0.1:{fake.port}", provider), attempt).fullmatch(text), (
            text
        )
    assert [code for code, _ in warnings(done)] == ["transport_retry"] * times
    data = [e.data for e in done.got.events if e.data.get("code") == "transport_retry"]
    assert [d["attempt"] for d in data] == list(range(2, times + 2))
    expected = "connection" if kind == "reset" else "stream_cut"
    assert all(d["transport"] == expected and d["host"] == f"127.0.0.1:{fake.port}" for d in data)
    # Each call made again starts its message under an id of its own.
    starts = [e.event_id for e in done.got.events if e.kind == EventKind.MESSAGE_START]
    assert len(starts) == times + 1 and len(set(starts)) == times + 1, starts


async def watch_and_open(
    client: AgentlaneClient, key: str, run_id: str, door: Door, after: int
) -> Collected:
    """Collect the run's events; open the door once `after` waits have been announced."""
    out = Collected()

    async def go() -> None:
        async for item in client.watch(key, 0, until_run=run_id):
            out.events.append(item.event)
            announced = [e for e in out.events if e.data.get("code") == "transport_retry"]
            if len(announced) >= after:
                door.open()

    await asyncio.wait_for(go(), 60)
    return out


@pytest.mark.parametrize("times", [1, 3])
@pytest.mark.parametrize("api", APIS)
async def test_a_refused_connection_is_waited_out_until_the_server_is_up(
    deployment: Deployment, fake: FakeProviderServer, door: Door, ws: Path, api: Api, times: int
) -> None:
    """Nothing listens at the URL (a provider restarting); the run knocks again at the SDKs'
    pace and goes on once the server is up."""
    fake.script(Reply(text="the server is up", api=api))
    done = await send_through_the_door(deployment, door, ws, DOOR_MODELS[api], times)
    result = done.result
    assert result.status == ExecutionStatus.SUCCESS, result.error
    assert result.reply == "the server is up"
    assert len(fake.requests(api)) == 1, "refused attempts never reach the server"
    said = transport_warnings(done)
    provider = DOOR_MODELS[api].split("/")[0]
    refused = f"connection refused by 127.0.0.1:{door.port} ({provider})"
    assert len(said) == times, said
    for attempt, text in enumerate(said, start=2):
        assert retrying(refused, attempt).fullmatch(text), text


@pytest.mark.parametrize("kind", ["refused", *CUTS])
@pytest.mark.parametrize("api", APIS)
async def test_past_the_budget_the_run_ends_naming_what_failed(
    deployment: Deployment, fake: FakeProviderServer, door: Door, ws: Path, api: Api, kind: str
) -> None:
    """A budget of 1 s: the first wait (0.5 s ± 20 %) fits, the second (1 s ± 20 %) does not.
    The message names what failed, the provider, the attempts and the time waited; the error
    kind tells a dead endpoint from a broken connection, and neither is a `timeout`."""
    provider = MODELS[api].split("/")[0]
    if kind == "refused":
        model, said = DOOR_MODELS[api], f"connection refused by 127.0.0.1:{door.port} ({provider})"
    else:
        fake.script(*[cut(kind, api) for _ in range(4)])
        model, said = MODELS[api], what(kind, f"127.0.0.1:{fake.port}", provider)
    started = time.monotonic()
    done = await run(deployment, ws, model, max_wait_seconds=1)
    error = done.result.error
    assert done.result.status == ExecutionStatus.ERROR and error is not None
    assert time.monotonic() - started < 15
    assert len(transport_warnings(done)) == 1
    assert re.fullmatch(
        re.escape(f"{model} kept failing: {said} on 2 attempts, after waiting ")
        + r"0\.\d s"
        + re.escape(
            " in all; the next wait would pass the 1-second bound on waiting (the session's "
            "`max_wait_seconds`, set for new sessions in `[agents.main]`). Last error: "
        )
        + ".+",
        error.message,
        re.DOTALL,
    ), error.message
    if kind == "refused":
        assert error.kind == ExecutionErrorKind.CONNECTION_REFUSED
        assert f"Could not connect to the model provider at {door.base_url}" in error.message
    else:
        assert error.kind == ExecutionErrorKind.CONNECTION
        assert len(fake.requests(api)) == 2
    assert error.failure is not None and error.failure.transport_kind is not None
    assert error.failure.reason == "timeout", "the failover reason stays SPEC §5.2's"


@pytest.mark.parametrize("api", APIS)
async def test_a_stream_of_unreadable_events_is_made_again_twice_then_said(
    deployment: Deployment, fake: FakeProviderServer, ws: Path, api: Api
) -> None:
    """A server (or proxy) that sends events the SDK cannot parse sends them every time: the
    call is made again twice, not for the whole ten-minute wait budget, and the run says why."""
    fake.script(*[Reply(text=TEXT, fault=Fault.garbage(), api=api) for _ in range(6)])
    started = time.monotonic()
    done = await run(deployment, ws, MODELS[api])
    error = done.result.error
    assert done.result.status == ExecutionStatus.ERROR and error is not None
    assert time.monotonic() - started < 30
    assert len(fake.requests(api)) == 3
    assert "malformed_response" in error.message, error.message
    assert "does not speak this provider's streaming API" in error.message, error.message


async def send_through_the_door(
    deployment: Deployment, door: Door, ws: Path, model: str, opened_after: int, **overrides: object
) -> Finished:
    """A run on a model behind the door, opened once `opened_after` waits were announced (never
    when 0)."""
    client = await AgentlaneClient.connect(settings_for(deployment))
    key = f"t-{uuid.uuid4().hex[:8]}"
    receipt = await client.send_and_start(
        key, "hello", workspace=str(ws), model=model, session_overrides=overrides or None
    )
    assert receipt.run_id
    got = await watch_and_open(client, key, receipt.run_id, door, opened_after or 1 << 30)
    return Finished(client, key, got, await client.wait_for_run(receipt.run_id))


@pytest.mark.parametrize("kind", ["refused", "reset", "drop"])
@pytest.mark.parametrize("api", APIS)
async def test_two_profiles_make_the_call_again_on_the_same_profile(
    deployment: Deployment, fake: FakeProviderServer, door: Door, ws: Path, api: Api, kind: str
) -> None:
    """The connection failed, not the key: no rotation, no cooldown."""
    provider = MODELS[api].split("/")[0]
    second = WORK_KEY if provider == "anthropic" else OPENAI_WORK_KEY
    AuthStore.for_data_dir(deployment.data_dir).set_key(f"{provider}:work", provider, second)
    if kind == "refused":
        fake.script(Reply(text="same key", api=api))
        done = await send_through_the_door(deployment, door, ws, DOOR_MODELS[api], 2)
        assert len(fake.requests(api)) == 1
    else:
        fake.script(cut(kind, api), cut(kind, api), Reply(text="same key", api=api))
        done = await run(deployment, ws, MODELS[api])
        keys = [key_of(r) for r in fake.requests(api)]
        assert len(keys) == 3 and len(set(keys)) == 1, "the same profile every time"
    assert done.result.status == ExecutionStatus.SUCCESS, done.result.error
    assert done.result.reply == "same key"
    assert [code for code, _ in warnings(done)] == ["transport_retry"] * 2
    state = read_profile_state(deployment.data_dir)
    assert not any(u.get("cooldown_until") for u in state.get("usage", {}).values())


# Each API's model falls back to the other family's (agents in `door_toml`).
FALLBACK: dict[Api, tuple[str, Api]] = {
    "anthropic": ("openai/fake-gpt", "openai-chat"),
    "openai-chat": ("anthropic/fake-claude", "anthropic"),
    "openai-responses": ("anthropic/fake-claude", "anthropic"),
}
AGENTS: dict[Api, str] = {"anthropic": "a", "openai-chat": "chat", "openai-responses": "resp"}


@pytest.mark.parametrize("kind", ["refused", "reset", "drop"])
@pytest.mark.parametrize("api", APIS)
async def test_past_the_budget_the_chain_falls_back_naming_what_failed(
    deployment: Deployment, fake: FakeProviderServer, door: Door, ws: Path, api: Api, kind: str
) -> None:
    target, target_api = FALLBACK[api]
    provider = MODELS[api].split("/")[0]
    fake.script(Reply(text="from the fallback", api=target_api))
    if kind == "refused":
        model = DOOR_MODELS[api]
        said = f"connection refused by 127.0.0.1:{door.port} ({provider})"
        done = await send_through_the_door(
            deployment, door, ws, model, 0, agent_id=f"door_{AGENTS[api]}", max_wait_seconds=1
        )
    else:
        fake.script(*[cut(kind, api) for _ in range(2)])
        model, said = MODELS[api], what(kind, f"127.0.0.1:{fake.port}", provider)
        done = await run(deployment, ws, model, agent_id=f"chain_{AGENTS[api]}", max_wait_seconds=1)
    assert done.result.status == ExecutionStatus.SUCCESS, done.result.error
    assert done.result.reply == "from the fallback"
    codes = [code for code, _ in warnings(done)]
    assert codes == ["transport_retry", "model_fallback"], codes
    notice = [text for code, text in warnings(done) if code == "model_fallback"][0]
    assert notice.startswith(
        f"{model} is unavailable (timeout; {model} kept failing: {said} on 2 attempts, after "
        "waiting 0."
    ), notice
    assert notice.endswith(f"); falling back to {target}"), notice


async def test_server_error_and_transport_waits_share_one_budget(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """A 500 asks for 0.7 s; then the connection is reset. Alone, the reset's first wait (0.5 s
    ± 20 %) would fit in a 1 s budget; after the 0.7 s it does not."""
    fake.script(
        Reply.error(Fault.http(500, retry_after=0.7), api="anthropic"),
        cut("reset", "anthropic"),
        Reply(text="never reached", api="anthropic"),
    )
    done = await run(deployment, ws, MODELS["anthropic"], max_wait_seconds=1)
    error = done.result.error
    assert done.result.status == ExecutionStatus.ERROR and error is not None
    assert [code for code, _ in warnings(done)] == ["transient_retry"]
    assert len(fake.requests("anthropic")) == 2
    assert error.message.startswith(
        f"anthropic/fake-claude kept failing: connection to 127.0.0.1:{fake.port} lost "
        "(anthropic, ECONNRESET) on 2 attempts, after waiting 0.7 s in all; the next wait would "
        "pass the 1-second bound on waiting (the session's `max_wait_seconds`"
        ", set for new sessions in `[agents.main]`). Last error: "
    ), error.message
    assert error.kind == ExecutionErrorKind.CONNECTION


async def test_an_abort_during_a_transport_backoff_ends_the_run_within_a_second(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    fake.script(*[cut("reset", "anthropic") for _ in range(10)])
    client = await AgentlaneClient.connect(settings_for(deployment))
    key = f"t-{uuid.uuid4().hex[:8]}"
    receipt = await client.send_and_start(
        key, "hello", workspace=str(ws), model=MODELS["anthropic"]
    )
    assert receipt.run_id
    # Past the short first waits: one with more than a second to go (the third, 2 s ± 20 %).
    for _ in range(400):
        status = await client.status(key)
        if status.phase == "waiting" and (status.waiting_until or 0) - time.time() > 1.2:
            break
        await asyncio.sleep(0.05)
    else:
        pytest.fail("the run never waited long enough")
    sent = len(fake.requests("anthropic"))
    asked = time.monotonic()
    await client.abort(key)
    result = await client.wait_for_run(receipt.run_id)
    assert time.monotonic() - asked < 1.0
    assert result.termination_reason == TerminationReason.ABORT_SIGNAL
    await asyncio.sleep(1.5)
    assert len(fake.requests("anthropic")) == sent, "no call after the abort"
