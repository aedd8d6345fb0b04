"""One upstream subscription per session, shared by every SSE connection that follows it.

Without this, each SSE connection runs its own `AgentlaneClient.watch`: its own long-poll
updates on the session's events workflow, each of which lands in that workflow's history. A
session followed by 500 browsers would carry 500 pollers. Here a gateway process keeps one
`SessionFeed` per session: one `watch` from the stream's live end, whose items are handed to
every follower's own bounded queue (appending never waits, so a slow follower holds nobody
back).

A follower that starts at an older offset (`Last-Event-ID`, `?from=`) joins the feed at once,
so live items queue up for it from the feed's head `H` (the next offset the feed delivers) on,
and meanwhile reads `[start, H)` with the stream's poll *query* (`AgentlaneClient.read_events`:
no history on any workflow). Then it goes on with its queue, which starts exactly at `H`; items
are deduplicated by offset, so nothing is lost or repeated at the seam. Joining happens without
an `await` between reading `H` and registering, and the feed updates `H` and dispatches an item
without one either, so the two cannot interleave.

What `watch` guarantees, the feed inherits: it resumes at its own next offset after a server
restart and follows the stream's continue-as-new. When the stream ends (the session was closed)
every follower drains its queue and ends (`closed`). A follower whose queue overflows
(`Settings.gateway_fanout_queue` items: a slow reader, or a burst larger than that arriving in
one upstream batch before any follower could run) is dropped from the feed and its queue freed;
it then reads what it missed by query and joins again, like a follower starting at an older
offset, so memory stays bounded and nobody is cut off. The feed stops a few
seconds (`LINGER_SECONDS`) after its last follower leaves, so a reconnecting client finds it
still running.

Offsets a follower asks for that lie past the feed's head: either the feed has not received
them yet (the follower asked for the live end a moment before the feed saw it: it waits for
them, skipping the ones before), or no stream ever gave them out (a reopened session's stream
goes on from the old one's end, so they are bogus; the gateway refuses them when it can ask):
the follower waits at the live end and the SSE layer says so. A query of the stream's end tells
which.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable

from clients.api import StreamItem

log = logging.getLogger(__name__)

LINGER_SECONDS = 5.0
RETRY_SECONDS = 1.0
# How many times in a row a follower rejoins after its feed failed before it gives up.
FEED_RETRIES = 5

# (key, from_offset) -> items from there on, following restarts and continue-as-new.
Watch = Callable[[str, int], AsyncIterator[StreamItem]]
# (key, from_offset, until) -> retained items in [from_offset, until), read by query.
Read = Callable[[str, int, int], AsyncIterator[StreamItem]]
# key -> the stream's current end offset (0 when it does not exist yet).
EndOffset = Callable[[str], Awaitable[int]]


class Lagging(Exception):
    """The follower fell more than its queue's size behind and was dropped from the feed."""


class FeedFailed(Exception):
    """The upstream subscription failed; the client should reconnect with Last-Event-ID."""


