"""Finds a run's events that never reached the session's stream, so watchers are told.

Activities hand their tool and message events to a per-process buffer and, to keep steps fast,
return without waiting for it to be sent (README "Event order"). A worker killed with kill -9
inside that window loses those events from the stream (never from the transcript, the record).
At the run's end (`finish_run`) the events the transcript says the run must have produced
(each assistant entry's `message_start` / `message_end`, each executed tool call's
`tool_execution_start` / `_end`) are compared with the run's events in the stream; what is
missing is announced in one `stream_gap` event (the missing ids and the transcript entries to
re-read), published before `agent_end`. A watcher never misses an event silently: the stream is
complete, or the gap is announced.

Cost, once per run, independent of the session's age: the run's own transcript entries (an index
kept by the store) and the run's own events, polled from the stream offset recorded when the run
began (`record_run_start`, before its `agent_start` is published). Each answer holds only those
events, so it stays far below the payload offload threshold and nothing is written to disk.
Without a recorded offset (a run started by an older worker) the stream is read back from its
end in small windows until the run's `agent_start`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.contrib.workflow_streams import PollInput, PollResult
from temporalio.converter import PayloadConverter

from activities.event_publishing import OFFSET_QUERY, POLL_QUERY, decode_events
from activities.transcript_store import TranscriptStore
from agentlane.events import EVENTS_TOPIC, AgentEvent, EventKind, lifecycle_event_id
from agentlane.ids import events_workflow_id
from agentlane.transcript import Role, TranscriptEntry

log = logging.getLogger(__name__)

# Without a recorded start, the stream is read back from its end in windows of this many events
# until the run's `agent_start` turns up, and never further back than `MAX_SCAN` events.
TAIL_WINDOW = 200
MAX_SCAN = 5_000
PARTIAL_SUFFIX = "/partial"


def expected_event_ids(entries: Sequence[TranscriptEntry], run_id: str) -> dict[str, str]:
    """Event id -> transcript entry id, for the events this run's entries imply."""
    expected: dict[str, str] = {}
    for entry in entries:
        if entry.run_id != run_id:
            continue
        if entry.role == Role.ASSISTANT and not entry.id.endswith(PARTIAL_SUFFIX):
            for kind in (EventKind.MESSAGE_START, EventKind.MESSAGE_END):
                expected[f"{entry.id}/{kind.value}"] = entry.id
        elif entry.role == Role.TOOL and entry.tool_call_id and "duration_ms" in entry.meta:
            # Only a result the tool activity wrote (with its duration) was announced; calls
            # answered for the run's clean-up or rejected up front never ran.
            for kind in (EventKind.TOOL_EXECUTION_START, EventKind.TOOL_EXECUTION_END):
                expected[f"{entry.tool_call_id}/{kind.value}"] = entry.id
    return expected


def gap_ids(event: AgentEvent) -> set[str]:
    """The ids `event` stands for in `expected_event_ids`. A model call made again (by
    Temporal after a crash, or by the run) starts its message under an id of its own,
    `<entry>/message_start/<activity>.a<attempt>` (activities/model_call.py): it is that
    message's start all the same, not a lost one to publish again after the run's later events."""
    start = f"/{EventKind.MESSAGE_START.value}/"
    if event.kind != EventKind.MESSAGE_START or start not in event.event_id:
        return {event.event_id}
    base, _, _ = event.event_id.partition(start)
    return {event.event_id, f"{base}/{EventKind.MESSAGE_START.value}"}


def gap_event(session_key: str, run_id: str, missing: dict[str, str]) -> AgentEvent | None:
    if not missing:
        return None
    entries = sorted(set(missing.values()))
    return AgentEvent(
        kind=EventKind.STREAM_GAP,
        event_id=lifecycle_event_id(run_id, EventKind.STREAM_GAP),
        session_key=session_key,
        run_id=run_id,
        text=(
            f"{len(missing)} events of this run never reached the stream (their worker stopped "
            f"before sending them); the transcript has everything: re-read entries "
            f"{', '.join(entries[:10])}{' …' if len(entries) > 10 else ''}"
        ),
        data={"missing": sorted(missing), "entries": entries},
    )


async def record_run_start(client: Client, store: TranscriptStore, key: str, run_id: str) -> None:
    """Remember where the run's events begin in the stream (called before its `agent_start` is
    published), so its end reads only its own events. Best effort: without it the end reads
    back from the tail."""
    if await store.stream_start(key, run_id) is not None:
        return
    try:
        handle = client.get_workflow_handle(events_workflow_id(key))
        offset: int = await handle.query(OFFSET_QUERY, result_type=int)
    except Exception as err:
        log.warning("could not read the stream offset at run %s's start: %s", run_id, err)
        return
    await store.record_stream_start(key, run_id, offset)


async def _read_ids(
    handle: WorkflowHandle[Any, Any], converter: PayloadConverter, run_id: str, begin: int, end: int
) -> set[str]:
    """Ids of the run's events in [begin, end) (several polls if the answer is cut short)."""
    ids: set[str] = set()
    offset = begin
    while offset < end:
        result = await handle.query(
            POLL_QUERY,
            PollInput(topics=[EVENTS_TOPIC], from_offset=offset),
            result_type=PollResult,
        )
        for item, event in zip(result.items, decode_events(result, converter), strict=True):
            if item.offset < end and event.run_id == run_id:
                ids |= gap_ids(event)
        if not result.items or not result.more_ready:
            break
        offset = result.next_offset
    return ids


async def run_event_ids(
    client: Client, session_key: str, run_id: str, start: int | None = None
) -> set[str]:
    """Ids of the run's events in the stream: from `start` (the offset recorded when the run
    began) to the end, or else read back from the end in windows until its `agent_start`."""
    handle = client.get_workflow_handle(events_workflow_id(session_key))
    converter = client.data_converter.payload_converter
    if start is not None:
        return await _read_ids(handle, converter, run_id, start, 1 << 62)
    end: int = await handle.query(OFFSET_QUERY, result_type=int)
    start_id = lifecycle_event_id(run_id, EventKind.AGENT_START)
    ids: set[str] = set()
    last = end
    while end > 0:
        begin = max(0, end - TAIL_WINDOW)
        ids |= await _read_ids(handle, converter, run_id, begin, end)
        if start_id in ids or begin == 0 or last - begin >= MAX_SCAN:
            break
        end = begin
    return ids
