"""Clients under other identities, made on first use and kept (issue 25: who acted).

Temporal records the identity of the client that sent each signal, update or start, and the SDK
keeps one identity per connection. The gateway acts as `gateway token <name>` and a schedule's
firing as `schedule <id>`: one connection each, made when first needed, the least recently used
dropped past `size` (a dropped one is simply made again).
"""

from __future__ import annotations

import asyncio

from activities.bounded_cache import BoundedCache
from clients.api import AgentlaneClient


class ClientsByIdentity:
    def __init__(self, base: AgentlaneClient, size: int = 32) -> None:
        self.base = base
        self._clients: BoundedCache[str, AgentlaneClient] = BoundedCache(size)
        self._lock = asyncio.Lock()

    async def __call__(self, identity: str) -> AgentlaneClient:
        client = self._clients.get(identity)
        if client is not None:
            return client
        async with self._lock:
            client = self._clients.get(identity)
            if client is None:
                client = await self.base.with_identity(identity)
                self._clients[identity] = client
            return client
