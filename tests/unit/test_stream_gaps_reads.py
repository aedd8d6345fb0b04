"""What the end-of-run check reads from the stream: from the run's recorded start only, or, with
no start recorded, back from the end in small windows until the run's `agent_start`, and never
the whole stream."""

from __future__ import annotations

import base64
from typing import Any

from temporalio.contrib.workflow_streams import PollInput, PollResult
from temporalio.contrib.workflow_streams._types import _WorkflowStreamWireItem
from temporalio.converter import DataConverter

from activities import stream_gaps
from activities.event_publishing import OFFSET_QUERY, POLL_QUERY
from agentlane.data_converter import CompactPydanticPayloadConverter
from agentlane.events import AgentEvent, EventKind, lifecycle_event_id

DATA_CONVERTER = DataConverter(payload_converter_class=CompactPydanticPayloadConverter)
CONVERTER = DATA_CONVERTER.payload_converter


def event(offset: int, run_id: str, kind: EventKind = EventKind.TEXT_DELTA) -> AgentEvent:
    eid = lifecycle_event_id(run_id, kind) if kind == EventKind.AGENT_START else f"e{offset}"
    return AgentEvent(kind=kind, event_id=eid, session_key="s", run_id=run_id)


class FakeStream:
    """A stream of `events`; a poll answers at most `page` items from its offset."""

    def __init__(self, events: list[AgentEvent], page: int = 100) -> None:
        self.events = events
        self.page = page
        self.polled: list[int] = []

    async def query(self, name: str, arg: Any = None, result_type: Any = None) -> Any:
        if name == OFFSET_QUERY:
            return len(self.events)
        assert name == POLL_QUERY and isinstance(arg, PollInput)
        self.polled.append(arg.from_offset)
        chunk = self.events[arg.from_offset : arg.from_offset + self.page]
        items = [
            _WorkflowStreamWireItem(
                topic="events",
                data=base64.b64encode(CONVERTER.to_payload(e).SerializeToString()).decode(),
                offset=arg.from_offset + i,
            )
            for i, e in enumerate(chunk)
        ]
        end = arg.from_offset + len(chunk)
        return PollResult(items=items, next_offset=end, more_ready=end < len(self.events))


class FakeClient:
    def __init__(self, stream: FakeStream) -> None:
        self.stream = stream
        self.data_converter = DATA_CONVERTER

    def get_workflow_handle(self, workflow_id: str) -> FakeStream:
        return self.stream


def session(old_runs: int, run_events: int) -> list[AgentEvent]:
    events = [event(i, f"old{i // 10}") for i in range(old_runs * 10)]
    start = len(events)
    events.append(event(start, "r", EventKind.AGENT_START))
    events += [event(start + 1 + i, "r") for i in range(run_events)]
    return events


async def test_from_the_recorded_start_only_the_runs_events_are_read() -> None:
    stream = FakeStream(session(old_runs=2000, run_events=12))
    start = len(stream.events) - 13
    ids = await stream_gaps.run_event_ids(FakeClient(stream), "s", "r", start)  # type: ignore[arg-type]
    assert len(ids) == 13 and stream.polled == [start]


async def test_without_a_start_it_reads_back_to_the_runs_start_and_no_further() -> None:
    stream = FakeStream(session(old_runs=2000, run_events=250))
    ids = await stream_gaps.run_event_ids(FakeClient(stream), "s", "r")  # type: ignore[arg-type]
    assert lifecycle_event_id("r", EventKind.AGENT_START) in ids and len(ids) == 251
    assert min(stream.polled) >= len(stream.events) - 2 * stream_gaps.TAIL_WINDOW


async def test_a_lost_start_stops_the_read_back_at_its_bound() -> None:
    events = [e for e in session(old_runs=2000, run_events=20) if e.kind != EventKind.AGENT_START]
    stream = FakeStream(events)
    ids = await stream_gaps.run_event_ids(FakeClient(stream), "s", "r")  # type: ignore[arg-type]
    assert len(ids) == 20
    assert min(stream.polled) >= len(events) - stream_gaps.MAX_SCAN
