"""Publishing events from activities: one stream client per session per worker process.

All activities of a session that run in this process publish through one FIFO buffer and one
`WorkflowStreamClient`, so the stream holds their events in the order they were published, and
one flush loop per session sends them: a batch goes out one batch interval after its first event,
at once when something urgent arrives (a message's first text, a lease that ends). Text deltas
are coalesced per lease: whatever arrives within one batch becomes one `text_delta` event, so the
stream (and the events workflow's history) grows with batches, not tokens.

What an activity waits for when it ends (`EventLease.__aexit__`):
- a normal exit waits for nothing while this process is the only worker on its task queue: its
  events are handed to the flush loop and go out with the next batch. Within this process
  nothing published later can overtake them; a worker killed (kill -9) before that batch loses
  them from the stream (the transcript is the record). While other worker processes poll the
  queue (activities/queue_peers.py), a normal exit waits for the flush too: the run's next
  activity may run in another process, and its events must not reach the stream before these.
- an exit by exception (failure, cancellation) waits for the flush: a retried model attempt reads
  back from the stream what the failed one showed (`published_message_text`) and must find all
  of it, or the user would see text twice. If that flush fails, what it could not deliver is
  dropped rather than sent after the retry has looked.
- `wait_for_flush=True` (run end) waits too: it makes the run's last events durable and, the
  buffer being shared, everything published before them in this process. A model call whose
  reply ends the run waits as well (`wait_on_exit`): run end may run in another worker process,
  and the final text must reach the stream before `agent_end` and survive a crash right after.

Events are best effort, the transcript is the record: a flush that fails for good (the events
workflow is gone because the session closed) is logged and its events dropped; a transient one
is retried for `_MAX_RETRY`. Neither raises out of a lease's exit (only an explicit `flush()`
reports a failure to its caller).

Signals name the events workflow's run, once it is known: a signal by workflow id alone costs
the server a read of the current run (`GetCurrentExecution`) every time, and a busy session sends
one a batch. The run id is looked up once (a describe, in the background, after the first batch
went out by id), then every batch goes to that run. When the stream continues as new, that run
refuses the batch (not found: nothing was delivered); the batch goes to the run that continued it
under the same publisher id and sequence, so the stream's deduplication still holds if an earlier
attempt of it did arrive before the hand-over.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from datetime import timedelta
from types import TracebackType
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.contrib.workflow_streams import TopicHandle, WorkflowStreamClient
from temporalio.service import RPCError, RPCStatusCode

from activities.queue_peers import QueuePeers
from activities.stream_delivered import DeliveredEvents
from agentlane.events import EVENTS_TOPIC, AgentEvent
from agentlane.ids import events_workflow_id

log = logging.getLogger(__name__)

# How long one flush may take (an activity that ends by exception waits for one).
EXIT_FLUSH_TIMEOUT_SECONDS = 10.0
# A session's client outlives any one activity (it lives while the session is busy): a batch the
# server keeps refusing is dropped after this (well under the stream's 15-minute publisher TTL,
# which its exactly-once dedup relies on) instead of holding back everything behind it.
_MAX_RETRY = timedelta(seconds=60)
# Errors worth retrying with the same batch; anything else (the events workflow does not exist or
# has completed, a batch the server will never take) drops the batch.
_TRANSIENT = frozenset(
    {
        RPCStatusCode.UNAVAILABLE,
        RPCStatusCode.DEADLINE_EXCEEDED,
        RPCStatusCode.RESOURCE_EXHAUSTED,
        RPCStatusCode.ABORTED,
        RPCStatusCode.INTERNAL,
        RPCStatusCode.UNKNOWN,
        RPCStatusCode.CANCELLED,
    }
)


# How many hand-overs one flush follows before giving up on its batch (each is a continue-as-new
# of the events workflow between two attempts of the same signal: more than one is unheard of).
_MAX_HANDOVERS = 3
# A lookup of the events workflow's run that found none is tried again after this.
_LOOKUP_AGAIN_AFTER = 30.0


class _StreamClient(WorkflowStreamClient):
    """The SDK's stream client, able to send what it holds to another run of the workflow."""

    def retarget(self, handle: WorkflowHandle[Any, Any]) -> None:
        # The SDK's client keeps its handle private and has no setter; the unsent batch, its
        # publisher id and sequence stay as they are (tests/e2e/test_stream_publishers.py
        # holds this to the SDK: a pinned pool across several hand-overs loses nothing).
        self._handle = handle


