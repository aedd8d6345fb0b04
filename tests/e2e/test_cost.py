"""Cost (issue 12), end to end: real provider SDKs in a real worker against the fake provider
server, which reports the usage each test scripts, with prices set in the test's config. A
retried call, a profile rotation, a model fallback, continue-as-new of the run and of the
session, and a compaction's summariser each count exactly what was answered, once; a model
without prices says "unpriced" in status and the CLI, never $0.

Figures are micro-dollars worked out by hand in each test (prices are per million tokens)."""

from __future__ import annotations

import json
import secrets
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentlane.events import EventKind
from agentlane.run import ExecutionStatus
from agentlane.usage import Cost
from clients.api import AgentlaneClient
from tests.conftest import make_deployment, settings_for
from tests.e2e.support import collect, wait_idle
from tests.e2e.test_cli import acli
from tests.e2e.test_continue_as_new import chain_length
from tests.e2e.test_real_providers import Finished
from tests.fakes.provider_server import FakeProviderServer
from tests.fakes.scripts import Fault, Reply, ScriptedToolCall, ScriptedUsage
from tests.harness import Deployment
from tests.store_support import clear_profile_state

ENV_KEY = "sk-ant-api03-" + secrets.token_hex(24)
WORK_KEY = "sk-ant-api03-" + secrets.token_hex(24)
OPENAI_KEY = "sk-proj-" + secrets.token_hex(24)
CLAUDE = "anthropic/fake-claude"  # $3 / $15, cache $0.3 read / $3.75 write
GPT = "openai/fake-gpt"  # $2 / $8
LOCAL = "openai/fake-local"  # no prices: unpriced


def config_toml(fake: FakeProviderServer) -> str:
    return f"""
[[models]]
provider = "anthropic"
id = "fake-claude"
api = "anthropic"
base_url = "{fake.anthropic_base_url}"
summariser = "anthropic/fake-haiku"
[models.prices]
input = 3
output = 15
cache_read = 0.3
cache_write = 3.75

[[models]]
provider = "anthropic"
id = "fake-haiku"
api = "anthropic"
base_url = "{fake.anthropic_base_url}"
prices = {{ input = 1, output = 5 }}

[[models]]
provider = "openai"
id = "fake-gpt"
api = "openai-chat"
base_url = "{fake.openai_base_url}"
prices = {{ input = 2, output = 8 }}

[[models]]
provider = "openai"
id = "fake-local"
api = "openai-chat"
base_url = "{fake.openai_base_url}"

[agents.main]
model = "{CLAUDE}"
fallbacks = ["{GPT}"]
"""


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProviderServer]:
    with FakeProviderServer(anthropic_keys=[ENV_KEY, WORK_KEY], openai_keys=[OPENAI_KEY]) as srv:
        yield srv


