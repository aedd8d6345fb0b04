"""A dict that keeps only its most recently used entries, for the worker's per-session caches.

A worker runs for months and sees sessions come and go: a cache keyed by session (or run) that
is never trimmed grows with every session the process ever served. What falls out is rebuilt
from the store on the next use, so a bound costs a re-read, never correctness.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar, overload

K = TypeVar("K")
V = TypeVar("V")
D = TypeVar("D")


class BoundedCache(Generic[K, V]):
    """`get`, `[]`, `[]=`, `pop`, `in`, `len` of a dict; past `size` entries the least recently
    used goes. Safe across threads (activities read the stores from `asyncio.to_thread`)."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"a cache needs room for at least one entry, not {size}")
        self.size = size
        self._items: OrderedDict[K, V] = OrderedDict()
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
            return value

    def __getitem__(self, key: K) -> V:
        with self._lock:
            value = self._items[key]
            self._items.move_to_end(key)
            return value

    def __setitem__(self, key: K, value: V) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    @overload
    def pop(self, key: K) -> V | None: ...
    @overload
    def pop(self, key: K, default: D) -> V | D: ...
    def pop(self, key: K, default: object = None) -> object:
        with self._lock:
            return self._items.pop(key, default)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._items

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def trim_weight(self, limit: int, weight: Callable[[V], int]) -> int:
        """Drop the least recently used entries until their total `weight` is at most `limit`
        (for values that grow in place, so a count alone bounds nothing); the most recent entry
        always stays. Returns how many were dropped."""
        with self._lock:
            total = sum(weight(v) for v in self._items.values())
            dropped = 0
            while total > limit and len(self._items) > 1:
                _, value = self._items.popitem(last=False)
                total -= weight(value)
                dropped += 1
            return dropped

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