@dataclass
class _PendingText:
    template: AgentEvent
    start_index: int
    text: str


class EventLease:
    """One activity's publisher; returned by `SessionPublishers.lease`."""

    def __init__(
        self, pool: SessionPublishers, client: Client, session_key: str, wait_for_flush: bool
    ) -> None:
        self._pool = pool
        self._client = client
        self._key = session_key
        self._wait_for_flush = wait_for_flush
        self._pending: _PendingText | None = None
        self._session: _SessionStream | None = None

    def wait_on_exit(self) -> None:
        """Make a normal exit wait for the flush too (decided late: e.g. once a model call knows
        its reply ends the run, whose text must be in the stream before `agent_end`)."""
        self._wait_for_flush = True

    @property
    def session(self) -> _SessionStream:
        if self._session is None:
            raise RuntimeError("publish inside `async with pool.lease(...)`")
        return self._session

    async def __aenter__(self) -> EventLease:
        # The session is looked up here, not in `lease()`: an idle session retired in between
        # must not receive this lease.
        self._session = self._pool.session(self._client, self._key)
        self._session.open_lease(self)
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        session = self.session
        session.close_lease(self)
        if et is None and not self._wait_for_flush and not self._pool.shared():
            # No wake: the batch goes out with the session's next tick, together with what the
            # next steps publish meanwhile. A signal per activity would double the server's work
            # per step (each one is a history event and a workflow task of the events workflow).
            return
        if not await session.flush_logged() and et is not None:
            # A retry of this activity may read the stream back as soon as this one reports; a
            # batch that reached the stream after that would show its text twice.
            session.drop_unsent()

    def publish(self, event: AgentEvent, urgent: bool = False) -> None:
        self.move_pending_text()
        self.session.add(event.model_copy(update={"ts": event.ts or time.time()}))
        if urgent:
            self.session.wake()

    def text(
        self, template: AgentEvent, start_index: int, delta: str, urgent: bool = False
    ) -> None:
        """Queue `delta` (which starts at character `start_index` of the message)."""
        if not delta:
            return
        pending = self._pending
        if (
            pending is not None
            and pending.template.message_id == template.message_id
            and pending.template.kind == template.kind
            and pending.start_index + len(pending.text) == start_index
        ):
            pending.text += delta
        else:
            self.move_pending_text()
            self._pending = _PendingText(template, start_index, delta)
            self.session.stir()
        if urgent:
            self.session.wake()

    def has_pending_text(self) -> bool:
        return self._pending is not None

    def move_pending_text(self) -> None:
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
        self.session.add(event)

    async def flush(self) -> None:
        """Send everything this session has buffered in this process; raises if that fails."""
        await self.session.flush()


