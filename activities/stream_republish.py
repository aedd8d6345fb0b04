"""Publishes again, from the transcript, the events of a run that a killed worker never sent.

Steps hand their events to a per-process buffer and return without waiting for it (README
"Event order"); a worker killed with kill -9 inside that window loses them from the stream, never
from the transcript. What the transcript holds can be told again:

- an assistant entry: `message_start`, the text consumers have not been shown (one `text_delta`
  from where the stream's text of that message stops, or a `message_reset` and all of it when
  they differ), `message_end` with its stop reason and usage;
- an executed tool call (a result its activity wrote, with its duration): `tool_execution_start`
  with the call's input preview and `tool_execution_end` with its outcome;
- the run's `agent_start` (with the model, from its first message) and the turn boundaries
  (`turn_start` of each turn with a message, `turn_end` of each turn followed by another).

Republished events keep the ids the lost ones had (their text delta's id names the republish),
and carry `data["republished"] = True`. What cannot be rebuilt (streamed reasoning, block
replies, an exec's output preview) stays lost; the run's end announces what it expected and did
not find in a `stream_gap` (activities/stream_gaps.py).

When: a step that is a retry (attempt > 1: its previous attempt's worker may have died), or the
first step of a run this worker process runs (the run's previous step may have run on a worker
that died right after it), tells the run's lost events again before its own; the run's end
(`finish_run`) does the same for whatever is still missing. Only entries at least
`settle_seconds` old count as lost: a live worker's last batch may still be on its way (one
batch interval, plus a signal round trip), and republishing it too would show it twice. And
when the stream no longer holds the run's start (the events workflow truncated it as it
continued as new), only what was published after its oldest kept event counts.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.contrib.workflow_streams import PollInput, PollResult
from temporalio.converter import PayloadConverter

from activities.event_publishing import OFFSET_QUERY, POLL_QUERY, decode_events
from activities.liveness import heartbeat_forever, heartbeats_reach_temporal
from activities.model_output.normalization import normalize_text
from activities.stream_gaps import expected_event_ids, gap_ids
from activities.stream_publishers import SessionPublishers
from activities.transcript_store import TranscriptStore
from agentlane.events import EVENTS_TOPIC, AgentEvent, EventKind, lifecycle_event_id
from agentlane.ids import events_workflow_id
from agentlane.transcript import Role, ToolCall, TranscriptEntry

# How old an entry must be before its missing events count as lost, on top of the batch
# interval: a live worker sends its batch one interval after it was filled, plus a round trip.
SETTLE_MARGIN_SECONDS = 1.5
# For a step that is not a retry (its run's first step on this worker): the run's previous step
# most likely ran on a live worker that is still sending, so only clearly old entries count.
FIRST_HERE_SETTLE_MARGIN_SECONDS = 5.0
# While young missing events settle, the stream is read again this often at least (half a batch
# interval otherwise: a batch another worker holds lands within one).
MIN_POLL_SECONDS = 0.05
# Read back this many events at first; doubled until the run's start is found.
TAIL_WINDOW = 2_000
_TURN = re.compile(r":t(\d+)$")

log = logging.getLogger(__name__)
# How many run ids a worker process remembers having run a step of (oldest forgotten first).
RUNS_REMEMBERED = 4096


class RunsSeen:
    """The runs this worker process has run a step of: a step of a run new here may follow a
    step that ran on a worker that died."""

    def __init__(self, limit: int = RUNS_REMEMBERED) -> None:
        self._runs: OrderedDict[str, None] = OrderedDict()
        self._limit = limit

    def first_here(self, run_id: str) -> bool:
        """Whether this is the first step of `run_id` here (and remember it)."""
        if run_id in self._runs:
            self._runs.move_to_end(run_id)
            return False
        self._runs[run_id] = None
        while len(self._runs) > self._limit:
            self._runs.popitem(last=False)
        return True


RUNS_SEEN = RunsSeen()


def shown_text(events: Sequence[AgentEvent], message_id: str) -> str:
    """What consumers have been shown of one message (its deltas, after its last reset)."""
    text = ""
    for event in events:
        if event.message_id != message_id:
            continue
        if event.kind == EventKind.MESSAGE_RESET:
            text = ""
        elif event.kind == EventKind.TEXT_DELTA and event.text and event.index is not None:
            text = text[: event.index].ljust(event.index) + event.text
    return text


def lifecycle_missing(
    entries: Sequence[TranscriptEntry], run_id: str, seen: set[str]
) -> dict[str, str]:
    """The run's lifecycle events the transcript implies and the stream lacks (event id ->
    transcript entry id): `agent_start` once the run has an entry, `turn_start` of each turn
    with a message, `turn_end` of each turn a later message follows (the last turn's end is
    the run end's to publish)."""
    own = [e for e in entries if e.run_id == run_id]
    if not own:
        return {}
    out: dict[str, str] = {}
    start = lifecycle_event_id(run_id, EventKind.AGENT_START)
    if start not in seen:
        out[start] = own[0].id
    turns = _turns(own)
    for turn, entry in turns.items():
        opened = lifecycle_event_id(run_id, EventKind.TURN_START, turn)
        if opened not in seen:
            out[opened] = entry.id
        closed = lifecycle_event_id(run_id, EventKind.TURN_END, turn - 1)
        if turn - 1 in turns and closed not in seen:
            out[closed] = entry.id
    return out


def _turns(own: Sequence[TranscriptEntry]) -> dict[int, TranscriptEntry]:
    turns: dict[int, TranscriptEntry] = {}
    for entry in own:
        turn = _turn_of(entry.id)
        if entry.role == Role.ASSISTANT and turn is not None and not entry.id.endswith("/partial"):
            turns[turn] = entry
    return turns


def rebuild(
    session_key: str,
    run_id: str,
    entries: Sequence[TranscriptEntry],
    stream: Sequence[AgentEvent],
    missing: Mapping[str, str],
) -> list[AgentEvent]:
    """The events to publish again, in transcript order, for the `missing` event ids (event id
    -> transcript entry id, as `expected_event_ids` names them). `stream`: the run's events the
    stream holds. Pure: no I/O."""
    # Imported here: the tool activities call into this module.
    from activities.tool_calls import preview_args, stream_text

    calls: dict[str, tuple[ToolCall | None, TranscriptEntry | None]] = {}
    out: list[AgentEvent] = []

    def event(
        kind: EventKind,
        event_id: str,
        entry: TranscriptEntry,
        data: dict[str, Any] | None = None,
        **fields: Any,
    ) -> None:
        out.append(
            AgentEvent(
                kind=kind,
                event_id=event_id,
                session_key=session_key,
                run_id=run_id,
                ts=entry.ts,
                data={**(data or {}), "republished": True},
                **fields,
            )
        )

    own = [e for e in entries if e.run_id == run_id]
    turns = _turns(own)
    started = lifecycle_event_id(run_id, EventKind.AGENT_START)
    if own and started in missing:
        first = next((e for e in turns.values() if e.model), None)
        event(
            EventKind.AGENT_START,
            started,
            own[0],
            data={"model": first.model} if first is not None else {},
        )
    for entry in own:
        if entry.role == Role.ASSISTANT:
            for made in entry.tool_calls:
                calls[made.id] = (made, entry)
            mid, turn = entry.id, _turn_of(entry.id)
            if turn is not None and turns.get(turn) is entry:
                closed = lifecycle_event_id(run_id, EventKind.TURN_END, turn - 1)
                if closed in missing and turn - 1 in turns:
                    event(
                        EventKind.TURN_END,
                        closed,
                        entry,
                        turn_index=turn - 1,
                        has_tool_calls=bool(turns[turn - 1].tool_calls),
                    )
                opened = lifecycle_event_id(run_id, EventKind.TURN_START, turn)
                if opened in missing:
                    event(EventKind.TURN_START, opened, entry, turn_index=turn)
            start_id = f"{mid}/{EventKind.MESSAGE_START.value}"
            end_id = f"{mid}/{EventKind.MESSAGE_END.value}"
            if start_id in missing:
                event(
                    EventKind.MESSAGE_START,
                    start_id,
                    entry,
                    turn_index=turn,
                    message_id=mid,
                    data={"model": entry.model} if entry.model else {},
                )
            if end_id not in missing:
                continue
            # The text goes before its end (one process sends a message's events in order), so
            # only a message whose end is lost can lack text.
            visible = normalize_text(entry.text) or ""
            shown = shown_text(stream, mid)
            if shown != visible:
                start = len(shown)
                if not visible.startswith(shown):
                    event(
                        EventKind.MESSAGE_RESET,
                        f"{mid}/{EventKind.MESSAGE_RESET.value}/republished",
                        entry,
                        turn_index=turn,
                        message_id=mid,
                    )
                    start = 0
                if visible[start:]:
                    event(
                        EventKind.TEXT_DELTA,
                        f"{mid}/republished/d/{start}",
                        entry,
                        turn_index=turn,
                        message_id=mid,
                        text=visible[start:],
                        index=start,
                    )
            event(
                EventKind.MESSAGE_END,
                end_id,
                entry,
                turn_index=turn,
                message_id=mid,
                stop_reason=entry.stop_reason,
                usage=entry.usage,
            )
        elif entry.role == Role.TOOL and entry.tool_call_id:
            cid = entry.tool_call_id
            start_id = f"{cid}/{EventKind.TOOL_EXECUTION_START.value}"
            end_id = f"{cid}/{EventKind.TOOL_EXECUTION_END.value}"
            if start_id not in missing and end_id not in missing:
                continue
            call, owner = calls.get(cid, (None, None))
            common: dict[str, Any] = {
                "turn_index": _turn_of(owner.id) if owner else None,
                "message_id": owner.id if owner else None,
                "tool_call_id": cid,
                "tool_name": entry.tool_name or (call.name if call else None),
            }
            if start_id in missing:
                preview = {"input": preview_args(call.arguments)} if call else {}
                event(EventKind.TOOL_EXECUTION_START, start_id, entry, data=preview, **common)
            if end_id in missing:
                duration = entry.meta.get("duration_ms")
                event(
                    EventKind.TOOL_EXECUTION_END,
                    end_id,
                    entry,
                    success=not entry.is_error,
                    summary=str(entry.meta.get("summary", "")),
                    text=stream_text(entry.text, 2000),
                    duration_ms=duration if isinstance(duration, int) else None,
                    **common,
                )
    return out


def _turn_of(entry_id: str) -> int | None:
    found = _TURN.search(entry_id)
    return int(found.group(1)) if found else None


def settled(
    missing: Mapping[str, str],
    entries: Sequence[TranscriptEntry],
    settle_seconds: float,
    now: float,
) -> dict[str, str]:
    """The missing events whose entries are old enough to count as lost."""
    ts = {e.id: e.ts for e in entries}
    return {
        eid: entry for eid, entry in missing.items() if ts.get(entry, now) <= now - settle_seconds
    }


@dataclass
class RunEvents:
    events: list[AgentEvent]
    # Set when the stream no longer holds the run's start (it was truncated when the events
    # workflow continued as new): the time of its oldest event kept. What was published
    # before then may be gone without having been lost.
    horizon: float | None = None
    # The stream's offset after the last item read: where a read of what came later starts.
    next_offset: int = 0


async def _read_range(
    handle: WorkflowHandle[Any, Any],
    converter: PayloadConverter,
    run_id: str,
    begin: int,
    end: int | None,
) -> tuple[list[AgentEvent], int, tuple[int, float] | None]:
    """The run's events among the stream's items from `begin` to (at least) `end` (None: to
    the stream's end now), the offset after the last item read, and the offset and time of the
    first item the stream answered (later than `begin` when the stream no longer keeps what
    came before)."""
    events: list[AgentEvent] = []
    offset = begin
    oldest: tuple[int, float] | None = None
    while end is None or offset < end:
        result = await handle.query(
            POLL_QUERY,
            PollInput(topics=[EVENTS_TOPIC], from_offset=offset),
            result_type=PollResult,
        )
        decoded = decode_events(result, converter)
        if oldest is None and decoded:
            oldest = (result.items[0].offset, decoded[0].ts)
        events.extend(e for e in decoded if e.run_id == run_id)
        offset = max(offset, result.next_offset)
        if not result.items or not result.more_ready:
            break
    return events, offset if end is None else max(offset, end), oldest


async def run_events(
    client: Client, session_key: str, run_id: str, start: int | None = None
) -> RunEvents:
    """The run's events in the stream (queries: no history cost): from `start`, the offset
    recorded when the run began, or else read from the tail back to its `agent_start` or the
    oldest event the stream keeps. From the start, a long session's older runs are not read
    (the tail window alone is up to 2 000 events, each decoded)."""
    handle = client.get_workflow_handle(events_workflow_id(session_key))
    converter = client.data_converter.payload_converter
    end: int = await handle.query(OFFSET_QUERY, result_type=int)
    if start is not None and start <= end:
        events, read_to, oldest = await _read_range(handle, converter, run_id, start, end)
        # A query starts at the oldest item kept: the part before it is truncated.
        truncated = oldest is not None and oldest[0] > start
        return RunEvents(
            events, horizon=oldest[1] if truncated and oldest else None, next_offset=read_to
        )
    start_id = lifecycle_event_id(run_id, EventKind.AGENT_START)
    window = TAIL_WINDOW
    while True:
        begin = max(0, end - window)
        events, read_to, oldest = await _read_range(handle, converter, run_id, begin, end)
        if any(e.event_id == start_id for e in events):
            return RunEvents(events, next_offset=read_to)
        if oldest is not None and oldest[0] > begin:
            return RunEvents(events, horizon=oldest[1], next_offset=read_to)
        if begin == 0:
            return RunEvents(events, next_offset=read_to)
        window *= 2


async def run_events_after(
    client: Client, session_key: str, run_id: str, offset: int
) -> tuple[list[AgentEvent], int]:
    """The run's events the stream took at `offset` or later, and the offset after them."""
    handle = client.get_workflow_handle(events_workflow_id(session_key))
    events, after, _ = await _read_range(
        handle, client.data_converter.payload_converter, run_id, offset, None
    )
    return events, after


def published_after(
    missing: Mapping[str, str], entries: Sequence[TranscriptEntry], horizon: float
) -> dict[str, str]:
    """The missing events that were published after `horizon` (so the stream would still hold
    them had they been sent). A step's first events go out when it starts: a model call starts
    after the entry before its own, a tool call `duration_ms` before its result."""
    started: dict[str, float] = {}
    previous: float | None = None
    for e in entries:
        duration = e.meta.get("duration_ms")
        if e.role == Role.TOOL and isinstance(duration, int):
            started[e.id] = e.ts - duration / 1000
        else:
            started[e.id] = previous if previous is not None else e.ts
        previous = e.ts
    ends = {e.id: e.ts for e in entries}
    out: dict[str, str] = {}
    for eid, entry_id in missing.items():
        if eid.endswith(f"/{EventKind.AGENT_START.value}"):
            continue  # the run's start is exactly what the stream no longer holds
        at_end = eid.endswith(
            (f"/{EventKind.MESSAGE_END.value}", f"/{EventKind.TOOL_EXECUTION_END.value}")
        )
        when = (ends if at_end else started).get(entry_id, 0.0)
        if when > horizon:
            out[eid] = entry_id
    return out


@dataclass
class Recovery:
    events: list[AgentEvent]  # to publish again
    missing: dict[str, str]  # still missing after them: event id -> transcript entry id
    in_stream: set[str]  # ids of the run's events in the stream, with the republished ones


class Republisher:
    """Finds a run's lost events and publishes them again through the process's publishers."""

    def __init__(
        self,
        store: TranscriptStore,
        publishers: SessionPublishers,
        settle_margin: float = SETTLE_MARGIN_SECONDS,
    ) -> None:
        self.store = store
        self.publishers = publishers
        self.settle_seconds = publishers.batch_interval_seconds + settle_margin
        self.poll_seconds = max(MIN_POLL_SECONDS, publishers.batch_interval_seconds / 2)

    @classmethod
    def for_step(
        cls, store: TranscriptStore, publishers: SessionPublishers, attempt: int
    ) -> Republisher:
        margin = SETTLE_MARGIN_SECONDS if attempt > 1 else FIRST_HERE_SETTLE_MARGIN_SECONDS
        return cls(store, publishers, margin)

    async def lost(
        self, client: Client, session_key: str, run_id: str, *, wait_to_settle: bool = False
    ) -> Recovery:
        """The events to publish again, what is still missing after them, and what the stream
        holds of the run. `wait_to_settle` (the run's end, the last chance): entries too young to
        tell are waited for, reading the stream again as they settle, instead of left for later."""
        entries = await self.store.read_run(session_key, run_id)
        expected = expected_event_ids(entries, run_id)
        start = await self.store.stream_start(session_key, run_id)
        read = await run_events(client, session_key, run_id, start)
        stream = read.events
        offset = read.next_offset
        # The longest wait, as before: one settle time (entries stamped by a host whose clock
        # runs ahead look younger than they are).
        give_up = time.monotonic() + self.settle_seconds
        while True:
            seen = {eid for e in stream for eid in gap_ids(e)}
            missing = {eid: entry for eid, entry in expected.items() if eid not in seen}
            missing.update(lifecycle_missing(entries, run_id, seen))
            if read.horizon is not None:
                missing = published_after(missing, entries, read.horizon)
            now = time.time()
            lost = settled(missing, entries, self.settle_seconds, now)
            if not wait_to_settle or len(lost) == len(missing) or time.monotonic() >= give_up:
                break
            # Too young to tell: most often another worker's last batch, one batch interval
            # away. The stream is read again every poll interval (only what came since), so
            # the wait ends when that batch lands, not a whole settle time later.
            young = set(missing.values()) - set(lost.values())
            youngest = max((e.ts for e in entries if e.id in young), default=now)
            await asyncio.sleep(
                min(
                    self.poll_seconds,
                    max(0.0, youngest + self.settle_seconds - now),
                    max(0.0, give_up - time.monotonic()),
                )
            )
            later, offset = await run_events_after(client, session_key, run_id, offset)
            stream.extend(later)
        events = rebuild(session_key, run_id, entries, stream, lost)
        rebuilt = {e.event_id for e in events}
        still = {eid: entry for eid, entry in missing.items() if eid not in rebuilt}
        return Recovery(events, still, seen | rebuilt)

    @staticmethod
    async def _in_stream(client: Client, session_key: str, run_id: str) -> set[str]:
        """What the stream holds of the run, read from the stream alone: with the store out of
        reach (the check above reads the transcript), a retried step still does not announce
        twice what its first attempt did (the same event id twice in the stream)."""
        try:
            read = await run_events(client, session_key, run_id)
        except Exception as err:
            log.warning("could not read run %s's events in the stream: %s", run_id, err)
            return set()
        return {eid for e in read.events for eid in gap_ids(e)}

    async def republish(self, client: Client, session_key: str, run_id: str) -> set[str]:
        """Publish the run's lost events now, ahead of anything this process publishes for the
        session after this call. Answers the ids of the run's events the stream now holds (a
        retried step need not announce those again); best effort: a failed check never fails
        the step (and answers nothing)."""
        # The step's heartbeat timeout runs from its start: keep it alive meanwhile.
        beats = asyncio.create_task(heartbeat_forever()) if heartbeats_reach_temporal() else None
        try:
            return await self._republish(client, session_key, run_id)
        finally:
            if beats is not None:
                beats.cancel()

    async def _republish(self, client: Client, session_key: str, run_id: str) -> set[str]:
        try:
            found = await self.lost(client, session_key, run_id)
        except Exception as err:  # events are best effort; the transcript is the record
            log.warning("could not check run %s's events in the stream: %s", run_id, err)
            return await self._in_stream(client, session_key, run_id)
        if found.events:
            log.warning(
                "run %s: publishing again %d events a stopped worker never sent",
                run_id,
                len(found.events),
            )
            # Waited for: the step reads the stream back next (what a retried model call may
            # show, which announcements it still owes) and must find these there.
            lease = self.publishers.lease(client, session_key, wait_for_flush=True)
            async with lease as publisher:
                for event in found.events:
                    publisher.publish(event)
        return found.in_stream
