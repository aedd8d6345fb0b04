"""Traces and metrics end to end (issue 12): real workers exporting over OTLP to a receiver in the
test that decodes with `opentelemetry-proto`, and serving Prometheus metrics. The provider is the
fake Anthropic server (the real SDK, real keys it checks), so the test can look for the keys.

- A run with two tool calls: a message span; one trace per run rooted at `invoke_agent`, linked
  to the message; model-call spans with GenAI attributes and tool spans under it; nothing secret
  and no prompt text in any attribute; the steps' trace context in their inputs, not a header.
- The same tree after the worker running a tool is killed with -9 mid-run.
- The metrics endpoint serves the SDK's metrics and ours.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from activities.auth_store import AuthStore
from agentlane import metrics
from agentlane.model_calls import CALL_MODEL
from agentlane.run import ExecutionStatus
from clients.api import AgentlaneClient
from tests.conftest import make_deployment, settings_for
from tests.e2e.test_crash_recovery import worker_running_activity
from tests.fakes.otlp_receiver import OtlpReceiver, ReceivedSpan
from tests.fakes.provider_server import FakeProviderServer
from tests.fakes.scripts import Fault, Reply, ScriptedToolCall
from tests.harness import Deployment, devserver
from tests.store_support import clear_profile_state
from workers.trace_carriage import TRACE_HEADER

ENV_KEY = "sk-ant-api03-" + secrets.token_hex(24)
WORK_KEY = "sk-ant-api03-" + secrets.token_hex(24)
MODEL = "anthropic/fake-claude"
# Words of the prompt that must never reach an attribute (content capture is off).
SECRET_WORDS = "zebra-quartz-nebula"


def config_toml(fake: FakeProviderServer) -> str:
    return f"""