class _SessionStream:
    """One session's buffer, stream client and flush loop in this process."""

    def __init__(
        self,
        pool: SessionPublishers,
        client: Client,
        session_key: str,
        batch_interval: float,
        idle_after: float,
    ) -> None:
        self.key = session_key
        self._pool = pool
        self._client = client
        self._interval = batch_interval
        self._idle_after = idle_after
        # The events workflow's run the stream client signals (None: by workflow id), and the
        # run found by the background lookup, used from the next batch on.
        self._pinned: str | None = None
        self._found_run: str | None = None
        self._lookup: asyncio.Task[None] | None = None
        self._next_lookup = 0.0  # monotonic; a lookup that found nothing is not repeated soon
        self._flushing = 0  # flushes in flight (the stream client is replaced only between)
        # Handed to the current stream client and not yet known to be delivered.
        self._handed: list[AgentEvent] = []
        self._stream, self._topic = self._new_stream()
        self._buffer: list[AgentEvent] = []
        self._leases: list[EventLease] = []
        # Something arrived (start the batch clock) / send now.
        self._stirred = asyncio.Event()
        self._wake = asyncio.Event()
        # The stream client holds a batch a failed signal did not deliver.
        self._unsent = False
        self._last_used = time.monotonic()
        self._stopping = False
        self._loop = asyncio.create_task(self._run(), name=f"event flusher {session_key}")

    def _handle(self, run_id: str | None) -> WorkflowHandle[Any, Any]:
        return self._client.get_workflow_handle(events_workflow_id(self.key), run_id=run_id)

    def _new_stream(
        self, run_id: str | None = None
    ) -> tuple[_StreamClient, TopicHandle[AgentEvent]]:
        # The client's own timer is never started (it is not entered): the loop here decides
        # when to send.
        stream = _StreamClient(
            self._handle(run_id), client=self._client, max_retry_duration=_MAX_RETRY
        )
        self._pinned = run_id
        # What the previous client held is not vouched for (dropped, or sent by it already).
        self._handed = []
        return stream, stream.topic(EVENTS_TOPIC, type=AgentEvent)

    async def _current_run(self) -> str | None:
        """The events workflow's running run, or None (closed, absent, or unknown for now)."""
        try:
            described = await self._handle(None).describe()
        except Exception as err:  # the lookup is an optimisation: signals by id still work
            log.debug("could not look up the events run of session %s: %r", self.key, err)
            return None
        running = described.status == WorkflowExecutionStatus.RUNNING
        return described.run_id if running else None

    def _look_up_run(self) -> None:
        if (
            self._pinned is not None
            or self._lookup is not None
            or time.monotonic() < self._next_lookup
        ):
            return

        async def lookup() -> None:
            self._found_run = await self._current_run()
            if self._found_run is None:
                self._next_lookup = time.monotonic() + _LOOKUP_AGAIN_AFTER

        self._lookup = asyncio.create_task(lookup(), name=f"events run of {self.key}")

    def _pin_if_found(self) -> None:
        """Between batches (none unsent or in flight, so the new client cannot overtake the
        old one), signal the run the lookup found."""
        if self._lookup is None or not self._lookup.done():
            return
        if self._pinned is None and not self._unsent and not self._flushing:
            if self._found_run is not None:
                self._stream, self._topic = self._new_stream(self._found_run)
            self._lookup = None
            self._found_run = None

    async def _follow_handover(self, stream: _StreamClient) -> bool:
        """`stream`'s run refused its batch: point it at the run that continued that one.
        False when there is none (the session closed): the batch is dropped as before."""
        if stream is not self._stream or self._pinned is None:
            return False
        current = await self._current_run()
        if current is None or current == self._pinned:
            return False
        stream.retarget(self._handle(current))
        self._pinned = current
        return True

    # -- called by leases (synchronous: nothing here waits) --------------------------------

    def open_lease(self, lease: EventLease) -> None:
        self._leases.append(lease)
        self._stirred.set()

    def close_lease(self, lease: EventLease) -> None:
        lease.move_pending_text()
        if lease in self._leases:
            self._leases.remove(lease)
        self._last_used = time.monotonic()
        self._stirred.set()

    def add(self, event: AgentEvent) -> None:
        self._buffer.append(event)
        self._stirred.set()

    def stir(self) -> None:
        self._stirred.set()

    def wake(self) -> None:
        self._wake.set()
        self._stirred.set()

    # -- sending ---------------------------------------------------------------------------

    def _holds_data(self) -> bool:
        return (
            bool(self._buffer)
            or self._unsent
            or any(lease.has_pending_text() for lease in self._leases)
        )

    async def flush(self) -> None:
        for lease in self._leases:
            lease.move_pending_text()
        self._pin_if_found()
        stream, topic = self._stream, self._topic
        for event in self._buffer:
            topic.publish(event)
        self._handed += self._buffer
        self._buffer.clear()
        self._flushing += 1
        sent = False
        try:
            for handovers in range(_MAX_HANDOVERS + 1):
                try:
                    await stream.flush()
                    sent = True
                    break
                except RPCError as err:
                    followed = (
                        err.status == RPCStatusCode.NOT_FOUND
                        and handovers < _MAX_HANDOVERS
                        and await self._follow_handover(stream)
                    )
                    if not followed:
                        raise
        except RPCError as err:
            if err.status in _TRANSIENT:
                self._unsent = True
            else:
                self._drop(stream)
            raise
        except (TimeoutError, asyncio.CancelledError):
            # The stream client still holds what it could not send (or, after `_MAX_RETRY`, it
            # dropped the batch but may hold newer items): the loop tries again.
            self._unsent = True
            raise
        except Exception:
            self._drop(stream)
            raise
        finally:
            self._flushing -= 1
            if not sent and stream is self._stream:
                # Its fate unknown (a later flush may send it, or the client may drop it after
                # `_MAX_RETRY`): none of it is vouched for.
                self._handed = []
        if stream is self._stream:
            # The client's flush returns once it holds nothing: all it was handed is in.
            self._pool.delivered.delivered(self._handed)
            self._handed = []
            self._unsent = False
            self._look_up_run()

    def _drop(self, failed: WorkflowStreamClient) -> None:
        """Forget what the failed client holds: it would be refused again, and hold back the
        events published after it."""
        if failed is self._stream:
            self.drop_unsent()

    def drop_unsent(self) -> None:
        """Drop what the stream client holds (handed over, not delivered); events still in the
        buffer stay."""
        self._stream, self._topic = self._new_stream()
        self._unsent = False

    async def flush_logged(self) -> bool:
        try:
            async with asyncio.timeout(EXIT_FLUSH_TIMEOUT_SECONDS):
                await self.flush()
            return True
        except Exception as err:  # events are best effort; the transcript is the record
            log.warning("could not send events of session %s: %r", self.key, err)
            return False

    async def _run(self) -> None:
        try:
            while not self._stopping:
                if not self._holds_data():
                    self._wake.clear()
                    self._stirred.clear()
                    idle_left = self._idle_after - (time.monotonic() - self._last_used)
                    if not self._leases and idle_left <= 0:
                        self._pool.forget(self)
                        return
                    try:
                        async with asyncio.timeout(None if self._leases else idle_left):
                            await self._stirred.wait()
                    except TimeoutError:
                        pass
                    continue
                if not self._wake.is_set():
                    try:
                        async with asyncio.timeout(self._interval):
                            await self._wake.wait()
                    except TimeoutError:
                        pass
                self._wake.clear()
                if self._stopping:
                    return
                # Bounded so a hung signal cannot stall the session: the next round resends the
                # same batch under the same sequence number, which the stream deduplicates.
                await self.flush_logged()
        except asyncio.CancelledError:
            raise
        except Exception:
            # Never leave a session without a loop: the next lease starts a fresh one.
            log.exception("event flusher of session %s failed", self.key)
            self._pool.forget(self)

    async def stop(self) -> None:
        """Stop the loop and send what is left (bounded by the caller)."""
        self._stopping = True
        self._wake.set()
        self._stirred.set()
        if self._loop is not asyncio.current_task():
            # By flag first, cancel as a backstop: the loop may be in the middle of a signal.
            done, _ = await asyncio.wait({self._loop}, timeout=1)
            if not done:
                self._loop.cancel()
        if self._lookup is not None:
            self._lookup.cancel()
        if self._holds_data():
            await self.flush_logged()


