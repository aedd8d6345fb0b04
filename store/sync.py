"""The store from synchronous code (the CLI's commands, a test's setup): each call opens the
store, runs one async operation and closes it, on a thread of its own when the caller's thread
already runs an event loop. Never on a hot path: activities and the gateway use the async
store they hold."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from agentlane.settings import Settings
from store.interface import Store
from store.open import open_store

T = TypeVar("T")


def run_sync(settings: Settings, op: Callable[[Store], Awaitable[T]]) -> T:
    async def go() -> T:
        store = await open_store(settings)
        try:
            return await op(store)
        finally:
            await store.close()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(go())
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentlane-store-sync") as pool:
        return pool.submit(asyncio.run, go()).result()
