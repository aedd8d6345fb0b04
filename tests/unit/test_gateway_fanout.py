"""The gateway's fan-out (clients/gateway/fanout.py) against an in-memory stream: one upstream
per session, followers joining at any offset get every item exactly once (also while the live
feed races their catch-up), a slow follower holds nobody back and catches up by query, the
feed lingers then stops."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from agentlane.events import AgentEvent, EventKind
from clients.api import StreamItem
from clients.gateway.fanout import Fanout


def event(i: int) -> AgentEvent:
    return AgentEvent(
        kind=EventKind.TEXT_DELTA,
        event_id=f"e{i}",
        session_key="s",
        run_id="r",
        text=str(i),
        index=i,
    )


class FakeStream:
    """A stream whose items appear with `publish`; `watch` long-polls, `read` is a query."""

    def __init__(self) -> None:
        self.items: list[StreamItem] = []
        self.changed = asyncio.Event()
        self.watches = 0
        self.active_watches = 0
        self.ended = False
        self.read_delay = 0.0

    def publish(self, n: int = 1) -> None:
        for _ in range(n):
            i = len(self.items)
            self.items.append(StreamItem(i, event(i)))
        self.changed.set()

    def end(self) -> None:
        self.ended = True
        self.changed.set()

    async def watch(self, key: str, start: int) -> AsyncIterator[StreamItem]:
        self.watches += 1
        self.active_watches += 1
        try:
            pos = start
            while True:
                while pos < len(self.items):
                    yield self.items[pos]
                    pos += 1
                if self.ended:
                    return
                self.changed.clear()
                await self.changed.wait()
        finally:
            self.active_watches -= 1

    async def read(self, key: str, start: int, until: int) -> AsyncIterator[StreamItem]:
        for item in list(self.items[start:until]):
            if self.read_delay:
                await asyncio.sleep(self.read_delay)
            yield item

    async def end_offset(self, key: str) -> int:
        return len(self.items)


def fanout(stream: FakeStream, **kw: object) -> Fanout:
    return Fanout(stream.watch, stream.read, stream.end_offset, **kw)  # type: ignore[arg-type]


async def collect(it: AsyncIterator[StreamItem], n: int) -> list[int]:
    out = []
    async for item in it:
        out.append(item.offset)
        if len(out) == n:
            break
    return out


async def test_followers_share_one_upstream_and_get_everything_once() -> None:
    stream = FakeStream()
    stream.publish(30)
    stream.read_delay = 0.001  # catch-up is slow: live items race it
    fo = fanout(stream)
    starts = [0, 5, 29, 30, 12, 30]
    tasks = [asyncio.create_task(collect(fo.follow("s", s), 100 - s)) for s in starts]
    for _ in range(70):
        await asyncio.sleep(0)
        stream.publish()
    results = await asyncio.wait_for(asyncio.gather(*tasks), 5)
    for s, got in zip(starts, results, strict=True):
        assert got == list(range(s, 100)), s
    assert stream.watches == 1
    await fo.close()


async def test_a_follower_ahead_of_the_feed_waits_and_an_old_one_catches_up() -> None:
    stream = FakeStream()
    stream.publish(10)
    fo = fanout(stream)
    first = asyncio.create_task(collect(fo.follow("s", 10), 5))
    await asyncio.sleep(0.01)
    # Offsets the stream has, the feed not yet (asked at the live end a moment earlier).
    stream.items += [StreamItem(i, event(i)) for i in (10, 11)]
    ahead = asyncio.create_task(collect(fo.follow("s", 12), 3))
    stream.publish(3)
    assert await asyncio.wait_for(first, 2) == [10, 11, 12, 13, 14]
    assert await asyncio.wait_for(ahead, 2) == [12, 13, 14]
    await fo.close()


async def test_a_slow_follower_holds_nobody_back_and_catches_up_by_query() -> None:
    stream = FakeStream()
    fo = fanout(stream, queue_limit=10)
    slow = fo.follow("s", 0)
    fast_task = asyncio.create_task(collect(fo.follow("s", 0), 50))
    first_task = asyncio.create_task(anext(slow))  # joins, takes one, then stops reading
    await asyncio.sleep(0.01)
    stream.publish()
    assert (await first_task).offset == 0
    for _ in range(49):
        stream.publish()
        await asyncio.sleep(0)
    assert await asyncio.wait_for(fast_task, 2) == list(range(50))
    # Its queue overflowed and was dropped; it reads what it missed by query, then live.
    rest = asyncio.create_task(collect(slow, 52))
    await asyncio.sleep(0.01)
    stream.publish(3)
    assert await asyncio.wait_for(rest, 2) == list(range(1, 53))
    assert fo.lagged == 1 and fo.caught_up == 1
    assert stream.watches == 1
    await fo.close()


async def test_a_burst_larger_than_the_queue_reaches_a_fast_follower_whole() -> None:
    """A run's burst arrives as one upstream batch, distributed before any follower runs: every
    queue overflows. Nobody is cut off: each reads the burst by query and goes on live."""
    stream = FakeStream()
    fo = fanout(stream, queue_limit=10)
    followers = [asyncio.create_task(collect(fo.follow("s", 0), 60)) for _ in range(2)]
    await asyncio.sleep(0.01)
    stream.publish(55)
    await asyncio.sleep(0.01)
    stream.publish(5)
    for got in await asyncio.wait_for(asyncio.gather(*followers), 2):
        assert got == list(range(60))
    await fo.close()


async def test_the_feed_ends_with_the_stream_and_stops_after_its_last_follower() -> None:
    stream = FakeStream()
    stream.publish(3)
    fo = fanout(stream, linger_seconds=0.05)
    it = fo.follow("s", 0)
    assert [i.offset async for i in _take(it, 3)] == [0, 1, 2]
    await it.aclose()  # type: ignore[attr-defined]
    assert stream.active_watches == 1  # lingering
    again = asyncio.create_task(collect(fo.follow("s", 3), 1))
    await asyncio.sleep(0.1)
    stream.publish()
    assert await asyncio.wait_for(again, 2) == [3]
    assert stream.watches == 1  # the lingering feed was reused
    await asyncio.sleep(0.2)
    assert stream.active_watches == 0 and not fo.feeds
    # A closed session: the follower gets what is left, then its iterator ends.
    stream.end()
    assert [i.offset async for i in fo.follow("s", 2)] == [2, 3]


async def _take(it: AsyncIterator[StreamItem], n: int) -> AsyncIterator[StreamItem]:
    for _ in range(n):
        yield await anext(it)


async def test_a_failed_upstream_is_rejoined_and_nothing_is_lost() -> None:
    """Review R F-R5: one failed long poll of the shared subscription (the server refused an
    update under load) ended every follower mid-stream, with a traceback."""
    import clients.gateway.fanout as fanout_module

    stream = FakeStream()
    failing = {"left": 1}
    real_watch = stream.watch

    async def flaky(key: str, start: int) -> AsyncIterator[StreamItem]:
        async for item in real_watch(key, start):
            if failing["left"] and item.offset == 5:
                failing["left"] -= 1
                raise RuntimeError("UnprocessedUpdate")
            yield item

    fo = Fanout(flaky, stream.read, stream.end_offset)  # type: ignore[arg-type]
    fanout_module.RETRY_SECONDS, saved = 0.01, fanout_module.RETRY_SECONDS
    try:
        follower = asyncio.create_task(collect(fo.follow("s", 0), 12))
        await asyncio.sleep(0.01)
        stream.publish(12)
        assert await asyncio.wait_for(follower, 2) == list(range(12))
    finally:
        fanout_module.RETRY_SECONDS = saved
        await fo.close()


async def test_a_feed_that_keeps_failing_ends_with_where_to_resume() -> None:
    from clients.gateway.fanout import FeedFailed
    from clients.gateway.sse import session_events

    async def items() -> AsyncIterator[StreamItem]:
        yield StreamItem(7, event(7))
        raise FeedFailed()

    out = [ev async for ev in session_events("s", items(), 7)]
    assert out[-1].event == "interrupted" and "Last-Event-ID: 7" in str(out[-1].data)
