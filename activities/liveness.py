"""How often long activities heartbeat, and why that number.

Temporal delivers an activity's cancellation only in the answer to a heartbeat. An abort must end
a streaming model call or a running exec within a second (issue: control that always holds), so a
long activity heartbeats every quarter second and the worker throttles heartbeats to the same
interval (`workers/main.py`). A call that ends sooner than that sends none. Measured cost: one
small RPC per 250 ms per running call, and no history events.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import activity

T = TypeVar("T")

HEARTBEAT_EVERY_SECONDS = 0.25
HEARTBEAT_THROTTLE = timedelta(seconds=HEARTBEAT_EVERY_SECONDS)


async def heartbeat_forever(
    every: float = HEARTBEAT_EVERY_SECONDS, details: Callable[[], Any] | None = None
) -> None:
    """Heartbeat at that rate until cancelled: a task beside a long call (model, summariser), or
    beside a long wait at a slower `every` (a scheduled firing waiting for its run). `details`:
    what each heartbeat reports (activities/progress_details.py), shown in the Temporal UI."""
    while True:
        await asyncio.sleep(every)
        if details is None:
            activity.heartbeat()
        else:
            activity.heartbeat(details())


def heartbeats_reach_temporal() -> bool:
    """Whether this code runs in an activity whose heartbeats Temporal takes: a local activity
    (a file tool) has none, and the SDK logs a warning for each one sent."""
    return activity.in_activity() and not activity.info().is_local


class IdleTimeout(Exception):
    pass


async def with_idle_limit(events: AsyncIterator[T], idle_seconds: float) -> AsyncIterator[T]:
    """Yield events, failing if the model is silent for longer than `idle_seconds` (0 or less:
    no idle limit, SPEC §4.6.2; the heartbeat timeout still notices a dead worker).

    One timer for the whole stream, moved forward lazily (`_IdleWatch`), not a timeout entered
    and left around every event: a provider streams a delta per few tokens, and that cost
    (a timer scheduled and cancelled each time) grew with the answer."""
    iterator = aiter(events)
    if idle_seconds <= 0:
        async for event in iterator:
            yield event
        return
    watch = _IdleWatch(idle_seconds)
    try:
        while True:
            watch.waiting_from_now()
            try:
                event = await anext(iterator)
            except StopAsyncIteration:
                return
            except asyncio.CancelledError:
                if watch.timed_out():
                    raise IdleTimeout(
                        f"LLM idle timeout ({int(idle_seconds)}s): no response from model"
                    ) from TimeoutError()
                raise
            finally:
                watch.waiting = False
            yield event
    finally:
        watch.close()


class _IdleWatch:
    """Cancels the task once it has waited `limit` seconds for one event. The timer fires at
    the earliest deadline and, when the wait it was set for ended meanwhile, is set again for
    the current one: once per `limit` at most, whatever the number of events."""

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        self.task = task
        # Cancellations already asked of the task (asyncio.timeout's rule): only one more,
        # ours, is an idle timeout.
        self.cancelling = task.cancelling()
        self.waiting = False
        self.deadline = self.loop.time() + limit
        self.fired = False
        self.handle = self.loop.call_at(self.deadline, self._check)

    def waiting_from_now(self) -> None:
        self.deadline = self.loop.time() + self.limit
        self.waiting = True

    def _check(self) -> None:
        now = self.loop.time()
        if now < self.deadline:
            self.handle = self.loop.call_at(self.deadline, self._check)
        elif not self.waiting:
            # Between two waits (the consumer is busy): the next wait sets its own deadline.
            self.handle = self.loop.call_at(now + self.limit, self._check)
        else:
            self.fired = True
            self.task.cancel()

    def timed_out(self) -> bool:
        """After a CancelledError: whether it was this watch's, and only this watch's (it is
        then taken back, as asyncio.timeout does)."""
        if not self.fired:
            return False
        self.fired = False
        return self.task.uncancel() <= self.cancelling

    def close(self) -> None:
        self.handle.cancel()
        if self.fired:  # fired as the stream ended some other way: its cancel is taken back
            self.fired = False
            self.task.uncancel()