@pytest.fixture(scope="module")
def deployment(
    server: object, fake: FakeProviderServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    from activities.auth_store import AuthStore

    root = tmp_path_factory.mktemp("cost")
    (root / "config.toml").write_text(config_toml(fake))
    dep = make_deployment(server, root, ANTHROPIC_API_KEY=ENV_KEY, OPENAI_API_KEY=OPENAI_KEY)
    AuthStore.for_data_dir(root).set_key("anthropic:work", "anthropic", WORK_KEY)
    dep.start_worker()
    yield dep
    dep.stop_workers()


@pytest.fixture(autouse=True)
def _healthy(deployment: Deployment, fake: FakeProviderServer) -> None:
    """Cooldowns are shared by every session: one case's 429 must not hold back the next."""
    clear_profile_state(deployment.data_dir)
    fake.reset()


@pytest.fixture
def ws(deployment: Deployment) -> Path:
    path = deployment.data_dir / "ws" / uuid.uuid4().hex[:8]
    path.mkdir(parents=True)
    (path / "notes.txt").write_text("alpha line\nbeta line\n")
    return path


def used(input: int, output: int, cache_read: int = 0) -> ScriptedUsage:
    return ScriptedUsage(input=input, output=output, cache_read=cache_read)


async def send(
    deployment: Deployment,
    ws: Path,
    text: str,
    *,
    key: str | None = None,
    model: str = CLAUDE,
    overrides: dict[str, object] | None = None,
) -> Finished:
    client = await AgentlaneClient.connect(settings_for(deployment))
    key = key or f"cost-{uuid.uuid4().hex[:8]}"
    receipt = await client.send_and_start(
        key, text, workspace=str(ws), model=model, session_overrides=overrides
    )
    assert receipt.run_id
    got = await collect(client, key, receipt.run_id, timeout=60)
    return Finished(client, key, got, await client.wait_for_run(receipt.run_id))


async def current_details(client: AgentlaneClient, workflow_id: str) -> str:
    """What the Temporal UI shows as the workflow's current details (the latest run of its
    chain)."""
    from temporalio.api.sdk.v1 import WorkflowMetadata

    handle = client.client.get_workflow_handle(workflow_id)
    meta = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    return str(meta.current_details)


def agent_end_cost(done: Finished) -> object:
    end = [e for e in done.got.events if e.kind == EventKind.AGENT_END]
    return end[-1].data.get("cost")


async def test_a_retried_call_is_counted_once(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """The first call's stream drops mid-reply (the run makes the call again, issue 24); the
    second answers. Only the answer is paid for: 1000*3 + 200*15 + 4000*0.3 = 7200
    micro-dollars."""
    fake.script(
        Reply(
            text="Counted once.",
            delay=0.02,
            fault=Fault.drop(after_deltas=2),
            usage=used(77_777, 9_999),
        ),
        Reply(text="Counted once.", usage=used(1_000, 200, cache_read=4_000)),
    )
    done = await send(deployment, ws, "hello")
    result = done.result
    assert result.status == ExecutionStatus.SUCCESS, result.error
    assert len(fake.requests("anthropic")) == 2, "the call was made twice"
    # Made again by the run after an announced wait: its message starts under an id of its own.
    starts = {e.event_id for e in done.got.events if e.kind == EventKind.MESSAGE_START}
    assert len(starts) == 2, starts
    assert [e.data.get("code") for e in done.got.events if e.kind == EventKind.WARNING] == [
        "transport_retry"
    ]
    assert result.usage.model_calls == 1
    assert result.usage.accumulated.cost == Cost(usd=0.0072, priced_calls=1)
    assert result.usage.accumulated.cost.known == 0.0072
    assert agent_end_cost(done) == "$0.0072"
    status = await done.client.status(done.key)
    assert status.usage.cost == Cost(usd=0.0072, priced_calls=1)
    assert status.cost == "$0.0072"


async def test_a_stalled_call_made_again_by_the_run_is_counted_once(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """The first call stalls past the idle limit after showing text; the run makes the call
    again (another profile) and that answer alone is paid for: 7200."""
    fake.script(
        Reply(
            text="Thinking about it", fault=Fault.stall(30, after_deltas=1), usage=used(50_000, 10)
        ),
        Reply(text="Answered.", usage=used(1_000, 200, cache_read=4_000)),
    )
    done = await send(deployment, ws, "hello", overrides={"idle_timeout_seconds": 2})
    result = done.result
    assert result.status == ExecutionStatus.SUCCESS, result.error
    assert result.reply == "Answered."
    assert len(fake.requests("anthropic")) == 2
    assert result.usage.model_calls == 1
    assert result.usage.accumulated.cost == Cost(usd=0.0072, priced_calls=1)


async def test_rotation_and_fallback_count_the_answers_at_their_own_models_prices(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """Claude answers the first call (7200); the second gets 429 on both Claude profiles and
    GPT answers it at GPT's prices: 3000*2 + 500*8 = 10000. The refused calls cost nothing."""
    fake.script(
        Reply(
            tool_calls=[ScriptedToolCall(name="read", arguments={"path": "notes.txt"})],
            usage=used(1_000, 200, cache_read=4_000),
        ),
        Reply.error(Fault.http(429), key=ENV_KEY),
        Reply.error(Fault.http(429), key=WORK_KEY),
        Reply(text="GPT took over.", api="openai-chat", usage=used(3_000, 500)),
    )
    done = await send(deployment, ws, "read my notes")
    result = done.result
    assert result.status == ExecutionStatus.SUCCESS, result.error
    assert result.fallback_model == GPT
    assert len(fake.requests("anthropic")) == 3 and len(fake.requests("openai-chat")) == 1
    assert result.usage.model_calls == 2
    assert result.usage.accumulated.cost == Cost(usd=0.0172, priced_calls=2)
    assert (await done.client.status(done.key)).cost == "$0.0172"


async def test_continue_as_new_of_run_and_session_keeps_the_sum(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """Six writes and a reply, in a run that continues as new: calls of (1000 + 100 i) * 3 +
    50 * 15 for i < 6 (27000) and 2000 * 3 + 100 * 15 (7500): 34500. Then three runs of 4500
    each in a session that continues as new: 48000 in all."""
    overrides: dict[str, object] = {
        "run_continue_as_new_after_events": 25,
        "continue_as_new_after_events": 20,
    }
    fake.script(
        *[
            Reply(
                tool_calls=[
                    ScriptedToolCall(
                        name="write", arguments={"path": f"f{i}.txt", "content": str(i)}
                    )
                ],
                usage=used(1_000 + 100 * i, 50),
            )
            for i in range(6)
        ],
        Reply(text="Six files.", usage=used(2_000, 100)),
        *[Reply(text=f"again {i}", usage=used(1_000, 100)) for i in range(3)],
    )
    done = await send(deployment, ws, "write six files", overrides=overrides)
    result, client, key = done.result, done.client, done.key
    assert result.status == ExecutionStatus.SUCCESS, result.error
    assert result.tool_calls == 6 and result.usage.model_calls == 7
    assert await chain_length(client, result.run_id, 2) >= 2, "the run continued as new"
    assert result.usage.accumulated.cost == Cost(usd=0.0345, priced_calls=7)
    for i in range(3):
        await client.send_and_start(key, f"say again {i}")
        await wait_idle(client, key, runs=2 + i)
    assert await chain_length(client, f"session:{key}", 2) >= 2, "the session continued as new"
    status = await client.status(key)
    assert status.runs == 4
    assert status.usage.cost == Cost(usd=0.048, priced_calls=10)
    assert status.cost == "$0.0480"
    # The Temporal UI shows each workflow's current details: the session's totals, and the
    # run's own figures.
    session = await current_details(client, f"session:{key}")
    assert "session: 10 turns, 13200 tokens, cost $0.0480" in session, session
    run = await current_details(client, result.run_id)
    assert "7 turns" in run and "cost $0.0345" in run, run


async def test_the_summariser_calls_of_a_compaction_count_toward_the_run(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """An overflow (refused: free), a summary by Haiku at Haiku's prices (5000 * 1 + 400 * 5 =
    7000), and the answer (1000 * 3 + 100 * 15 = 4500): 11500, of which one model call."""
    key = f"cost-{uuid.uuid4().hex[:8]}"
    filler = " ".join(f"word{i}" for i in range(250))
    for n in range(10):
        done = await send(deployment, ws, f"message {n}: {filler}", key=key)
        assert done.result.status == ExecutionStatus.SUCCESS, done.result.error
    fake.reset()
    fake.script(
        Reply.error(Fault.named("context_overflow")),
        Reply(text="## Decisions\n- words were said", purpose="summary", usage=used(5_000, 400)),
        Reply(text="Fits now.", usage=used(1_000, 100)),
    )
    done = await send(deployment, ws, "and now?", key=key)
    result = done.result
    assert result.status == ExecutionStatus.SUCCESS, result.error
    assert [e.get("model") for e in fake.log() if e.get("purpose") == "summary"] == ["fake-haiku"]
    assert result.usage.model_calls == 1
    assert result.usage.last_call.input == 1_000, "the summary is not the run's context"
    assert result.usage.accumulated.cost == Cost(usd=0.0115, priced_calls=2)


async def test_an_unpriced_model_says_unpriced_never_zero(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    fake.script(Reply(text="local answer", usage=used(1_000, 100)))
    key = f"cost-{uuid.uuid4().hex[:8]}"
    out = await acli(deployment, "send", key, "hello", "--workspace", str(ws), "--model", LOCAL)
    assert out.returncode == 0, out.stderr
    assert "cost unpriced" in out.stderr and "$" not in out.stderr, out.stderr
    out = await acli(deployment, "status", key)
    assert out.returncode == 0, out.stderr
    status = json.loads(out.stdout)
    assert status["cost"] == "unpriced"
    assert status["usage"]["cost"] == {"priced_calls": 0, "unpriced_calls": 1}
    assert status["usage"]["input"] == 1_000
    # A priced model in the same CLI: 1000 * 3 + 200 * 15 = 6000.
    fake.script(Reply(text="priced answer", usage=used(1_000, 200)))
    key = f"cost-{uuid.uuid4().hex[:8]}"
    out = await acli(deployment, "send", key, "hello", "--workspace", str(ws), "--model", CLAUDE)
    assert out.returncode == 0, out.stderr
    assert "cost $0.0060" in out.stderr, out.stderr
    assert json.loads((await acli(deployment, "status", key)).stdout)["cost"] == "$0.0060"
