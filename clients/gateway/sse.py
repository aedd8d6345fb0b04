"""A session's events as Server-Sent Events.

Every event's `id:` is its offset in the session's Workflow Stream, so a client that reconnects
with `Last-Event-ID: <n>` (what a browser's EventSource sends by itself) resumes at `n + 1`,
exactly. The items come from `AgentlaneClient.watch`, which follows the stream across runs, its
continue-as-new and server restarts.

What the stream no longer holds cannot be replayed: it keeps its last 1 000 items when it
continues as new (workflows/session_events.py), and the SDK's subscriber, asked for a truncated
offset, silently starts again at the oldest item it still has. Here that is never silent: when
the first offset delivered is not the one asked for, a `gap` event comes first, naming what was
asked for and what is available, and advising to re-read the transcript (which holds every
message) before going on. Events of the `agentlane` vocabulary carry the `AgentEvent` JSON with
the SSE event name set to its kind; the `agui` vocabulary (clients/gateway/agui.py) sends AG-UI
events as plain `data:` messages, each with the offset of the event it came from.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from sse_starlette import ServerSentEvent

from agentlane.events import AgentEvent
from agentlane.seen_events import SeenEvents
from clients.api import StreamItem
from clients.gateway.fanout import FeedFailed

# One agentlane event in, zero or more SSE payloads (JSON-able dicts) out.
Translate = Callable[[int, AgentEvent], list[dict[str, Any]]]
# How often an open stream asks whether its token still lives (while events flow).
TOKEN_RECHECK_SECONDS = 2.0

T = TypeVar("T")


async def while_token_lives(
    items: AsyncIterator[T],
    alive: Callable[[], Awaitable[bool]],
    farewell: Callable[[], T] | None = None,
    every: float = TOKEN_RECHECK_SECONDS,
) -> AsyncIterator[T]:
    """`items` for as long as the token that opened the stream is not revoked: asked again
    every `every` seconds, whether events flow or the session is quiet, so a revoked token's
    stream ends within that (a token is checked once, when the request comes; a stream may
    stay open for days). `farewell`: the last thing sent when it ends so."""
    iterator = items.__aiter__()
    checked = time.monotonic()
    pending: asyncio.Future[T] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(iterator.__anext__())
            left = every - (time.monotonic() - checked)
            done, _ = await asyncio.wait({pending}, timeout=max(0.0, left))
            if time.monotonic() - checked >= every:
                if not await alive():
                    if farewell is not None:
                        yield farewell()
                    return
                checked = time.monotonic()
            if pending in done:
                try:
                    item = pending.result()
                except StopAsyncIteration:
                    return
                pending = None
                yield item
    finally:
        if pending is not None and not pending.done():
            pending.cancel()
            with contextlib.suppress(BaseException):
                await pending
        close = getattr(items, "aclose", None)
        if close is not None:
            await close()


def revoked_event(token_id: str) -> ServerSentEvent:
    return ServerSentEvent(
        data=json.dumps({"detail": f"token {token_id} was revoked: this stream ends"}),
        event="revoked",
    )


GAP_ADVICE = (
    "the stream no longer holds these events (it keeps only recent ones); read the transcript "
    "(GET /v1/sessions/{key}/transcript) for what was said, then go on from here"
)


def gap_event(key: str, requested: int, first_available: int) -> ServerSentEvent:
    if first_available > requested:
        data = {
            "requested": requested,
            "first_available": first_available,
            "missed": first_available - requested,
            "advice": GAP_ADVICE.replace("{key}", key),
        }
    else:
        # Asked for an offset past the stream's end (the gateway refuses those when it can
        # ask where the end is): what follows comes from the live end.
        data = {
            "requested": requested,
            "first_available": first_available,
            "missed": None,
            "advice": f"offset {requested} is past the end of this event stream; following "
            f"from its live end (offset {first_available}). Read the transcript "
            f"(GET /v1/sessions/{key}/transcript) for what was said before",
        }
    return ServerSentEvent(data=json.dumps(data), event="gap")


def interrupted_event(key: str, next_offset: int) -> ServerSentEvent:
    data = {
        "next_offset": next_offset,
        "last_event_id": next_offset - 1 if next_offset > 0 else None,
        "advice": "the gateway could not follow the session's events for a while; reconnect to "
        f"/v1/sessions/{key}/events with Last-Event-ID: {next_offset - 1} (or ?from="
        f"{next_offset}) to go on exactly where it stopped",
    }
    return ServerSentEvent(data=json.dumps(data), event="interrupted")


def agentlane_vocabulary(offset: int, event: AgentEvent) -> list[dict[str, Any]]:
    return [event.model_dump(mode="json", exclude_none=True)]


async def session_events(
    key: str,
    items: AsyncIterator[StreamItem],
    start: int,
    translate: Translate | None = None,
) -> AsyncIterator[ServerSentEvent]:
    """SSE events for `items`, which were asked for from offset `start`."""
    expected = start
    seen = SeenEvents()
    try:
        async for item in items:
            if item.offset != expected:
                yield gap_event(key, expected, item.offset)
            expected = item.offset + 1
            if not seen.first_time(item.event.event_id, item.event.kind):
                continue  # the same event again (agentlane/seen_events.py)
            if translate is None:
                payload = item.event.model_dump_json(exclude_none=True)
                yield ServerSentEvent(
                    data=payload, event=item.event.kind.value, id=str(item.offset)
                )
                continue
            # One stream item may become several events (AG-UI's start and first content): only
            # the last carries the item's id, so a client cut off between them resumes from the
            # item before and gets the whole group again, not the rest of it lost.
            messages = translate(item.offset, item.event)
            for n, message in enumerate(messages, start=1):
                last = n == len(messages)
                yield ServerSentEvent(
                    data=json.dumps(message), id=str(item.offset) if last else None
                )
    except FeedFailed:
        # The gateway could not follow the stream for a while (its shared subscription kept
        # failing): said with the place to resume, not a connection cut mid-chunk.
        yield interrupted_event(key, expected)
        return
    finally:
        await _close(items)
    # The stream ended: the session was closed. A message to it reopens it, and its stream goes
    # on from this offset.
    yield ServerSentEvent(data=json.dumps({"next_offset": expected}), event="closed")


async def _close(items: AsyncIterator[StreamItem]) -> None:
    aclose = getattr(items, "aclose", None)
    if aclose is not None:
        await aclose()
