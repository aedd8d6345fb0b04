"""Transient server errors end to end (issue 24): the real provider SDKs (built with
`max_retries=0`) in a real worker against the fake provider server, on every API. A 500, 502,
503 or 504 is made again by the run workflow after a backoff or the server's Retry-After, within
the session's wait budget; past it the run ends naming the status, the provider, the attempts
and the time waited, or falls back to the next model. The server's request times prove the
waits. Small budgets and Retry-After values keep the file fast. Then the messages of the
configuration mistakes that look like provider failures: a base URL without `/v1`, a key in
the wrong header, a server that does not stream."""

from __future__ import annotations

import asyncio
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
from tests.conftest import make_deployment, settings_for
from tests.e2e.support import collect
from tests.e2e.test_real_providers import Finished
from tests.fakes.provider_server import FakeProviderServer, RecordedRequest
from tests.fakes.scripts import Api, Fault, Reply
from tests.harness import Deployment
from tests.store_support import clear_profile_state, read_profile_state

ENV_KEY = "sk-ant-api03-" + secrets.token_hex(24)
WORK_KEY = "sk-ant-api03-" + secrets.token_hex(24)
OPENAI_KEY = "sk-proj-" + secrets.token_hex(24)
MODELS: dict[Api, str] = {
    "anthropic": "anthropic/fake-claude",
    "openai-chat": "openai/fake-gpt",
    "openai-responses": "openai/fake-reasoner",
}
APIS: list[Api] = ["anthropic", "openai-chat", "openai-responses"]


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

[[models]]
provider = "openai"
id = "fake-reasoner"
api = "openai-responses"
base_url = "{fake.openai_base_url}"

[[models]]
provider = "openai"
id = "gpt-nov1"
api = "openai-chat"
base_url = "{fake.base_url}"

[[models]]
provider = "anthropic"
id = "claude-bearer"
api = "anthropic"
base_url = "{fake.anthropic_base_url}"
auth_header = "bearer"

[agents.chain]
model = "anthropic/fake-claude"
fallbacks = ["openai/fake-gpt"]
"""


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProviderServer]:
    with fake_server() as srv:
        yield srv


def fake_server() -> FakeProviderServer:
    """The fake with the test keys: two Anthropic profiles' and one OpenAI key."""
    return FakeProviderServer(anthropic_keys=[ENV_KEY, WORK_KEY], openai_keys=[OPENAI_KEY])


