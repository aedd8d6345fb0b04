"""Closes a run: answers tool calls left open, publishes the final lifecycle events and records
the run's outcome next to the transcript (idempotent, so a retry changes nothing)."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from temporalio import activity

from activities.event_publishing import LIFECYCLE, published_so_far
from activities.model_output.normalization import normalize_text
from activities.stream_gaps import (
    PARTIAL_SUFFIX,
    expected_event_ids,
    gap_event,
    run_event_ids,
)
from activities.stream_publishers import SessionPublishers
from activities.stream_republish import Republisher
from activities.transcript_store import TranscriptStore, user_entries
from agentlane.announcements import PUBLISH_ANNOUNCEMENTS, PublishInput
from agentlane.events import AgentEvent, EventKind
from agentlane.run_records import (
    FINISH_RUN,
    RUN_SPENT,
    FinishRunInput,
    FinishRunResult,
    RunSpent,
    RunSpentInput,
)
from agentlane.transcript import Role, TranscriptEntry
from agentlane.usage import RunUsage

log = logging.getLogger(__name__)

# A retried `finish_run` comes before the session's next run, so a record it already wrote is
# among the last lines of runs.jsonl: only this much of its end is read (not the whole file).
RECORD_TAIL_BYTES = 256 * 1024


def recorded_lately(runs: Path, run_id: str) -> bool:
    """Whether the run's record is already in the tail of `runs`."""
    try:
        with runs.open("rb") as fh:
            fh.seek(max(0, fh.seek(0, os.SEEK_END) - RECORD_TAIL_BYTES))
            tail = fh.read()
    except FileNotFoundError:
        return False
    return f'"run_id":"{run_id}"'.encode() in tail