[[models]]
provider = "anthropic"
id = "fake-claude"
api = "anthropic"
base_url = "{fake.anthropic_base_url}"
prices = {{ input = 3, output = 15 }}
"""


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProviderServer]:
    with FakeProviderServer(anthropic_keys=[ENV_KEY, WORK_KEY], openai_keys=[]) as srv:
        yield srv


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    rec = OtlpReceiver().start()
    yield rec
    rec.stop()


def deployment_for(
    server: object, root: Path, fake: FakeProviderServer, env: dict[str, str]
) -> Deployment:
    (root / "config.toml").write_text(config_toml(fake))
    dep = make_deployment(server, root, ANTHROPIC_API_KEY=ENV_KEY, **env)
    AuthStore.for_data_dir(root).set_key("anthropic:work", "anthropic", WORK_KEY)
    return dep


@pytest.fixture(scope="module")
def traced(
    server: object,
    fake: FakeProviderServer,
    receiver: OtlpReceiver,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Deployment, str]]:
    metrics_address = f"127.0.0.1:{devserver.free_port()}"
    env = {**receiver.env("http/protobuf"), "AGENTLANE_METRICS_ADDRESS": metrics_address}
    dep = deployment_for(server, tmp_path_factory.mktemp("traced"), fake, env)
    dep.start_worker()
    yield dep, metrics_address
    dep.stop_workers()


def two_tool_calls(ws: Path) -> list[Reply]:
    (ws / "notes.txt").write_text("alpha\n")
    return [
        Reply(tool_calls=[ScriptedToolCall(name="read", arguments={"path": "notes.txt"})]),
        Reply(
            tool_calls=[
                ScriptedToolCall(name="write", arguments={"path": "out.txt", "content": "done"})
            ]
        ),
        Reply(text="All done."),
    ]


def trace_of(spans: list[ReceivedSpan], run_id: str) -> list[ReceivedSpan]:
    roots = [
        s
        for s in spans
        if s.name.startswith("invoke_agent") and s.attributes.get("agentlane.run_id") == run_id
    ]
    if not roots:
        return []
    trace_id = roots[0].trace_id
    return [s for s in spans if s.trace_id == trace_id]


def shape(trace: list[ReceivedSpan]) -> list[tuple[str, str]]:
    """(span, its parent's name) for each of our spans, sorted: the tree without ids and times.
    The provider SDK's own spans (`anthropic.messages.create`) hang under the model-call spans
    and are checked apart."""
    by_id = {s.span_id: s for s in trace}
    return sorted(
        (s.name, by_id[s.parent_span_id].name if s.parent_span_id in by_id else "")
        for s in trace
        if not s.name.startswith("anthropic.")
    )


def tree_of_three_calls(*tools: str) -> list[tuple[str, str]]:
    """A run of three model calls and a tool call after each of the first two."""
    root = "invoke_agent main"
    return sorted(
        [
            (root, ""),
            *[("chat fake-claude", root)] * 3,
            *[(f"execute_tool {t}", root) for t in tools],
        ]
    )


def sdk_spans_under_calls(trace: list[ReceivedSpan]) -> None:
    by_id = {s.span_id: s for s in trace}
    sdk = [s for s in trace if s.name.startswith("anthropic.")]
    assert sdk, "the Anthropic SDK's spans are missing"
    for span in sdk:
        assert by_id[span.parent_span_id].name.startswith("chat "), span.name


def complete(run_id: str, model_calls: int) -> object:
    def ok(spans: list[ReceivedSpan]) -> bool:
        trace = trace_of(spans, run_id)
        chats = [s for s in trace if s.name.startswith("chat ")]
        return (
            any(s.name.startswith("invoke_agent") for s in trace)
            and len([c for c in chats if "error.type" not in c.attributes]) >= model_calls
        )

    return ok


def assert_nothing_secret(spans: list[ReceivedSpan]) -> None:
    for span in spans:
        for key, value in span.attributes.items():
            text = str(value)
            for secret in (ENV_KEY, WORK_KEY, ENV_KEY[:20], SECRET_WORDS, "alpha"):
                assert secret not in text, f"{span.name} attribute {key} holds {secret[:12]}..."
        for _, attrs in span.events:
            assert SECRET_WORDS not in str(attrs)


async def context_carried_in_inputs(
    client: AgentlaneClient, run_id: str, root: ReceivedSpan
) -> None:
    """The model calls carry the run span's context in their inputs and no trace header, which
    costs the server more than the input's bytes (workers/trace_carriage.py)."""
    history = await client.client.get_workflow_handle(run_id).fetch_history()
    calls = [
        e.activity_task_scheduled_event_attributes
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
        and e.activity_task_scheduled_event_attributes.activity_type.name == CALL_MODEL
    ]
    assert len(calls) == 3
    for call in calls:
        assert TRACE_HEADER not in call.header.fields
        assert f"00-{root.trace_id}-{root.span_id}-01".encode() in call.input.payloads[0].data


async def send(dep: Deployment, key: str, ws: Path) -> tuple[AgentlaneClient, str]:
    client = await AgentlaneClient.connect(settings_for(dep))
    receipt = await client.send_and_start(
        key, f"read my notes and write out.txt ({SECRET_WORDS})", workspace=str(ws), model=MODEL
    )
    assert receipt.run_id
    return client, receipt.run_id


async def test_a_run_with_two_tool_calls_is_one_trace_linked_to_its_message(
    traced: tuple[Deployment, str], fake: FakeProviderServer, receiver: OtlpReceiver
) -> None:
    dep, _ = traced
    ws = dep.data_dir / "ws" / uuid.uuid4().hex[:6]
    ws.mkdir(parents=True)
    fake.reset()
    fake.script(*two_tool_calls(ws))
    key = f"otel-{uuid.uuid4().hex[:6]}"
    client, run_id = await send(dep, key, ws)
    result = await asyncio.wait_for(client.wait_for_run(run_id), 60)
    assert result.status == ExecutionStatus.SUCCESS, result.error

    spans = await asyncio.to_thread(receiver.wait_for, complete(run_id, 3))
    trace = trace_of(spans, run_id)
    assert shape(trace) == tree_of_three_calls("read", "write"), shape(trace)
    sdk_spans_under_calls(trace)
    root = next(s for s in trace if s.name == "invoke_agent main")
    assert root.parent_span_id == ""
    assert root.attributes["gen_ai.conversation.id"] == key
    assert root.attributes["agentlane.status"] == "success"
    assert root.attributes["agentlane.turns"] == 3
    assert root.end_ns > root.start_ns
    await context_carried_in_inputs(client, run_id, root)

    # The run links to the span of the message that started it, in a trace of its own.
    messages = [
        s
        for s in spans
        if s.name == "agentlane.message" and s.attributes.get("gen_ai.conversation.id") == key
    ]
    assert len(messages) == 1
    message = messages[0]
    assert message.trace_id != root.trace_id
    assert root.links == [(message.trace_id, message.span_id)]
    assert message.attributes["agentlane.message.disposition"] == "started"

    chats = sorted((s for s in trace if s.name.startswith("chat ")), key=lambda s: s.start_ns)
    for chat in chats:
        attrs = chat.attributes
        assert attrs["gen_ai.operation.name"] == "chat"
        assert attrs["gen_ai.provider.name"] == "anthropic"
        assert attrs["gen_ai.request.model"] == "fake-claude"
        assert attrs["gen_ai.usage.input_tokens"] > 0
        assert attrs["gen_ai.usage.output_tokens"] > 0
        assert attrs["agentlane.auth_profile"].startswith("anthropic:")
        # $3 / $15 per million tokens, priced by the call that answered.
        expected = (
            attrs["gen_ai.usage.input_tokens"] * 3 + attrs["gen_ai.usage.output_tokens"] * 15
        ) / 1e6
        assert attrs["agentlane.cost_usd"] == pytest.approx(expected)
    assert root.attributes["agentlane.cost_usd"] == pytest.approx(
        sum(c.attributes["agentlane.cost_usd"] for c in chats)
    )
    assert [c.attributes["gen_ai.response.finish_reasons"] for c in chats] == [
        ["tool_use"],
        ["tool_use"],
        ["end_turn"],
    ]
    tools = {s.name: s for s in trace if s.name.startswith("execute_tool")}
    assert tools["execute_tool read"].attributes["gen_ai.tool.name"] == "read"
    assert tools["execute_tool read"].attributes["agentlane.tool.outcome"] == "ok"
    # Spans follow the run's order: each tool after the call that asked for it.
    assert chats[0].end_ns <= tools["execute_tool read"].start_ns <= chats[1].start_ns
    assert all(s.resource.get("service.name") == "agentlane-test-worker" for s in trace)
    assert_nothing_secret(spans)


def scrape(address: str) -> str:
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=5) as resp:
        return str(resp.read().decode())