class SessionPublishers:
    """The worker process's event publishers, one per session, shared by its activities.

    Activities take a lease for their run time (`async with pool.lease(client, key) as p`); a
    session idle for `idle_after` (no lease open, nothing left to send) has its client closed,
    and `close()` sends what is left of all of them when the worker stops.
    """

    def __init__(
        self,
        batch_interval: timedelta,
        idle_after: timedelta = timedelta(seconds=30),
        peers: QueuePeers | None = None,
    ) -> None:
        """`peers`: whether other worker processes serve this one's task queue (None: alone)."""
        self._interval = batch_interval.total_seconds()
        self._idle_after = idle_after.total_seconds()
        self._peers = peers
        self._sessions: dict[str, _SessionStream] = {}
        self.delivered = DeliveredEvents()

    def shared(self) -> bool:
        """Other worker processes may run this process's sessions' next activities: every
        activity's events reach the stream before it reports."""
        return self._peers is not None and self._peers.shared

    @property
    def batch_interval_seconds(self) -> float:
        return self._interval

    def lease(
        self, client: Client, session_key: str, *, wait_for_flush: bool = False
    ) -> EventLease:
        """`async with` it for an activity's run time. `wait_for_flush`: a normal exit waits
        for the session's events to reach the stream too (an exit by exception always does)."""
        return EventLease(self, client, session_key, wait_for_flush)

    def session(self, client: Client, session_key: str) -> _SessionStream:
        session = self._sessions.get(session_key)
        if session is None:
            session = _SessionStream(self, client, session_key, self._interval, self._idle_after)
            self._sessions[session_key] = session
        return session

    def sessions(self) -> list[str]:
        """Keys of the sessions with a live stream client here (for tests and diagnostics)."""
        return list(self._sessions)

    def forget(self, session: _SessionStream) -> None:
        """Called by a session's own loop as it ends; a later lease for its key starts afresh."""
        if self._sessions.get(session.key) is session:
            del self._sessions[session.key]

    async def close(self) -> None:
        """Send what every session has left; call after the workers stopped, with a timeout."""
        sessions, self._sessions = list(self._sessions.values()), {}
        await asyncio.gather(*(s.stop() for s in sessions), return_exceptions=True)
