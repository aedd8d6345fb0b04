"""An offset past a stream's end (issue 19) is never read as a restart: a follower that asks for
one waits at the live end, and the SSE layer says so without claiming the stream started again."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

from clients.api import StreamItem
from clients.gateway.sse import gap_event, session_events
from tests.unit.test_gateway_fanout import FakeStream, event, fanout


async def test_a_follower_past_the_end_waits_at_the_live_end() -> None:
    stream = FakeStream()
    stream.publish(5)
    feed = fanout(stream)
    it = feed.follow("s", 99_999_999_999_999_999_999)
    first = asyncio.ensure_future(it.__anext__())
    await asyncio.sleep(0.05)
    assert not first.done(), "nothing old may be replayed"
    stream.publish(1)
    got = await asyncio.wait_for(first, 2)
    assert got.offset == 5
    await it.aclose()  # type: ignore[attr-defined]
    await feed.close()


async def test_the_sse_layer_says_where_it_follows_from() -> None:
    async def items() -> AsyncIterator[StreamItem]:
        yield StreamItem(7, event(7))

    out = [e async for e in session_events("s", items(), 10**20)]
    gap = json.loads(str(out[0].data))
    assert out[0].event == "gap"
    assert "past the end" in gap["advice"] and "again" not in gap["advice"]
    assert gap["first_available"] == 7
    # A truncated stream's gap is unchanged.
    truncated = json.loads(str(gap_event("s", 3, 10).data))
    assert truncated["missed"] == 7