@pytest.fixture(scope="module")
def deployment(
    server: object, fake: FakeProviderServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    dep = deployed(server, tmp_path_factory.mktemp("transient"), config_toml(fake))
    yield dep
    dep.stop_workers()


def deployed(server: object, root: Path, config: str) -> Deployment:
    """A worker over `config`, with the keys in its environment."""
    (root / "config.toml").write_text(config)
    dep = make_deployment(server, root, ANTHROPIC_API_KEY=ENV_KEY, OPENAI_API_KEY=OPENAI_KEY)
    dep.start_worker()
    return dep


@pytest.fixture(autouse=True)
def _healthy(deployment: Deployment, fake: FakeProviderServer) -> Iterator[None]:
    clear_profile_state(deployment.data_dir)
    fake.reset()
    yield
    AuthStore.for_data_dir(deployment.data_dir).remove("anthropic:work")


@pytest.fixture
def ws(deployment: Deployment) -> Path:
    return new_workspace(deployment)


def new_workspace(deployment: Deployment) -> Path:
    path = deployment.data_dir / "ws" / uuid.uuid4().hex[:8]
    path.mkdir(parents=True)
    return path


async def run(deployment: Deployment, ws: Path, model: str, **overrides: object) -> Finished:
    client = await AgentlaneClient.connect(settings_for(deployment))
    key = f"t-{uuid.uuid4().hex[:8]}"
    receipt = await client.send_and_start(
        key, "hello", workspace=str(ws), model=model, session_overrides=overrides or None
    )
    assert receipt.run_id
    got = await collect(client, key, receipt.run_id, timeout=60)
    return Finished(client, key, got, await client.wait_for_run(receipt.run_id))


def warnings(done: Finished) -> list[tuple[str, str]]:
    return [
        (str(e.data.get("code")), e.text or "")
        for e in done.got.events
        if e.kind == EventKind.WARNING
    ]


def gaps(requests: list[RecordedRequest]) -> list[float]:
    return [b.at - a.at for a, b in zip(requests, requests[1:], strict=False)]


def key_of(request: RecordedRequest) -> str:
    headers = request.headers
    return headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")


@pytest.mark.parametrize("api", APIS)
async def test_three_server_errors_are_waited_out_and_the_call_answers(
    deployment: Deployment, fake: FakeProviderServer, ws: Path, api: Api
) -> None:
    """500, 502 (Retry-After 0.3) and 504 (Retry-After 0.5) on one profile: the same call
    goes out four times, each wait announced once, and the run answers."""
    fake.script(
        Reply.error(Fault.http(500, retry_after=0.3), api=api),
        Reply.error(Fault.http(502, retry_after=0.3), api=api),
        Reply.error(Fault.http(504, retry_after=0.5), api=api),
        Reply(text="made it", api=api),
    )
    done = await run(deployment, ws, MODELS[api])
    assert done.result.status == ExecutionStatus.SUCCESS, done.result.error
    assert done.result.reply == "made it"
    sent = fake.requests(api)
    assert len(sent) == 4
    waits = gaps(sent)
    assert waits[0] >= 0.3 and waits[1] >= 0.3 and waits[2] >= 0.5, waits
    provider = MODELS[api].split("/")[0]
    assert warnings(done) == [
        (
            "transient_retry",
            f"HTTP 500 from {provider}; retrying in 0.3 s as the server asked (Retry-After) "
            "(attempt 2)",
        ),
        (
            "transient_retry",
            f"HTTP 502 from {provider}; retrying in 0.3 s as the server asked (Retry-After) "
            "(attempt 3)",
        ),
        (
            "transient_retry",
            f"HTTP 504 from {provider}; retrying in 0.5 s as the server asked (Retry-After) "
            "(attempt 4)",
        ),
    ]
    # Each call made again starts its message under an id of its own.
    starts = [e.event_id for e in done.got.events if e.kind == EventKind.MESSAGE_START]
    assert len(starts) == 4 and len(set(starts)) == 4, starts
    # A timeout is not the profile's fault: no cooldown written.
    state = read_profile_state(deployment.data_dir)
    assert not any(u.get("cooldown_until") for u in state.get("usage", {}).values())


TRANSIENT = [408, 499, 500, 502, 503, 504, 521, 522, 523, 524, 529]


@pytest.mark.parametrize("api", APIS)
async def test_each_transient_status_once_is_made_again(
    deployment: Deployment, fake: FakeProviderServer, ws: Path, api: Api
) -> None:
    """Every status of the list once, in one run, with the provider's real error bodies: each
    is made again (a 529 or an overloaded 503 as one of its two quick retries)."""
    fake.script(
        *[Reply.error(Fault.http(status, retry_after=0.1), api=api) for status in TRANSIENT],
        Reply(text="through", api=api),
    )
    done = await run(deployment, ws, MODELS[api])
    assert done.result.status == ExecutionStatus.SUCCESS, done.result.error
    assert len(fake.requests(api)) == len(TRANSIENT) + 1
    said = [text for code, text in warnings(done) if code == "transient_retry"]
    assert [int(text.split()[1]) for text in said] == TRANSIENT, said


@pytest.mark.parametrize("api", APIS)
async def test_a_server_error_past_the_budget_ends_the_run_saying_what_was_tried(
    deployment: Deployment, fake: FakeProviderServer, ws: Path, api: Api
) -> None:
    fake.script(*[Reply.error(Fault.http(500), api=api) for _ in range(8)])
    started = time.monotonic()
    done = await run(deployment, ws, MODELS[api], max_wait_seconds=1)
    error = done.result.error
    assert done.result.status == ExecutionStatus.ERROR and error is not None
    assert time.monotonic() - started < 15
    provider = MODELS[api].split("/")[0]
    # The first backoff (2 s ± 20 %) does not fit in 1 s: one attempt, nothing waited.
    assert len(fake.requests(api)) == 1
    assert error.message.startswith(
        f"{MODELS[api]} kept failing: HTTP 500 from {provider} on 1 attempt, after waiting "
        "0 s in all; the next wait would pass the 1-second bound on waiting (the session's "
        "`max_wait_seconds`, set for new sessions in `[agents.main]`). Last error: "
    ), error.message
    # The server's own error, not a slow model (SPEC §5.2's failover reason says `timeout`).
    assert error.kind == ExecutionErrorKind.SERVER_ERROR


async def test_a_retry_after_past_what_is_left_of_the_budget_is_said(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    fake.script(*[Reply.error(Fault.http(502, retry_after=0.4)) for _ in range(8)])
    done = await run(deployment, ws, MODELS["anthropic"], max_wait_seconds=1)
    error = done.result.error
    assert done.result.status == ExecutionStatus.ERROR and error is not None
    # Two waits of 0.4 s fit in 1 s, the third does not: three attempts.
    assert len(fake.requests("anthropic")) == 3
    assert error.message.startswith(
        "anthropic/fake-claude kept failing: HTTP 502 from anthropic on 3 attempts, after "
        "waiting 0.8 s in all; the provider asked to wait 0.4 s (Retry-After), more than the "
        "0.2 s left of the 1-second bound on waiting (the session's `max_wait_seconds`"
        ", set for new sessions in `[agents.main]`). Last "
        "error: "
    ), error.message


async def test_a_503_from_openai_is_retried_after_an_exponential_backoff(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """No Retry-After: the first wait is 2 s with ±20 % jitter, announced with its figure."""
    fake.script(Reply.error(Fault.http(503), api="openai-chat"), Reply(text="back"))
    done = await run(deployment, ws, MODELS["openai-chat"])
    assert done.result.status == ExecutionStatus.SUCCESS, done.result.error
    (gap,) = gaps(fake.requests("openai-chat"))
    assert 1.5 <= gap <= 3.5, gap
    ((code, text),) = warnings(done)
    assert code == "transient_retry" and text.startswith("HTTP 503 from openai; retrying in ")
    assert text.endswith(" s (attempt 2)")


async def test_two_profiles_retry_the_same_profile(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """A server error is the server's, not the key's: the same profile is used again (the
    table never rotates a prompt-stage timeout) and nothing is cooled."""
    AuthStore.for_data_dir(deployment.data_dir).set_key("anthropic:work", "anthropic", WORK_KEY)
    fake.script(
        Reply.error(Fault.http(500, retry_after=0.2), api="anthropic"),
        Reply(text="same key", api="anthropic"),
    )
    done = await run(deployment, ws, MODELS["anthropic"])
    assert done.result.status == ExecutionStatus.SUCCESS, done.result.error
    keys = [key_of(r) for r in fake.requests("anthropic")]
    assert len(keys) == 2 and keys[0] == keys[1]
    assert [code for code, _ in warnings(done)] == ["transient_retry"]


async def test_past_the_budget_the_chain_falls_back_with_the_status_in_the_notice(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    fake.script(
        *[Reply.error(Fault.http(502, retry_after=0.4), api="anthropic") for _ in range(3)],
        Reply(text="from GPT", api="openai-chat"),
    )
    done = await run(deployment, ws, MODELS["anthropic"], agent_id="chain", max_wait_seconds=1)
    assert done.result.status == ExecutionStatus.SUCCESS, done.result.error
    assert done.result.reply == "from GPT"
    assert len(fake.requests("anthropic")) == 3
    notice = [text for code, text in warnings(done) if code == "model_fallback"]
    assert len(notice) == 1
    assert notice[0].startswith(
        "anthropic/fake-claude is unavailable (HTTP 502, timeout; anthropic/fake-claude kept "
        "failing: HTTP 502 from anthropic on 3 attempts"
    ), notice[0]
    assert notice[0].endswith("); falling back to openai/fake-gpt")


async def test_with_a_fallback_a_model_is_left_after_30_s_of_retries_not_the_whole_budget(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """An outage of one provider must not hold every run for the session's 10-minute wait
    budget when a fallback model is configured: a wait that would take this model's retries
    past 30 s (here the server's Retry-After of 31 s) moves the run to the next model at once."""
    fake.script(
        Reply.error(Fault.http(503, retry_after=31), api="anthropic"),
        Reply(text="from GPT", api="openai-chat"),
    )
    started = time.monotonic()
    done = await run(deployment, ws, MODELS["anthropic"], agent_id="chain")
    assert done.result.status == ExecutionStatus.SUCCESS, done.result.error
    assert done.result.reply == "from GPT"
    assert time.monotonic() - started < 20
    notice = [text for code, text in warnings(done) if code == "model_fallback"]
    assert len(notice) == 1 and "HTTP 503" in notice[0], notice


async def test_the_whole_chain_is_tried_once_more_when_budget_is_left(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """SPEC §8.4: the second 500's backoff (4 s ± 20 %) does not fit in what is left of 4 s
    after a 1 s wait, but the original's one retry of the chain after 2.5 s does."""
    fake.script(
        Reply.error(Fault.http(500, retry_after=1), api="anthropic"),
        Reply.error(Fault.http(500), api="anthropic"),
        Reply(text="third time", api="anthropic"),
    )
    done = await run(deployment, ws, MODELS["anthropic"], max_wait_seconds=4)
    assert done.result.status == ExecutionStatus.SUCCESS, done.result.error
    assert [code for code, _ in warnings(done)] == ["transient_retry", "chain_retry"]
    assert gaps(fake.requests("anthropic"))[1] >= 2.5


async def test_the_end_counts_the_attempts_before_the_chain_was_tried_again(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """A 500 waited out (1 s), a second whose backoff does not fit, the chain tried once more
    after 2.5 s, a third 500: three attempts and 3.5 s of waiting, not the last chain's own
    one attempt and nothing waited."""
    fake.script(
        Reply.error(Fault.http(500, retry_after=1), api="anthropic"),
        *[Reply.error(Fault.http(500), api="anthropic") for _ in range(4)],
    )
    done = await run(deployment, ws, MODELS["anthropic"], max_wait_seconds=4)
    error = done.result.error
    assert done.result.status == ExecutionStatus.ERROR and error is not None
    assert len(fake.requests("anthropic")) == 3
    assert [code for code, _ in warnings(done)] == ["transient_retry", "chain_retry"]
    assert error.message.startswith(
        "anthropic/fake-claude kept failing: HTTP 500 from anthropic on 3 attempts, after "
        "waiting 3.5 s in all;"
    ), error.message
    assert error.kind == ExecutionErrorKind.SERVER_ERROR


async def test_an_abort_during_the_backoff_ends_the_run_within_a_second(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    fake.script(Reply.error(Fault.http(500, retry_after=60), api="anthropic"))
    client = await AgentlaneClient.connect(settings_for(deployment))
    key = f"t-{uuid.uuid4().hex[:8]}"
    receipt = await client.send_and_start(
        key, "hello", workspace=str(ws), model=MODELS["anthropic"]
    )
    assert receipt.run_id
    for _ in range(200):
        status = await client.status(key)
        if status.phase == "waiting":
            break
        await asyncio.sleep(0.05)
    else:
        pytest.fail("the run never waited")
    asked = time.monotonic()
    await client.abort(key)
    result = await client.wait_for_run(receipt.run_id)
    assert time.monotonic() - asked < 1.0
    assert result.termination_reason == TerminationReason.ABORT_SIGNAL
    assert len(fake.requests("anthropic")) == 1


async def test_a_429_asking_for_more_than_the_bound_says_so_and_records_it(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    fake.script(Reply.error(Fault.http(429, retry_after=700), api="anthropic"))
    done = await run(deployment, ws, MODELS["anthropic"])
    error = done.result.error
    assert done.result.status == ExecutionStatus.ERROR and error is not None
    assert error.message.startswith("⚠️ Rate-limited — ready in ~12 min."), error.message
    assert (
        "The provider asked to wait 700 s (Retry-After), more than the 10-minute bound on "
        "waiting (the session's `max_wait_seconds`, set for new sessions in `[agents.main]`)."
    ) in error.message
    state = read_profile_state(deployment.data_dir)
    until = float(state["usage"]["anthropic:env"]["cooldown_until"])
    assert 690 < until - time.time() <= 700


async def test_a_404_names_the_url_called_and_the_missing_v1(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    done = await run(deployment, ws, "openai/gpt-nov1")
    error = done.result.error
    assert done.result.status == ExecutionStatus.ERROR and error is not None
    assert error.message.endswith(
        f"(called {fake.base_url}/chat/completions). OpenAI-compatible servers usually serve "
        f'under `/v1`: try base_url = "{fake.base_url}/v1".'
    ), error.message


async def test_a_401_naming_a_header_points_at_auth_header(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    fake.set_key_headers(anthropic=["x-api-key"])  # a gateway that reads x-api-key only
    done = await run(deployment, ws, "anthropic/claude-bearer")
    error = done.result.error
    assert done.result.status == ExecutionStatus.ERROR and error is not None
    assert error.message.endswith(
        'The server wants the key in the `x-api-key` header: set `auth_header = "x-api-key"` '
        "on the model (or its auth profile) in the config."
    ), error.message


@pytest.mark.parametrize("api", APIS)
async def test_a_json_answer_to_a_streamed_request_is_reported_at_once(
    deployment: Deployment, fake: FakeProviderServer, ws: Path, api: Api
) -> None:
    fake.script(Reply(text="not streamed", ignore_stream=True, api=api))
    started = time.monotonic()
    done = await run(deployment, ws, MODELS[api])
    error = done.result.error
    assert done.result.status == ExecutionStatus.ERROR and error is not None
    assert time.monotonic() - started < 10
    assert len(fake.requests(api)) == 1, "not retried: it would answer the same way"
    assert error.failure is not None and error.failure.code == "not_streaming"
    assert "the server answered without streaming at " in error.message, error.message
    assert "(Content-Type: application/json)" in error.message


async def test_a_cut_stream_is_made_again_with_a_jittered_backoff_announced(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """A connection dropped mid-stream: the run makes the call again (issue 24; more in
    test_transport_faults.py) after 0.5 s ± 20 %, announced once; the watcher ends with the
    second attempt's text."""
    fake.script(
        Reply(text="cut short here and", fault=Fault.drop(after_deltas=2), api="openai-chat"),
        Reply(text="made again in full", api="openai-chat"),
    )
    done = await run(deployment, ws, MODELS["openai-chat"])
    assert done.result.status == ExecutionStatus.SUCCESS, done.result.error
    assert done.result.reply == "made again in full"
    ((code, text),) = warnings(done)
    assert code == "transport_retry"
    assert text.startswith(
        f"Stream from 127.0.0.1:{fake.port} cut short after 12 characters (openai, ECONNRESET); "
        "retrying in "
    ) and text.endswith(" s (attempt 2)"), text
    (gap,) = gaps(fake.requests("openai-chat"))
    assert 0.35 <= gap <= 3.0, gap


async def test_a_stream_that_never_says_it_finished_is_made_again_twice_only(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """A server (or proxy) that closes every stream cleanly without a stop reason: the same
    answer was generated again and again for the whole 10-minute budget (61 paid calls)."""
    fake.script(
        *[
            Reply(
                text="the same whole answer",
                fault=Fault.truncate(after_deltas=3),
                api="openai-chat",
            )
            for _ in range(8)
        ]
    )
    done = await run(deployment, ws, MODELS["openai-chat"])
    assert done.result.status == ExecutionStatus.ERROR and done.result.error is not None
    assert len(fake.requests("openai-chat")) == 3
    assert "ends without a stop reason is tried 2 more times only" in done.result.error.message


async def test_an_overload_is_retried_twice_then_its_retry_after_is_waited_before_rotating(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    AuthStore.for_data_dir(deployment.data_dir).set_key("anthropic:work", "anthropic", WORK_KEY)
    fake.script(
        *[Reply.error(Fault.http(529, retry_after=0.5), api="anthropic") for _ in range(3)],
        Reply(text="the other key", api="anthropic"),
    )
    done = await run(deployment, ws, MODELS["anthropic"])
    assert done.result.status == ExecutionStatus.SUCCESS, done.result.error
    assert [code for code, _ in warnings(done)] == [
        "transient_retry",
        "transient_retry",
        "overload_wait",
        "profile_rotated",
    ]
    keys = [key_of(r) for r in fake.requests("anthropic")]
    assert keys[0] == keys[1] == keys[2] != keys[3], "two quick retries, then a rotation"
    assert all(gap >= 0.5 for gap in gaps(fake.requests("anthropic"))), "every wait was honoured"
    overload = [text for code, text in warnings(done) if code == "overload_wait"][0]
    assert overload.startswith(
        "HTTP 529 from anthropic (overloaded); waiting 0.5 s as the server asked (Retry-After), "
        "then trying anthropic:"
    ), overload
