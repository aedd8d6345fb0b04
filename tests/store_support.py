"""Tests that set or read the shared profile state (what `auth-state.json` held before the
store) of a deployment's data dir, as one JSON-shaped dict: usage, last_good, order."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from agentlane.settings import Settings
from store.interface import Store
from store.sync import run_sync


def _settings(data_dir: Path) -> Settings:
    return Settings(data_dir=data_dir, database_url=os.environ.get("AGENTLANE_DATABASE_URL"))


def clear_profile_state(data_dir: Path) -> None:
    async def clear(store: Store) -> None:
        await store.reset_profile_state()

    run_sync(_settings(data_dir), clear)


def write_profile_state(data_dir: Path, state: dict[str, Any]) -> None:
    """Replace the shared state with `state` (the old file's shape)."""

    async def write(store: Store) -> None:
        await store.reset_profile_state()
        for pid, usage in state.get("usage", {}).items():
            await store.set_usage(pid, None, json.dumps(usage))
        for provider, pid in state.get("last_good", {}).items():
            row = await store.usage_row(pid)
            if row is None:
                await store.set_usage(pid, None, "{}", last_good_for=provider)
            else:
                await store.set_usage(pid, row.version, row.usage, last_good_for=provider)
        for provider, order in state.get("order", {}).items():
            await store.set_profile_order(provider, list(order))

    run_sync(_settings(data_dir), write)


def read_profile_state(data_dir: Path) -> dict[str, Any]:
    async def read(store: Store) -> dict[str, Any]:
        return {
            "usage": {r.profile_id: json.loads(r.usage) for r in await store.usage_rows()},
            "last_good": await store.last_good(),
            "order": await store.profile_orders(),
        }

    return run_sync(_settings(data_dir), read)