class RunFinishActivity:
    def __init__(self, store: TranscriptStore, publishers: SessionPublishers) -> None:
        self.store = store
        self.publishers = publishers

    @activity.defn(name=RUN_SPENT)
    async def run_spent(self, inp: RunSpentInput) -> RunSpent:
        """The model calls a run made, from its assistant entries (a failed attempt's partial
        included: it was billed too), for a run that ended without saying."""
        usage = RunUsage()
        turns = 0
        for entry in await self.store.read_run(inp.session_key, inp.run_id):
            if entry.role != Role.ASSISTANT or entry.run_id != inp.run_id:
                continue
            if not entry.id.endswith(PARTIAL_SUFFIX):
                turns += 1
            if entry.usage is not None:
                usage = usage.record(entry.usage)
        return RunSpent(turns=turns, usage=usage)

    async def _close_and_record(
        self, inp: FinishRunInput
    ) -> tuple[str, bool, list[TranscriptEntry]]:
        """The user-facing reply, whether this execution recorded the run first (none before
        it got as far as publishing the run's end, which comes after the record), and the
        results it wrote for calls the run left unanswered."""
        result = inp.result
        if inp.append_user:
            await self.store.append(
                result.session_key, user_entries(inp.append_user, result.run_id, time.time())
            )
        answered = await self.store.answer_unanswered(
            result.session_key, result.run_id, inp.unanswered_reason
        )
        reply = ""
        if result.last_entry_id:
            last = await self.store.get(result.session_key, result.last_entry_id)
            # The user-facing reply: a silent reply or a bare heartbeat delivers nothing.
            reply = normalize_text(last.text) or "" if last is not None else ""
        # Once per run id, whichever attempt or host gets here first.
        first = await self.store.store.record_run(
            result.session_key, result.run_id, result.model_dump_json()
        )
        return reply, first, answered

    async def _ends_of_started(
        self, inp: FinishRunInput, answered: list[TranscriptEntry]
    ) -> list[AgentEvent]:
        """A `tool_execution_end` for each call answered here whose start is in the stream (its
        worker died with it, and the run ended): a chat UI closes the tool's card."""
        result = inp.result
        try:
            start = await self.store.stream_start(result.session_key, result.run_id)
            seen = await run_event_ids(activity.client(), result.session_key, result.run_id, start)
        except Exception as err:
            log.warning("could not read run %s's tool starts: %s", result.run_id, err)
            return []
        return [
            AgentEvent(
                kind=EventKind.TOOL_EXECUTION_END,
                event_id=f"{entry.tool_call_id}/{EventKind.TOOL_EXECUTION_END.value}",
                session_key=result.session_key,
                run_id=result.run_id,
                ts=time.time(),
                tool_call_id=entry.tool_call_id,
                tool_name=entry.tool_name,
                success=False,
                summary="interrupted",
                text=entry.text[:2000],
            )
            for entry in answered
            if entry.tool_call_id
            and f"{entry.tool_call_id}/{EventKind.TOOL_EXECUTION_START.value}" in seen
        ]

    @activity.defn(name=FINISH_RUN)
    async def finish_run(self, inp: FinishRunInput) -> FinishRunResult:
        reply, first, answered = await self._close_and_record(inp)
        # The one activity that waits for its events on success: `agent_end` is where watchers
        # stop, and waiting also makes durable whatever this process published for the session
        # before it (one buffer per session).
        lease = self.publishers.lease(
            activity.client(), inp.result.session_key, wait_for_flush=True
        )
        async with lease as publisher:
            # What this process still holds for the session (the run's last step, most often,
            # waiting for its batch tick) goes out before the stream is read back: otherwise
            # it looks lost, and the check below waits for it to settle (~1.7 s before every
            # `agent_end` of a run whose last step ran here).
            await publisher.session.flush_logged()
            events = [a.to_event(inp.result.session_key, inp.result.run_id) for a in inp.announce]
            # Announcements may be in the stream already when a model call that failed handed
            # them back (it may have published them before it failed), or when an earlier
            # execution of this activity got as far as recording the run (a crash, a retry):
            # nobody should see "started" twice. Otherwise none of them was ever handed out,
            # and the run's events are not read back.
            recheck = inp.recheck_announce is not False or not first
            if recheck and any(e.kind in LIFECYCLE for e in events):
                try:
                    start = await self.store.stream_start(inp.result.session_key, inp.result.run_id)
                    _, announced = await published_so_far(
                        activity.client(),
                        inp.result.session_key,
                        start or 0,
                        None,
                        inp.result.run_id,
                    )
                except Exception:
                    announced = set()
                events = [e for e in events if e.event_id not in announced]
            if answered:
                for end in await self._ends_of_started(inp, answered):
                    publisher.publish(end)
            recovered = await self._gap(inp)
            again = {e.event_id for e in recovered}
            for event in recovered:
                publisher.publish(event)
            for event in events:
                if event.event_id not in again:
                    publisher.publish(event)
        self.publishers.delivered.forget(inp.result.run_id)
        return FinishRunResult(reply=reply)

    async def _gap(self, inp: FinishRunInput) -> list[AgentEvent]:
        """Events of this run that were lost, published again from the transcript (activities/
        stream_republish.py), then the `stream_gap` announcement for what could not be
        (activities/stream_gaps.py); best effort: a failed check never fails the run's end."""
        result = inp.result
        try:
            entries = await self.store.read_run(result.session_key, result.run_id)
            expected = expected_event_ids(entries, result.run_id)
            if not expected:
                return []
            if self.publishers.delivered.all_delivered(result.run_id, set(expected)):
                return []  # every one went out from here, in a signal the server took
            start = await self.store.stream_start(result.session_key, result.run_id)
            seen = await run_event_ids(activity.client(), result.session_key, result.run_id, start)
        except Exception as err:
            log.warning("could not check run %s's events in the stream: %s", result.run_id, err)
            return []
        missing = {eid: entry for eid, entry in expected.items() if eid not in seen}
        republished: list[AgentEvent] = []
        if missing:
            try:
                found = await Republisher(self.store, self.publishers).lost(
                    activity.client(), result.session_key, result.run_id, wait_to_settle=True
                )
                republished, missing = found.events, found.missing
            except Exception as err:
                log.warning("could not rebuild run %s's lost events: %s", result.run_id, err)
        if republished:
            log.warning(
                "run %s: %d events never reached the stream; published again from the transcript",
                result.run_id,
                len(republished),
            )
        if missing:
            log.warning("run %s: %d events never reached the stream", result.run_id, len(missing))
        gap = gap_event(result.session_key, result.run_id, missing)
        return [*republished, *([gap] if gap is not None else [])]


class AnnouncementPublisher:
    """Publishes announcements now and waits for them to reach the stream."""

    def __init__(self, publishers: SessionPublishers) -> None:
        self.publishers = publishers

    @activity.defn(name=PUBLISH_ANNOUNCEMENTS)
    async def publish_announcements(self, inp: PublishInput) -> None:
        lease = self.publishers.lease(activity.client(), inp.session_key, wait_for_flush=True)
        async with lease as publisher:
            for announcement in inp.announce:
                publisher.publish(announcement.to_event(inp.session_key, inp.run_id))
