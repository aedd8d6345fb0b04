"""The contract tests run once per backend in `BACKENDS` (store-pg adds PostgreSQL)."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from agentlane.encryption import EncryptionCodec
from store.embedded import EmbeddedStore
from store.interface import Store
from store.sealing import Sealer
from tests.postgres_cluster import database_for, shared_cluster, unavailable_reason

Factory = Callable[[Path, Sealer], Awaitable[Store]]


async def _sqlite(tmp: Path, sealer: Sealer) -> Store:
    store = EmbeddedStore.in_data_dir(tmp, sealer)
    await store.migrate()
    return store


async def _postgresql(tmp: Path, sealer: Sealer) -> Store:
    """A database of the test run's PostgreSQL server, one per test (named after its tmp
    folder, so a second store for the same test shares it)."""
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    from store.postgres import open_postgres

    return await open_postgres(database_for(shared_cluster(), str(tmp)), sealer)


BACKENDS: dict[str, Factory] = {"sqlite": _sqlite, "postgresql": _postgresql}


async def _sqlite_unmigrated(tmp: Path, sealer: Sealer) -> Store:
    return EmbeddedStore(tmp / "agentlane.db", sealer, self_migrate=False)


async def _postgresql_unmigrated(tmp: Path, sealer: Sealer) -> Store:
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    from store.postgres import PostgresStore

    store = PostgresStore(database_for(shared_cluster(), str(tmp)), sealer)
    await store.open()
    return store


# The same backends with an empty schema, left alone until `migrate(up_to=...)`: a test of
# one migration starts from the schema before it.
UNMIGRATED: dict[str, Factory] = {
    "sqlite": _sqlite_unmigrated,
    "postgresql": _postgresql_unmigrated,
}


def a_codec() -> EncryptionCodec:
    return EncryptionCodec({"k1": base64.b64decode(base64.b64encode(b"k" * 32))}, "k1")


@pytest.fixture(params=sorted(BACKENDS))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    made = await BACKENDS[request.param](tmp_path, Sealer(None))
    yield made
    await made.close()


@pytest.fixture(params=sorted(BACKENDS))
async def sealed_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    made = await BACKENDS[request.param](tmp_path, Sealer(a_codec()))
    yield made
    await made.close()


@pytest.fixture(params=sorted(BACKENDS))
def backend_factory(request: pytest.FixtureRequest) -> Factory:
    return BACKENDS[request.param]


@pytest.fixture(params=sorted(UNMIGRATED))
async def unmigrated_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    made = await UNMIGRATED[request.param](tmp_path, Sealer(None))
    yield made
    await made.close()
