"""Reuses SDK clients across model calls: building one (and its HTTP connection pool) costs about
20 ms, paid on every call otherwise. Keyed by the event loop too, because an HTTP client belongs
to the loop it was made on."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, Protocol, TypeVar


class _Closable(Protocol):
    async def close(self) -> None: ...


C = TypeVar("C", bound=_Closable)


class ClientCache(Generic[C]):
    def __init__(self, size: int = 8) -> None:
        self._size = size
        self._clients: OrderedDict[tuple[int, Hashable], C] = OrderedDict()
        self._closing: set[asyncio.Task[None]] = set()

    def get(self, key: Hashable, build: Callable[[], C]) -> C:
        full = (id(asyncio.get_running_loop()), key)
        client = self._clients.get(full)
        if client is None:
            client = self._clients[full] = build()
        self._clients.move_to_end(full)
        while len(self._clients) > self._size:
            _, old = self._clients.popitem(last=False)
            task = asyncio.get_running_loop().create_task(old.close())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
        return client
