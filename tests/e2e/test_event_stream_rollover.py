"""The session's event stream continues as new early, by history events or by history bytes,
and never loses or reorders an offset: many publishes across several hand-overs, a live
subscriber sees every offset once and in order, each segment's history stays small and replays
in well under a second, and the state handed over stays within its byte budget (issue 26)."""

from __future__ import annotations

import asyncio
import base64
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.client import WorkflowExecutionStatus, WorkflowHandle
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.worker import Replayer

from agentlane.data_converter import make_data_converter
from agentlane.event_stream import REST_CARRY_BYTES, EventsInput, ends_a_run
from agentlane.events import EVENTS_TOPIC, AgentEvent, EventKind
from agentlane.ids import events_workflow_id
from clients.api import AgentlaneClient
from workflows.session_events import SessionEventsWorkflow

PUBLISHES = 600
BATCH = 5
# Bytes of items carried into each next segment (the default): about 180 of these events, so a
# subscriber that lags by less than that across a hand-over misses nothing.
CARRY = 48 * 1024


def delta(i: int, session_key: str, text: str) -> AgentEvent:
    return AgentEvent(
        kind=EventKind.TEXT_DELTA, event_id=f"e{i}", session_key=session_key, run_id="r", text=text
    )


def run_end(key: str) -> AgentEvent:
    return AgentEvent(kind=EventKind.AGENT_END, event_id="end", session_key=key, run_id="r")


async def handed_over(first: WorkflowHandle[Any, Any]) -> None:
    """Until the segment `first` has continued as new (at most 10 s)."""
    deadline = time.monotonic() + 10
    while (await first.describe()).status == WorkflowExecutionStatus.RUNNING:
        assert time.monotonic() < deadline, "no hand-over after the run's end"
        await asyncio.sleep(0.05)
    assert (await first.describe()).status == WorkflowExecutionStatus.CONTINUED_AS_NEW


@pytest.mark.parametrize(
    ("after_events", "after_bytes"),
    [(80, None), (None, 96 * 1024)],
    ids=["by-events", "by-bytes"],
)
async def test_stream_rolls_over_early_with_contiguous_offsets(
    client: AgentlaneClient, tmp_path: Path, after_events: int | None, after_bytes: int | None
) -> None:
    temporal = client.client
    key = f"rollover-{uuid.uuid4().hex[:8]}"
    wid = events_workflow_id(key)
    await temporal.start_workflow(
        SessionEventsWorkflow.run,
        EventsInput(
            session_key=key,
            continue_as_new_after_events=after_events,
            continue_as_new_after_bytes=after_bytes,
            carry_bytes=CARRY,
        ),
        id=wid,
        task_queue=client.settings.workflow_task_queue,
    )
    seen: list[int] = []

    async def follow() -> None:
        # The client's watch: a poll that meets a hand-over is answered by the next segment.
        async for item in client.watch(key, 0, poll_cooldown_ms=20):
            assert item.event.event_id == f"e{item.offset}"
            seen.append(item.offset)
            if len(seen) == PUBLISHES:
                return

    follower = asyncio.create_task(follow())
    publisher = WorkflowStreamClient.create(temporal, wid, batch_interval=timedelta(hours=1))
    async with publisher:
        topic = publisher.topic(EVENTS_TOPIC, type=AgentEvent)
        for i in range(PUBLISHES):
            # ~100 bytes of text each: the byte bound is reached well before the event bound.
            topic.publish(delta(i, wid, f"{i:04d} " + "x" * 100))
            if i % BATCH == BATCH - 1:
                await publisher.flush()
                # A busy session's pace: a batch every 50 ms (the publishers' interval is 100).
                await asyncio.sleep(0.05)
    try:
        await asyncio.wait_for(follower, 60)
    except TimeoutError:
        missing = sorted(set(range(PUBLISHES)) - set(seen))
        raise AssertionError(f"subscriber missed {len(missing)}: {missing[:90]}") from None
    assert seen == list(range(PUBLISHES)), "offsets must stay contiguous across segments"

    deadline = time.monotonic() + 10  # visibility lists a new segment a moment later
    while True:
        segments = [w async for w in temporal.list_workflows(f"WorkflowId = '{wid}'")]
        if len(segments) >= 4 or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)
    await temporal.get_workflow_handle(wid).signal(SessionEventsWorkflow.close)
    assert len(segments) >= 4, f"expected several hand-overs, got {len(segments)} segments"
    replayer = Replayer(
        workflows=[SessionEventsWorkflow], data_converter=make_data_converter(tmp_path)
    )
    limit_events = after_events or 1_000
    limit_bytes = after_bytes or 256 * 1024
    for segment in segments:
        if segment.status != WorkflowExecutionStatus.CONTINUED_AS_NEW:
            continue
        history = await temporal.get_workflow_handle(wid, run_id=segment.run_id).fetch_history()
        size = sum(e.ByteSize() for e in history.events)
        # The hand-over comes at the first task past the bound (the size Temporal reports is
        # the one at that task's start), and a worker starved of CPU takes several batches'
        # signals in that task: some slack, still far below 1 MB.
        assert len(history.events) <= limit_events + 20, len(history.events)
        assert size <= limit_bytes + CARRY + 64 * 1024, size
        first = history.events[0].workflow_execution_started_event_attributes
        assert sum(p.ByteSize() for p in first.input.payloads) <= CARRY + 2048
        # The first replay also builds the workflow sandbox (imports): not the segment's cost.
        await replayer.replay_workflow(history, raise_on_replay_failure=False)
        began = time.monotonic()
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        assert result.replay_failure is None
        assert time.monotonic() - began < 1.0
    # Nothing of the stream reached the data dir: no payload was offloaded.
    payloads = client.settings.data_dir / "payloads"
    assert not any(wid in p.name for p in payloads.rglob("*")) if payloads.exists() else True