class Subscription:
    """One follower's place in a feed: a bounded queue of live items."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.items: deque[StreamItem] = deque()
        self.wakeup = asyncio.Event()
        self.ended: str | None = None  # "closed", "lagging" or "failed"
        self.joined_at = 0  # the feed's head when this follower joined

    def push(self, item: StreamItem) -> bool:
        """Queue a live item; False (and the queue dropped) when it is full."""
        if len(self.items) >= self.limit:
            self.end("lagging")
            self.items.clear()
            return False
        self.items.append(item)
        self.wakeup.set()
        return True

    def end(self, reason: str) -> None:
        if self.ended is None:
            self.ended = reason
        self.wakeup.set()

    async def next(self) -> StreamItem | None:
        """The next queued item; None once the queue is empty and the feed ended for us."""
        while True:
            if self.ended == "lagging":
                raise Lagging()
            if self.items:
                return self.items.popleft()
            if self.ended == "failed":
                raise FeedFailed()
            if self.ended is not None:
                return None
            self.wakeup.clear()
            await self.wakeup.wait()


class SessionFeed:
    """The one upstream `watch` of a session in this process, and its followers."""

    def __init__(self, fanout: Fanout, key: str) -> None:
        self.fanout = fanout
        self.key = key
        self.head: int | None = None  # the next offset the upstream delivers
        self.subs: set[Subscription] = set()
        self.waiting = 0  # followers not yet joined (waiting for the head)
        self.ready = asyncio.Event()
        self.done = False
        self.reason = "closed"
        self.items_received = 0
        self._linger: asyncio.TimerHandle | None = None
        self.task = asyncio.get_running_loop().create_task(self._run(), name=f"feed {key}")

    async def _run(self) -> None:
        reason = "closed"
        try:
            while True:
                try:
                    head = await self.fanout.end_offset(self.key)
                    break
                except Exception as err:  # e.g. no worker yet: keep trying while followed
                    log.warning("feed %s: cannot read the stream's end: %s", self.key, err)
                    await asyncio.sleep(RETRY_SECONDS)
            self.head = head
            self.ready.set()
            async for item in self.fanout.watch(self.key, head):
                self.head = item.offset + 1
                self.items_received += 1
                for sub in list(self.subs):
                    if not sub.push(item):
                        self.subs.discard(sub)
                        self.fanout.lagged += 1
                        self._maybe_linger()
        except asyncio.CancelledError:
            reason = "failed"  # stopped idle (no followers) or at shutdown: they reconnect
            raise
        except Exception:
            log.exception("feed %s failed", self.key)
            reason = "failed"
        finally:
            self.done = True
            self.reason = reason
            self.fanout._forget(self)
            for sub in self.subs:
                sub.end(reason)
            self.subs.clear()
            self.ready.set()

    def join(self, sub: Subscription) -> None:
        """Register `sub` at the current head (no await: no item can slip in between). A feed
        that already ended (the stream ended: a closed session) leaves `sub` to read what is
        there by query up to the head, then end as the feed did."""
        sub.joined_at = self.head or 0
        if self.done:
            sub.end(self.reason)
        else:
            self.subs.add(sub)

    def hold(self) -> None:
        self.waiting += 1
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None

    def release(self) -> None:
        self.waiting -= 1
        self._maybe_linger()

    def leave(self, sub: Subscription) -> None:
        self.subs.discard(sub)
        self._maybe_linger()

    def _maybe_linger(self) -> None:
        if self.subs or self.waiting or self.done or self._linger is not None:
            return
        self._linger = asyncio.get_running_loop().call_later(
            self.fanout.linger_seconds, self._stop_if_idle
        )

    def _stop_if_idle(self) -> None:
        self._linger = None
        if self.subs or self.waiting or self.done:
            return
        self.fanout._forget(self)
        self.task.cancel()


class Fanout:
    """The feeds of one gateway process, by session key."""

    def __init__(
        self,
        watch: Watch,
        read: Read,
        end_offset: EndOffset,
        queue_limit: int = 1000,
        linger_seconds: float = LINGER_SECONDS,
    ) -> None:
        self.watch = watch
        self.read = read
        self.end_offset = end_offset
        self.queue_limit = queue_limit
        self.linger_seconds = linger_seconds
        self.feeds: dict[str, SessionFeed] = {}
        self.lagged = 0  # queues that overflowed so far
        self.caught_up = 0  # followers that then read what they missed by query

    def _forget(self, feed: SessionFeed) -> None:
        if self.feeds.get(feed.key) is feed:
            del self.feeds[feed.key]

    def _feed(self, key: str) -> SessionFeed:
        feed = self.feeds.get(key)
        if feed is None or feed.done:
            feed = SessionFeed(self, key)
            self.feeds[key] = feed
        return feed

    async def follow(self, key: str, start: int) -> AsyncIterator[StreamItem]:
        """The session's items from offset `start` on, like `AgentlaneClient.watch`. A follower
        whose queue overflows (a burst larger than the queue, or a slow reader) is not cut off:
        it reads what it missed by query, as a reconnect with Last-Event-ID would, and joins the
        feed again (the stream's own bounds still apply: what it no longer holds is a gap)."""
        pos = start
        joined_before = False
        failures = 0  # upstream failures in a row, with no item delivered between them
        while True:
            sub = Subscription(self.queue_limit)
            feed = self._feed(key)
            feed.hold()
            try:
                await feed.ready.wait()
                feed.join(sub)
            finally:
                feed.release()
            try:
                head = sub.joined_at
                if not joined_before and start > head and start > await self.end_offset(key):
                    pos = (
                        head  # past the stream's end: wait at the live end (the SSE layer says so)
                    )
                joined_before = True
                if pos < head:
                    async for item in self.read(key, pos, head):
                        if item.offset < pos:
                            continue
                        yield item
                        pos = item.offset + 1
                while True:
                    got = await sub.next()
                    if got is None:
                        return
                    if got.offset < pos:
                        continue  # already delivered
                    yield got
                    pos = got.offset + 1
                    failures = 0
            except Lagging:
                self.caught_up += 1
                continue  # join again, reading [pos, the new head) by query first
            except FeedFailed:
                # The shared upstream failed (a long poll the server refused under load): the
                # next follower makes a new one. Followers rejoin it where they were; only a
                # feed that keeps failing ends them (the SSE layer says where to resume).
                failures += 1
                if failures > FEED_RETRIES:
                    raise
                await asyncio.sleep(RETRY_SECONDS * failures)
                continue
            finally:
                feed.leave(sub)

    async def close(self) -> None:
        feeds = list(self.feeds.values())
        self.feeds.clear()
        for feed in feeds:
            feed.task.cancel()
        for feed in feeds:
            try:
                await feed.task
            except (asyncio.CancelledError, Exception):
                pass