async def test_the_prometheus_endpoint_serves_sdk_and_agentlane_metrics(
    traced: tuple[Deployment, str], fake: FakeProviderServer
) -> None:
    dep, address = traced
    ws = dep.data_dir / "ws" / uuid.uuid4().hex[:6]
    ws.mkdir(parents=True)
    fake.reset()
    # A 429 on the first profile: a rotation and a cooldown, then the two tool calls.
    fake.script(Reply.error(Fault.http(429)), *two_tool_calls(ws))
    clear_profile_state(dep.data_dir)
    client, run_id = await send(dep, f"metrics-{uuid.uuid4().hex[:6]}", ws)
    result = await asyncio.wait_for(client.wait_for_run(run_id), 60)
    assert result.status == ExecutionStatus.SUCCESS, result.error

    text = ""
    for _ in range(50):
        text = await asyncio.to_thread(scrape, address)
        if "agentlane_runs_ended" in text and "agentlane_profile_rotations" in text:
            break
        await asyncio.sleep(0.2)
    names = {m.group(1) for m in re.finditer(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)", text, re.M)}
    ours = {n for n in names if n.startswith("agentlane_")}
    for name in (
        metrics.RUNS_STARTED,
        metrics.RUNS_ENDED,
        metrics.MODEL_CALLS,
        metrics.TOKENS,
        metrics.TOOL_CALLS,
        metrics.ROTATIONS,
        metrics.COOLDOWNS,
        metrics.MESSAGES,
        metrics.QUEUE_DEPTH,
        metrics.COST,
    ):
        assert any(n == name or n.startswith(name + "_") for n in ours), (name, sorted(ours))
    assert any(n.startswith("temporal_") for n in names), "the SDK's own metrics are missing"
    assert re.search(r'agentlane_model_calls\{[^}]*outcome="rate_limit"', text), text[:3000]
    assert re.search(r'agentlane_tokens\{[^}]*kind="output"', text)
    assert re.search(r'agentlane_cost_usd_sum\{[^}]*model="fake-claude"', text)
    assert re.search(r'agentlane_runs_ended\{[^}]*status="success"', text)
    assert ENV_KEY not in text and WORK_KEY not in text and SECRET_WORDS not in text


async def test_the_same_tree_after_a_worker_is_killed_mid_run(
    server: object,
    fake: FakeProviderServer,
    receiver: OtlpReceiver,
    tmp_path: Path,
) -> None:
    dep = deployment_for(server, tmp_path, fake, receiver.env("grpc"))
    dep.start_worker()
    dep.start_worker()
    try:
        ws = tmp_path / "ws"
        ws.mkdir()
        (ws / "notes.txt").write_text("alpha\n")
        fake.reset()
        fake.script(
            Reply(tool_calls=[ScriptedToolCall(name="read", arguments={"path": "notes.txt"})]),
            Reply(
                tool_calls=[
                    ScriptedToolCall(name="exec", arguments={"command": "sleep 4; echo slept"})
                ]
            ),
            Reply(text="All done."),
        )
        client, run_id = await send(dep, f"otel-kill-{uuid.uuid4().hex[:6]}", ws)
        victim = await worker_running_activity(client, dep, run_id, "tool_exec")
        # Spans that ended before the kill have left the worker (export delay 200 ms).
        await asyncio.sleep(1.0)
        victim.kill9()
        result = await asyncio.wait_for(client.wait_for_run(run_id), 90)
        assert result.status == ExecutionStatus.SUCCESS, result.error

        spans = await asyncio.to_thread(receiver.wait_for, complete(run_id, 3))
        trace = trace_of(spans, run_id)
        # The killed attempt's tool span never ended (it is not exported); the retry's is.
        assert shape(trace) == tree_of_three_calls("read", "exec"), shape(trace)
        ids = Counter(s.span_id for s in trace)
        assert max(ids.values()) == 1, "a span was exported twice"
        root = next(s for s in trace if s.name == "invoke_agent main")
        assert root.attributes["agentlane.status"] == "success"
        execs = [s for s in trace if s.name == "execute_tool exec"]
        assert execs[0].attributes["agentlane.attempt"] >= 2
        # Two worker processes exported parts of the one trace.
        assert len({s.resource.get("process.pid") for s in trace}) == 2
        assert_nothing_secret(spans)
    finally:
        dep.stop_workers()


async def test_an_adapters_trace_continues_through_the_gateway_into_the_session(
    traced: tuple[Deployment, str], fake: FakeProviderServer, receiver: OtlpReceiver
) -> None:
    """`agentlane gateway` with tracing on: the adapter's `traceparent` is the parent of the
    gateway's span, which is the parent of the session's message span; the run links to it."""
    import subprocess
    import sys
    import time

    import httpx

    from clients.gateway.auth import TokenStore
    from tests.harness import REPO

    dep, _ = traced
    fake.reset()
    fake.script(Reply(text="Hello from the gateway."))
    port = devserver.free_port()
    token = TokenStore(dep.data_dir).create(name="otel")[1]
    env = {**dep.env(), **receiver.env("http/protobuf"), "OTEL_SERVICE_NAME": "gw-under-test"}
    log = (dep.data_dir / "gateway-otel.log").open("wb")
    proc = subprocess.Popen(  # noqa: ASYNC220 - started once, waited for over HTTP
        [sys.executable, "-m", "clients.cli", "gateway", "--port", str(port)],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            deadline = time.monotonic() + 30
            while True:
                try:
                    if (await http.get("/healthz")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, "the gateway did not start"
                await asyncio.sleep(0.2)
            adapter_trace, adapter_span = secrets.token_hex(16), secrets.token_hex(8)
            key = f"gw-otel-{uuid.uuid4().hex[:6]}"
            reply = await http.post(
                f"/v1/sessions/{key}/messages",
                json={"text": f"hello ({SECRET_WORDS})", "model": MODEL},
                headers={
                    "Authorization": f"Bearer {token}",
                    "traceparent": f"00-{adapter_trace}-{adapter_span}-01",
                },
            )
            assert reply.status_code == 200, reply.text
        client = await AgentlaneClient.connect(settings_for(dep))
        fate = await client.wait_started(key, reply.json()["message_seq"])
        run_id = fate.run_id
        assert run_id
        result = await asyncio.wait_for(client.wait_for_run(run_id), 60)
        assert result.status == ExecutionStatus.SUCCESS, result.error

        def arrived(spans: list[ReceivedSpan]) -> bool:
            # Every span read below: the gateway's own span ends after its child's, and may
            # come in the exporter's next batch.
            adapter_names = {s.name for s in spans if s.trace_id == adapter_trace}
            return (
                bool(trace_of(spans, run_id))
                and {
                    "agentlane.message",
                    "agentlane.gateway.send",
                }
                <= adapter_names
            )

        spans = await asyncio.to_thread(receiver.wait_for, arrived)
        adapter = [s for s in spans if s.trace_id == adapter_trace]
        gateway = next(s for s in adapter if s.name == "agentlane.gateway.send")
        assert gateway.resource.get("service.name") == "gw-under-test"
        assert gateway.attributes["gen_ai.conversation.id"] == key
        messages = [s for s in adapter if s.name == "agentlane.message"]
        assert [m.parent_span_id for m in messages] == [gateway.span_id]
        message = messages[0]
        # Up from the gateway's span (through FastAPI's own request spans, when it makes them)
        # to the adapter's.
        by_id = {s.span_id: s for s in adapter}
        up = gateway
        while up.parent_span_id in by_id:
            up = by_id[up.parent_span_id]
        assert up.parent_span_id == adapter_span
        root = next(s for s in trace_of(spans, run_id) if s.name.startswith("invoke_agent"))
        assert root.links == [(adapter_trace, message.span_id)]
        assert_nothing_secret(spans)
    finally:
        proc.terminate()
        proc.wait(timeout=15)


async def test_content_capture_records_messages_only_when_turned_on(
    server: object,
    fake: FakeProviderServer,
    receiver: OtlpReceiver,
    tmp_path: Path,
) -> None:
    env = {
        **receiver.env("http/protobuf"),
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true",
    }
    dep = deployment_for(server, tmp_path, fake, env)
    dep.start_worker()
    try:
        fake.reset()
        fake.script(Reply(text="Captured reply."))
        ws = tmp_path / "ws"
        ws.mkdir()
        client, run_id = await send(dep, f"otel-content-{uuid.uuid4().hex[:6]}", ws)
        result = await asyncio.wait_for(client.wait_for_run(run_id), 60)
        assert result.status == ExecutionStatus.SUCCESS, result.error
        spans = await asyncio.to_thread(receiver.wait_for, complete(run_id, 1))
        chat = next(s for s in trace_of(spans, run_id) if s.name.startswith("chat "))
        assert SECRET_WORDS in chat.attributes["gen_ai.input.messages"]
        assert "Captured reply." in chat.attributes["gen_ai.output.messages"]
        # Keys never, even then.
        for value in chat.attributes.values():
            assert ENV_KEY not in str(value) and WORK_KEY not in str(value)
    finally:
        dep.stop_workers()


async def test_a_dead_collector_neither_slows_runs_nor_holds_a_stop(
    server: object, fake: FakeProviderServer, tmp_path: Path
) -> None:
    import time

    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{devserver.free_port()}"}
    dep = deployment_for(server, tmp_path, fake, env)
    worker = dep.start_worker()
    try:
        fake.reset()
        fake.script(Reply(text="Nobody is collecting."))
        ws = tmp_path / "ws"
        ws.mkdir()
        client, run_id = await send(dep, f"otel-dead-{uuid.uuid4().hex[:6]}", ws)
        result = await asyncio.wait_for(client.wait_for_run(run_id), 30)
        assert result.status == ExecutionStatus.SUCCESS, result.error
        await asyncio.sleep(1.5)  # a failed export is being retried now
    finally:
        started = time.monotonic()
        dep.stop_workers()
        stopped_in = time.monotonic() - started
    assert stopped_in < 8, f"the stop took {stopped_in:.1f} s"
    assert "the collector did not answer" in worker.log.read_text()


async def test_a_compaction_is_a_span_of_its_run_and_a_counted_metric(
    traced: tuple[Deployment, str], fake: FakeProviderServer, receiver: OtlpReceiver
) -> None:
    dep, address = traced
    ws = dep.data_dir / "ws" / uuid.uuid4().hex[:6]
    ws.mkdir(parents=True)
    key = f"otel-compact-{uuid.uuid4().hex[:6]}"
    client = await AgentlaneClient.connect(settings_for(dep))
    fake.reset()
    for n in range(6):  # something before the recent turns to summarise
        filler = " ".join(f"word{i}" for i in range(250))
        receipt = await client.send_and_start(
            key, f"message {n}: {filler}", workspace=str(ws), model=MODEL
        )
        assert receipt.run_id
        await client.wait_for_run(receipt.run_id)
    fake.script(
        Reply.error(Fault.named("context_overflow")),
        Reply(text="## Decisions\n- kept short", purpose="summary"),
        Reply(text="Fits now."),
    )
    receipt = await client.send_and_start(key, "and now?")
    assert receipt.run_id
    result = await asyncio.wait_for(client.wait_for_run(receipt.run_id), 60)
    assert result.status == ExecutionStatus.SUCCESS, result.error

    run_id = receipt.run_id
    spans = await asyncio.to_thread(receiver.wait_for, complete(run_id, 1))
    trace = trace_of(spans, run_id)
    compaction = next(s for s in trace if s.name == "agentlane.compaction")
    root = next(s for s in trace if s.name.startswith("invoke_agent"))
    assert compaction.parent_span_id == root.span_id
    attrs = compaction.attributes
    assert attrs["agentlane.compaction.outcome"] == "compacted"
    assert attrs["agentlane.compaction.tokens_after"] < attrs["agentlane.compaction.tokens_before"]
    assert attrs["agentlane.cost_usd"] > 0  # the summariser's call, at the model's prices
    failed = [s for s in trace if s.name.startswith("chat ") and "error.type" in s.attributes]
    assert [s.attributes["error.type"] for s in failed] == ["context_overflow"]
    text = await asyncio.to_thread(scrape, address)
    assert re.search(r'agentlane_compactions\{[^}]*outcome="compacted"', text), text[:2000]
    assert_nothing_secret([compaction])
