"""Recorded histories of representative runs must replay with the current workflow code.

A change that would break workflows already running fails here. Histories are recorded by
`python -m tests.histories.record`; see that module before re-recording.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Plugin, Replayer, WorkflowReplayResult, WorkflowRunner

from agentlane.data_converter import make_data_converter
from workers.sandbox import SandboxMode
from workflows.agent_run import AgentRunWorkflow
from workflows.scheduled_message import ScheduledMessageWorkflow
from workflows.session import SessionWorkflow
from workflows.session_events import SessionEventsWorkflow

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*/*.json"))


def test_histories_are_present() -> None:
    scenarios = {p.parent.name for p in HISTORIES}
    assert {
        "tools",
        "steer_and_queue",
        "interrupt_and_abort",
        "continue_as_new",
        "workspace_error",
        "control",
        "queue_policies",
        "tool_loop",
        "reopen_restore",
        "worker_change",
        "failover",
        "failover_v2",
        "context_recovery",
        "reset_branch",
        "webhooks",
        "search_attributes",
        "scheduled",
        "run_outcome",
        "events_at_rest",
        "events_rest_carry",
        "events_settled",
    } <= scenarios


def make_replayer(
    tmp_path: Path, plugins: Sequence[Plugin] = (), runner: WorkflowRunner | None = None
) -> Replayer:
    return Replayer(
        workflows=[
            SessionWorkflow,
            AgentRunWorkflow,
            SessionEventsWorkflow,
            ScheduledMessageWorkflow,
        ],
        data_converter=make_data_converter(tmp_path),
        plugins=plugins,
        **({"workflow_runner": runner} if runner is not None else {}),
    )


async def replay(
    path: Path, tmp_path: Path, plugins: Sequence[Plugin] = ()
) -> WorkflowReplayResult:
    workflow_id = path.stem.split("__")[0]
    history = WorkflowHistory.from_json(workflow_id, path.read_text())
    replayer = make_replayer(tmp_path, plugins)
    return await replayer.replay_workflow(history, raise_on_replay_failure=False)


@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: f"{p.parent.name}/{p.stem}")
async def test_history_replays(path: Path, tmp_path: Path) -> None:
    result = await replay(path, tmp_path)
    assert result.replay_failure is None, f"{path.name}: {result.replay_failure}"


@pytest.fixture(scope="module")
def spans() -> object:
    """Tracing on in this process, as on a worker with OTEL_EXPORTER_OTLP_ENDPOINT set: the SDK's
    replay-safe provider, spans kept in memory."""
    import opentelemetry.trace
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from temporalio.contrib.opentelemetry import (
        ReplaySafeTracerProvider,
        create_tracer_provider,
    )

    current = opentelemetry.trace.get_tracer_provider()
    exporter = InMemorySpanExporter()
    if not isinstance(current, ReplaySafeTracerProvider):
        provider = create_tracer_provider()
        opentelemetry.trace.set_tracer_provider(provider)
        current = opentelemetry.trace.get_tracer_provider()
    assert isinstance(current, ReplaySafeTracerProvider), "another provider was set first"
    current.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: f"{p.parent.name}/{p.stem}")
async def test_history_replays_with_tracing_on(path: Path, tmp_path: Path, spans: object) -> None:
    """The telemetry in workflow code (spans, metrics) issues no command, and a replay exports
    nothing: the worker that first ran these steps exported their spans already."""
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from temporalio.contrib.opentelemetry import OpenTelemetryPlugin

    assert isinstance(spans, InMemorySpanExporter)
    spans.clear()
    result = await replay(path, tmp_path, [OpenTelemetryPlugin()])
    assert result.replay_failure is None, f"{path.name}: {result.replay_failure}"
    assert [s.name for s in spans.get_finished_spans()] == []


@pytest.mark.parametrize("mode", ["off", "passthrough"])
async def test_histories_replay_under_the_workers_runners(
    tmp_path: Path, mode: SandboxMode
) -> None:
    """Workers run workflows unsandboxed by default, or in the sandbox with the project's modules
    passed through (workers/sandbox.py): every history replays the same under both, one replayer
    for all of them, as on a live worker whose instances share the modules. (The strict sandbox
    replays each history in the tests above.)"""
    from workers.sandbox import workflow_runner

    replayer = Replayer(
        workflows=[
            SessionWorkflow,
            AgentRunWorkflow,
            SessionEventsWorkflow,
            ScheduledMessageWorkflow,
        ],
        data_converter=make_data_converter(tmp_path),
        workflow_runner=workflow_runner(mode),
    )

    async def histories() -> AsyncIterator[WorkflowHistory]:
        for path in HISTORIES:
            yield WorkflowHistory.from_json(path.stem.split("__")[0], path.read_text())

    failures: dict[str, str] = {}
    async with replayer.workflow_replay_iterator(histories()) as results:
        async for result in results:
            if result.replay_failure is not None:
                failures[result.history.run_id] = str(result.replay_failure)
    assert failures == {}
