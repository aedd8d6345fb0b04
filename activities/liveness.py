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


class IdleTimeout(Exception):
    pass


async def with_idle_limit(events: AsyncIterator[T], idle_seconds: float) -> AsyncIterator[T]:
    """Yield events, failing if the model is silent for longer than `idle_seconds` (0 or less:
    no idle limit, SPEC §4.6.2; the heartbeat timeout still notices a dead worker)."""
    iterator = aiter(events)
    limit = idle_seconds if idle_seconds > 0 else None
    while True:
        try:
            async with asyncio.timeout(limit):
                event = await anext(iterator)
        except StopAsyncIteration:
            return
        except TimeoutError as err:
            raise IdleTimeout(
                f"LLM idle timeout ({int(idle_seconds)}s): no response from model"
            ) from err
        yield event
