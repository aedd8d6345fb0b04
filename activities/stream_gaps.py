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

Cost: one offset query and a read of the stream's tail back to the run's `agent_start` (the run's
own events), once per run.
"""

from __future__ import annotations

from collections.abc import Sequence

from temporalio.client import Client
from temporalio.contrib.workflow_streams import PollInput, PollResult

from activities.event_publishing import OFFSET_QUERY, POLL_QUERY, decode_events
from agentlane.events import EVENTS_TOPIC, AgentEvent, EventKind, lifecycle_event_id
from agentlane.ids import events_workflow_id
from agentlane.transcript import Role, TranscriptEntry

# Read back this many events at first; doubled until the run's start is found.
TAIL_WINDOW = 2_000
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


async def run_event_ids(client: Client, session_key: str, run_id: str) -> set[str]:
    """Ids of the run's events in the stream, read from the tail back to its `agent_start`."""
    handle = client.get_workflow_handle(events_workflow_id(session_key))
    converter = client.data_converter.payload_converter
    end: int = await handle.query(OFFSET_QUERY, result_type=int)
    start_id = lifecycle_event_id(run_id, EventKind.AGENT_START)
    window = TAIL_WINDOW
    while True:
        begin = max(0, end - window)
        ids: set[str] = set()
        offset = begin
        while offset < end:
            result = await handle.query(
                POLL_QUERY,
                PollInput(topics=[EVENTS_TOPIC], from_offset=offset),
                result_type=PollResult,
            )
            ids.update(e.event_id for e in decode_events(result, converter) if e.run_id == run_id)
            if not result.items or not result.more_ready:
                break
            offset = result.next_offset
        if start_id in ids or begin == 0:
            return ids
        window *= 2
