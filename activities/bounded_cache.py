"""A dict that keeps only its most recently used entries, for the worker's per-session caches.

A worker runs for months and sees sessions come and go: a cache keyed by session (or run) that
is never trimmed grows with every session the process ever served. What falls out is rebuilt
from the store on the next use, so a bound costs a re-read, never correctness.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar, overload

K = TypeVar("K")
V = TypeVar("V")
D = TypeVar("D")


class BoundedCache(Generic[K, V]):
    """`get`, `[]`, `[]=`, `pop`, `in`, `len` of a dict; past `size` entries the least recently
    used goes. Safe across threads (activities read the stores from `asyncio.to_thread`)."""

    def __init__(self, size: int, clock: Callable[[], float] = time.monotonic) -> None:
        if size < 1:
            raise ValueError(f"a cache needs room for at least one entry, not {size}")
        self.size = size
        self._items: OrderedDict[K, V] = OrderedDict()
        # When each entry was last used (`trim_active` keeps those used recently).
        self._used: dict[K, float] = {}
        # Kept past a weight budget for their next uses only (`trim_active`).
        self._probation: set[K] = set()
        # Each entry's weight when last measured, their sum, and the entries used since (a
        # value grows in place only through a use): a trim weighs those again, not every entry.
        self._weights: dict[K, int] = {}
        self._total = 0
        self._unweighed: set[K] = set()
        self._clock = clock
        self._lock = threading.Lock()

    @overload
    def get(self, key: K) -> V | None: ...
    @overload
    def get(self, key: K, default: D) -> V | D: ...
    def get(self, key: K, default: object = None) -> object:
        with self._lock:
            try:
                value = self._items[key]
            except KeyError:
                return default
            self._items.move_to_end(key)
            self._used[key] = self._clock()
            self._unweighed.add(key)
            return value

    def __getitem__(self, key: K) -> V:
        with self._lock:
            value = self._items[key]
            self._items.move_to_end(key)
            self._used[key] = self._clock()
            self._unweighed.add(key)
            return value

    def __setitem__(self, key: K, value: V) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            self._used[key] = self._clock()
            self._unweighed.add(key)
            while len(self._items) > self.size:
                self._forget(next(iter(self._items)))

    @overload
    def pop(self, key: K) -> V | None: ...
    @overload
    def pop(self, key: K, default: D) -> V | D: ...
    def pop(self, key: K, default: object = None) -> object:
        with self._lock:
            if key not in self._items:
                return default
            return self._forget(key)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._items

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def _forget(self, key: K) -> V:
        self._used.pop(key, None)
        self._probation.discard(key)
        self._unweighed.discard(key)
        self._total -= self._weights.pop(key, 0)
        return self._items.pop(key)

    def _weigh(self, weight: Callable[[V], int]) -> int:
        """The total weight, measuring again only the entries used since the last trim."""
        for key in self._unweighed:
            if key in self._items:
                now = weight(self._items[key])
                self._total += now - self._weights.get(key, 0)
                self._weights[key] = now
        self._unweighed.clear()
        return self._total

    def trim_weight(self, limit: int, weight: Callable[[V], int]) -> int:
        """Drop the least recently used entries until their total `weight` is at most `limit`
        (for values that grow in place, so a count alone bounds nothing); the most recent entry
        always stays. Returns how many were dropped. `weight` is the same at every trim: an
        entry is weighed again only once used (`get`, `[]`, `[]=`) since the last one."""
        with self._lock:
            dropped = 0
            while self._weigh(weight) > limit and len(self._items) > 1:
                self._forget(next(iter(self._items)))
                dropped += 1
            return dropped

    def trim_active(
        self,
        limit: int,
        weight: Callable[[V], int],
        *,
        idle_after: float,
        current: K,
        newcomer: bool,
    ) -> list[K]:
        """Bring the total `weight` to at most `limit` without thrashing, `current` just used
        (`newcomer`: just added by a miss); return the keys that went.

        Plain LRU over a working set larger than the budget, used round robin, misses on every
        access (each newcomer pushes out the next one needed). Instead, in this order:

        1. entries idle for more than `idle_after` seconds go, least recently used first;
        2. then entries on probation (newcomers admitted past the budget) other than `current`;
        3. if still over and `current` is a newcomer (or on probation), it stays on probation:
           kept for its next uses until another newcomer needs the room, so the active working
           set stays whole and only the newcomers are rebuilt (the total may pass `limit` by one
           entry, the one in use);
        4. if still over (active entries grew past the budget), the least recently used go,
           `current` always stays.
        """
        with self._lock:
            gone: list[K] = []
            if self._weigh(weight) <= limit:
                self._probation.clear()  # all fit: none is on probation any more
                return gone

            def drop_while_over(keys: list[K]) -> None:
                for key in keys:
                    if self._total <= limit:
                        return
                    if key != current and key in self._items:
                        self._forget(key)
                        gone.append(key)

            cutoff = self._clock() - idle_after
            drop_while_over([k for k in self._items if self._used.get(k, cutoff) < cutoff])
            drop_while_over([k for k in self._items if k in self._probation])
            if self._total > limit and (newcomer or current in self._probation):
                self._probation.add(current)
                return gone
            drop_while_over(list(self._items))
            if self._total <= limit:
                self._probation.clear()
            return gone

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._used.clear()
            self._probation.clear()
            self._weights.clear()
            self._unweighed.clear()
            self._total = 0
