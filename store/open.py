"""`open_store(settings)`: the backend `AGENTLANE_DATABASE_URL` names, opened and migrated.

- unset, or `sqlite:///PATH`: the embedded store (`<data dir>/agentlane.db` when unset);
- `postgresql://…` (or `postgres://…`): PostgreSQL (`store/postgres.py`), for many hosts.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from agentlane.encryption import codec_from_env
from agentlane.settings import Settings
from store.embedded import EmbeddedStore
from store.interface import Store, StoreError
from store.sealing import Sealer

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def sealer_for(settings: Settings) -> Sealer:
    return Sealer(codec_from_env(settings.encryption_env()))


def describe(settings: Settings) -> str:
    """Where the store is, for logs and errors (never a password)."""
    url = settings.database_url
    if not url:
        return str(settings.data_dir / "agentlane.db")
    if url.startswith(POSTGRES_SCHEMES):
        scheme, _, rest = url.partition("://")
        return f"{scheme}://{rest.rpartition('@')[2]}"
    return url


async def open_store(settings: Settings) -> Store:
    url = settings.database_url
    sealer = sealer_for(settings)
    if url and url.startswith(POSTGRES_SCHEMES):
        try:
            from store.postgres import open_postgres  # type: ignore[import-not-found,unused-ignore]
        except ImportError as err:
            raise StoreError(
                f"AGENTLANE_DATABASE_URL names PostgreSQL but its backend cannot load: {err}"
            ) from err
        store: Store = await open_postgres(url, sealer)
        return store
    if url and not url.startswith("sqlite:///"):
        raise StoreError(
            f"AGENTLANE_DATABASE_URL={describe(settings)!r}: expected postgresql://… or "
            "sqlite:///PATH (unset: the embedded store in the data dir)"
        )
    path = Path(url.removeprefix("sqlite://")) if url else None
    embedded = (
        EmbeddedStore(path, sealer)
        if path
        else EmbeddedStore.in_data_dir(settings.data_dir, sealer)
    )
    await embedded.migrate()
    return embedded


_shared: dict[tuple[str, int], asyncio.Task[Store]] = {}


async def shared_store(settings: Settings) -> Store:
    """This process's one store for `settings` (per event loop): activities, the payload driver
    and the gateway share it, and so one connection pool."""
    place = (describe(settings), id(asyncio.get_running_loop()))
    task = _shared.get(place)
    if task is None or (task.done() and task.exception() is not None):
        task = _shared[place] = asyncio.ensure_future(open_store(settings))
    return await asyncio.shield(task)


async def close_shared() -> None:
    loop = id(asyncio.get_running_loop())
    for place in [p for p in _shared if p[1] == loop]:
        task = _shared.pop(place)
        if task.done() and task.exception() is None:
            await task.result().close()
