"""Publishing events from activities to the session's events workflow.

Text deltas are coalesced: whatever arrives within one batch interval becomes one `text_delta`
event, so the stream (and the events workflow's history) grows with batches, not tokens. Flushes
are driven here rather than by the stream client's own timer: the first text of a message goes out
at once, everything else with the next tick or when the activity ends (each activity flushes before
it returns, so events stay in order across activities), and quiet periods send nothing. A retried
attempt avoids showing the user the same text twice with `ResumeGuard`.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from dataclasses import dataclass
from datetime import timedelta
from types import TracebackType

from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.contrib.workflow_streams import PollInput, PollResult, WorkflowStreamClient

from agentlane.events import EVENTS_TOPIC, AgentEvent, EventKind
from agentlane.ids import events_workflow_id

log = logging.getLogger(__name__)

# The stream client's own timer is parked; `StreamPublisher` decides when to flush.
_PARKED = timedelta(hours=24)
# The stream's poll query (the same protocol the SDK's subscriber uses for closed runs).
_POLL = "__temporal_workflow_stream_poll"


@dataclass
class _PendingText:
    template: AgentEvent
    start_index: int
    text: str


class StreamPublisher:
    def __init__(
        self, client: Client, session_key: str, batch_interval: timedelta, run_id: str = ""
    ) -> None:
        self._stream = WorkflowStreamClient.create(
            client, events_workflow_id(session_key), batch_interval=_PARKED
        )
        self._topic = self._stream.topic(EVENTS_TOPIC, type=AgentEvent)
        self._interval = batch_interval.total_seconds()
        self._pending: _PendingText | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._closing = False
        self.failed = False

    async def __aenter__(self) -> StreamPublisher:
        await self._stream.__aenter__()
        self._ticker = asyncio.create_task(self._tick())
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._ticker:
            # Stop the ticker by flag, not only by cancel: on Python 3.11 a cancel that races
            # with a finishing wait can be swallowed, and the loop would run forever.
            self._closing = True
            self._wake.set()
            done, _ = await asyncio.wait({self._ticker}, timeout=5)
            if not done:
                self._ticker.cancel()
        self._move_pending_text()
        try:
            async with asyncio.timeout(10):
                await self.flush()
        except Exception as err:  # events are best effort; the transcript is the record
            log.warning("could not flush events: %s", err)
        try:
            async with asyncio.timeout(5):
                await self._stream.__aexit__(None, None, None)
        except Exception as err:
            log.warning("could not close event stream: %s", err)

    async def _tick(self) -> None:
        while not self._closing:
            try:
                async with asyncio.timeout(self._interval):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake.clear()
            if self._closing:
                return
            try:
                await self.flush()
            except Exception as err:
                self.failed = True
                log.warning("event flush failed, will retry: %s", err)

    def publish(self, event: AgentEvent, urgent: bool = False) -> None:
        self._move_pending_text()
        self._topic.publish(event.model_copy(update={"ts": event.ts or time.time()}))
        if urgent:
            self._wake.set()

    def text(
        self, template: AgentEvent, start_index: int, delta: str, urgent: bool = False
    ) -> None:
        """Queue `delta` (which starts at character `start_index` of the message)."""
        if not delta:
            return
        if urgent:
            self._wake.set()
        pending = self._pending
        if (
            pending is not None
            and pending.template.message_id == template.message_id
            and pending.template.kind == template.kind
            and pending.start_index + len(pending.text) == start_index
        ):
            pending.text += delta
            return
        self._move_pending_text()
        self._pending = _PendingText(template, start_index, delta)

    def _move_pending_text(self) -> None:
        pending, self._pending = self._pending, None
        if pending is None:
            return
        event = pending.template.model_copy(
            update={
                "text": pending.text,
                "index": pending.start_index,
                "event_id": f"{pending.template.event_id}/{pending.start_index}",
                "ts": time.time(),
            }
        )
        self._topic.publish(event)

    async def flush(self) -> None:
        self._move_pending_text()
        await self._stream.flush()


class ResumeGuard:
    """Decides what a retried model attempt may show, given what earlier attempts showed.

    `prior_text` is read back from the stream itself (see `published_message_text`), so it is
    exactly what subscribers received. If the new attempt produces the same prefix (always, for
    a deterministic model) it continues after it and the user sees no repeat. If it diverges, a
    `message_reset` tells consumers to drop the earlier text, and the new text is shown from the
    start.
    """

    def __init__(self, prior_text: str) -> None:
        self.prior_text = prior_text
        self.decided = not prior_text
        self.reset = False
        self.publish_from = 0

    def decide(self, text: str, final: bool) -> bool:
        """Return True once a decision is made (then read `reset` and `publish_from`)."""
        if self.decided:
            return True
        if len(text) < len(self.prior_text) and not final:
            if not self.prior_text.startswith(text):
                self.reset = self.decided = True
            return self.decided
        if text.startswith(self.prior_text):
            self.publish_from = len(self.prior_text)
        else:
            self.reset = True
        self.decided = True
        return True


async def published_message_text(
    client: Client, session_key: str, from_offset: int, message_id: str
) -> str:
    """What subscribers have been shown of one message, read with a query (no history cost)."""
    handle = client.get_workflow_handle(events_workflow_id(session_key))
    converter = client.data_converter.payload_converter
    text = ""
    offset = from_offset
    while True:
        result = await handle.query(
            _POLL, PollInput(topics=[EVENTS_TOPIC], from_offset=offset), result_type=PollResult
        )
        for item in result.items:
            payload = Payload()
            payload.ParseFromString(base64.b64decode(item.data))
            event = converter.from_payload(payload, AgentEvent)
            if event.message_id != message_id:
                continue
            if event.kind == EventKind.MESSAGE_RESET:
                text = ""
            elif event.kind == EventKind.TEXT_DELTA and event.text and event.index is not None:
                text = text[: event.index] + event.text
        if not result.more_ready:
            return text
        offset = result.next_offset


def text_delta_template(
    session_key: str,
    run_id: str,
    message_id: str,
    turn_index: int,
    attempt: int,
    kind: EventKind = EventKind.TEXT_DELTA,
) -> AgentEvent:
    suffix = "d" if kind == EventKind.TEXT_DELTA else "r"
    return AgentEvent(
        kind=kind,
        event_id=f"{message_id}/a{attempt}/{suffix}",
        session_key=session_key,
        run_id=run_id,
        attempt=attempt,
        turn_index=turn_index,
        message_id=message_id,
    )