async def test_stream_hands_over_at_a_run_end_past_half_its_bound(client: AgentlaneClient) -> None:
    """Past half its bound, the stream continues as new right after a run's `agent_end`, when
    no publish is likely to race the hand-over, carrying only the rest budget; before it, it
    goes on."""
    temporal = client.client
    key = f"at-rest-{uuid.uuid4().hex[:8]}"
    wid = events_workflow_id(key)
    bound = 96 * 1024
    started = await temporal.start_workflow(
        SessionEventsWorkflow.run,
        EventsInput(session_key=key, continue_as_new_after_bytes=bound),
        id=wid,
        task_queue=client.settings.workflow_task_queue,
    )
    first = temporal.get_workflow_handle(wid, run_id=started.result_run_id)

    async def history_bytes() -> int:
        # Read once the workflow has taken every signal: signals that arrive while a workflow
        # task runs wait in the server's buffer, outside the history size, and a worker slowed by
        # other tests' load would let many of them land at once past the size read here.
        while True:
            raw = (await first.describe()).raw_description
            if not raw.HasField("pending_workflow_task"):
                return raw.workflow_execution_info.history_size_bytes
            await asyncio.sleep(0.05)

    publisher = WorkflowStreamClient.create(temporal, wid, batch_interval=timedelta(hours=1))
    async with publisher:
        topic = publisher.topic(EVENTS_TOPIC, type=AgentEvent)
        i = 0
        while await history_bytes() < bound * 0.6:
            for _ in range(BATCH):
                topic.publish(delta(i, key, "x" * 400))
                i += 1
            await publisher.flush()
        assert await history_bytes() < bound * 0.8
        assert (await first.describe()).status == WorkflowExecutionStatus.RUNNING
        topic.publish(run_end(key))
        await publisher.flush()
    await handed_over(first)
    # At rest it carries only the newest items, within the rest budget, the run's end among them.
    history = await temporal.get_workflow_handle(wid).fetch_history()
    carried = history.events[0].workflow_execution_started_event_attributes.input.payloads
    assert sum(p.ByteSize() for p in carried) <= REST_CARRY_BYTES + 2048
    [carried_input] = await temporal.data_converter.decode(list(carried), [EventsInput])
    state = carried_input.stream_state
    assert state is not None and 10 < len(state.log) < 60
    assert state.base_offset + len(state.log) == i + 1
    assert ends_a_run(Payload.FromString(base64.b64decode(state.log[-1].data)))
    await temporal.get_workflow_handle(wid).signal(SessionEventsWorkflow.close)


async def test_a_segment_in_its_first_second_hands_over_once_it_has_lived_one(
    client: AgentlaneClient,
) -> None:
    """A run's end past half the bound within a second of the segment's start: handing over
    then would get a next segment the server holds back until that second is over (a watcher's
    next poll, a run's `agent_end` with it, a second late). The segment hands over once it has
    lived that second, by a timer (no message may come to ask again), and the next segment
    starts at once."""
    temporal = client.client
    key = f"young-{uuid.uuid4().hex[:8]}"
    wid = events_workflow_id(key)
    started = await temporal.start_workflow(
        SessionEventsWorkflow.run,
        EventsInput(session_key=key, continue_as_new_after_bytes=64 * 1024),
        id=wid,
        task_queue=client.settings.workflow_task_queue,
    )
    first = temporal.get_workflow_handle(wid, run_id=started.result_run_id)
    publisher = WorkflowStreamClient.create(temporal, wid, batch_interval=timedelta(hours=1))
    # Answered by the segment once its first task ran: what follows is measured from there.
    assert await publisher.get_offset() == 0
    async with publisher:
        topic = publisher.topic(EVENTS_TOPIC, type=AgentEvent)
        for i in range(80):  # about 44 KB: past half the bound, short of it
            topic.publish(delta(i, key, "x" * 400))
        topic.publish(run_end(key))
        await publisher.flush()
    await handed_over(first)
    old = await first.fetch_history()
    new = await temporal.get_workflow_handle(wid).fetch_history()
    lived = new.events[0].event_time.ToDatetime() - old.events[0].event_time.ToDatetime()
    assert lived >= timedelta(seconds=1), lived
    next_start = new.events[0].workflow_execution_started_event_attributes
    assert next_start.first_workflow_task_backoff.ToMilliseconds() == 0
    assert any(e.HasField("timer_fired_event_attributes") for e in old.events)
    await temporal.get_workflow_handle(wid).signal(SessionEventsWorkflow.close)
