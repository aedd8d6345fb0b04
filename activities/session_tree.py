"""The activities behind reset and branches (issue 10): they write the markers and the copy.

Both are idempotent, because an activity can run twice: every entry they write has an id the
workflow derived (a second append of it is skipped), and a copy into a session that holds
anything but this very copy is refused.
"""

from __future__ import annotations

import time

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.branch_history import UnknownEntry, branch_path, unanswered_calls
from activities.session_records import SessionRecords
from activities.stream_publishers import SessionPublishers
from activities.transcript_store import TranscriptStore, tool_result_entry
from agentlane.branches import (
    COPY_BRANCH,
    RESET_SESSION,
    BranchCopied,
    BranchCopyInput,
    ResetInput,
    ResetWritten,
)
from agentlane.events import AgentEvent, EventKind
from agentlane.transcript import Role, TranscriptEntry, Unanswered, unanswered_text

# The error types a branch that cannot be made fails with (never retried).
UNKNOWN_PARENT = "UnknownParentSession"
UNKNOWN_BRANCH_POINT = "UnknownBranchPoint"
TARGET_EXISTS = "BranchTargetExists"


def reset_event(inp: ResetInput, written: ResetWritten) -> AgentEvent:
    """`session_reset` on the session's stream. It belongs to no run: `run_id` is empty."""
    return AgentEvent(
        kind=EventKind.SESSION_RESET,
        event_id=f"{written.entry_id}/{EventKind.SESSION_RESET.value}",
        session_key=inp.session_key,
        run_id="",
        ts=written.ts,
        text=f"session reset ({inp.reason})",
        data={
            "entry_id": written.entry_id,
            "after": written.parent_id,
            "aborted_run_id": inp.aborted_run_id,
            "queued_kept": inp.queued_kept,
            "by": inp.by,
        },
    )


class SessionTreeActivities:
    def __init__(
        self, store: TranscriptStore, records: SessionRecords, publishers: SessionPublishers
    ) -> None:
        self.store = store
        self.records = records
        self.publishers = publishers

    # -- reset ------------------------------------------------------------------------------

    async def _write_reset(self, inp: ResetInput) -> ResetWritten:
        existing = await self.store.get(inp.session_key, inp.entry_id)
        if existing is not None:  # a retry: what the first attempt wrote
            return ResetWritten(entry_id=existing.id, parent_id=existing.parent_id, ts=existing.ts)
        # The old branch ends valid: a call the aborted run left open is answered there, never
        # after the marker (where it would be an orphan in the new context).
        closed = await self.store.answer_unanswered(
            inp.session_key, inp.aborted_run_id or "", Unanswered.RUN_STOPPED.value
        )
        marker = TranscriptEntry(
            id=inp.entry_id,
            role=Role.RESET,
            ts=time.time(),
            meta={
                "reason": inp.reason,
                "by": inp.by,
                **({"aborted_run_id": inp.aborted_run_id} if inp.aborted_run_id else {}),
            },
        )
        await self.store.append(inp.session_key, [marker])
        written = await self.store.get(inp.session_key, inp.entry_id)
        assert written is not None
        return ResetWritten(
            entry_id=written.id,
            parent_id=written.parent_id,
            ts=written.ts,
            closed_tool_calls=len(closed),
        )

    @activity.defn(name=RESET_SESSION)
    async def reset_session(self, inp: ResetInput) -> ResetWritten:
        written = await self._write_reset(inp)
        # Waits for the flush: watchers see the reset before the next run's events.
        lease = self.publishers.lease(activity.client(), inp.session_key, wait_for_flush=True)
        async with lease as publisher:
            publisher.publish(reset_event(inp, written))
        return written

    # -- branch -----------------------------------------------------------------------------

    async def _copy(self, inp: BranchCopyInput) -> BranchCopied:
        parent, point = inp.source.parent_session, inp.source.branch_point
        entries = await self.store.read_all(parent)
        if not entries:
            raise ApplicationError(
                f"session {parent} does not exist (no transcript)",
                type=UNKNOWN_PARENT,
                non_retryable=True,
            )
        try:
            path = branch_path(entries, point)
        except UnknownEntry:
            raise ApplicationError(
                f"session {parent} has no entry {point}",
                type=UNKNOWN_BRANCH_POINT,
                non_retryable=True,
            ) from None
        now = time.time()
        answers = [
            tool_result_entry(
                call_id,
                name,
                unanswered_text(Unanswered.NOT_EXECUTED),
                None,
                is_error=True,
                ts=now,
                meta={"branch_point": point},
            )
            for call_id, name in unanswered_calls(path)
        ]
        marker = TranscriptEntry(
            id=inp.entry_id,
            role=Role.BRANCH,
            ts=now,
            meta={"parent_session": parent, "branch_point": point},
        )
        copy = [*path, *answers, marker]
        ours = {e.id for e in copy}
        if any(e.id not in ours for e in await self.store.read_all(inp.session_key)):
            # Not an earlier attempt of this copy: some other session's history.
            raise ApplicationError(
                f"session {inp.session_key} already has a transcript",
                type=TARGET_EXISTS,
                non_retryable=True,
            )
        # One append: the copy lands whole or not at all (a retry skips what is there).
        await self.store.append(inp.session_key, copy)
        await self.records.record_branch(inp.session_key, inp.source)
        recorded = await self.records.recorded(parent)
        settings = recorded[0] if recorded else None
        if settings is not None and settings.workspace_host is None:
            # The branch shares the parent's workspace, so it works on the parent's host (a
            # running parent learned its pin after it recorded its settings).
            host = await self.records.pinned_host(parent)
            if host is not None:
                settings = settings.model_copy(update={"workspace_host": host})
        return BranchCopied(
            entry_id=inp.entry_id,
            copied=len(path),
            settings=settings,
            queue_override=recorded[1] if recorded else None,
        )

    @activity.defn(name=COPY_BRANCH)
    async def copy_branch(self, inp: BranchCopyInput) -> BranchCopied:
        return await self._copy(inp)
