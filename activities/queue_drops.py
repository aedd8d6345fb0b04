"""Records messages the queue policy dropped (issue 19; contracts in `agentlane/queue_drops.py`).

Idempotent, since an activity can run twice: each marker's id derives from the message's entry
id, so a second append of it is skipped; the events carry stable ids too.
"""

from __future__ import annotations

from temporalio import activity

from activities.stream_publishers import SessionPublishers
from activities.transcript_store import TranscriptStore
from agentlane.events import AgentEvent, EventKind
from agentlane.queue_drops import (
    RECORD_DROPPED_MESSAGES,
    DroppedMessage,
    RecordDropsInput,
    RecordDropsResult,
    drop_note,
    dropped_entry_id,
)
from agentlane.transcript import Role, TranscriptEntry


def dropped_entry(item: DroppedMessage) -> TranscriptEntry:
    meta: dict[str, object] = {
        "seq": item.seq,
        "policy": item.policy.value,
        "cap": item.cap,
        "fate": item.fate.value,
    }
    if item.message_id:
        meta["message_id"] = item.message_id
    if item.sender:
        meta["sender"] = item.sender
    return TranscriptEntry(
        id=dropped_entry_id(item.entry_id), role=Role.DROPPED, ts=item.at, text=item.text, meta=meta
    )


def dropped_event(session_key: str, item: DroppedMessage) -> AgentEvent:
    """`message_dropped` on the session's stream; the text stays in the transcript."""
    entry_id = dropped_entry_id(item.entry_id)
    return AgentEvent(
        kind=EventKind.MESSAGE_DROPPED,
        event_id=f"{entry_id}/{EventKind.MESSAGE_DROPPED.value}",
        session_key=session_key,
        run_id="",
        ts=item.at,
        text=drop_note(item.policy, item.cap, item.fate),
        data={
            "seq": item.seq,
            "message_id": item.message_id,
            "fate": item.fate.value,
            "policy": item.policy.value,
            "cap": item.cap,
            "entry_id": entry_id,
        },
    )


class QueueDropActivities:
    def __init__(self, store: TranscriptStore, publishers: SessionPublishers) -> None:
        self.store = store
        self.publishers = publishers

    @activity.defn(name=RECORD_DROPPED_MESSAGES)
    async def record_dropped_messages(self, inp: RecordDropsInput) -> RecordDropsResult:
        entries = [dropped_entry(item) for item in inp.items]
        written = await self.store.append(inp.session_key, entries)
        # Waits for the flush: the events are on the stream before the next run starts, so
        # that run's webhook delivery (which reads from where the last one stopped) posts them.
        lease = self.publishers.lease(activity.client(), inp.session_key, wait_for_flush=True)
        async with lease as publisher:
            for item in inp.items:
                publisher.publish(dropped_event(inp.session_key, item))
        return RecordDropsResult(written=len(written))
