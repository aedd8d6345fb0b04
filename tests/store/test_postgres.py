"""What only the PostgreSQL backend has to show: several hosts migrating at once, a connection
lost in the middle of an append, a server restart under a store in use."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from agentlane.transcript import Role, TranscriptEntry
from store import migrations
from store.postgres import APPEND_LOCK, PostgresStore, open_postgres, redact, split_pool_options
from tests.postgres_cluster import PostgresCluster, database_for


def user(entry_id: str) -> TranscriptEntry:
    return TranscriptEntry(id=entry_id, role=Role.USER, ts=1.0, text=entry_id)


@pytest.fixture
async def url(postgres: PostgresCluster, tmp_path: Path) -> AsyncIterator[str]:
    yield database_for(postgres, str(tmp_path))


async def test_hosts_migrating_at_once_apply_each_migration_once(url: str) -> None:
    stores = [PostgresStore(url) for _ in range(4)]
    try:
        for store in stores:
            await store.open()
        versions = await asyncio.gather(*(s.migrate() for s in stores))
        latest = migrations.latest("postgres")
        assert versions == [latest] * 4
        async with await psycopg.AsyncConnection.connect(url) as conn:
            cur = await conn.execute("SELECT version FROM schema_migrations ORDER BY version")
            assert [r[0] for r in await cur.fetchall()] == list(range(1, latest + 1))
        # `agentlane db migrate` again: nothing to do.
        assert await stores[0].migrate() == latest
    finally:
        for store in stores:
            await store.close()


async def test_a_connection_lost_mid_append_writes_nothing_and_raises(url: str) -> None:
    store = await open_postgres(url)
    try:
        await store.append_entries("s", [user("a")])
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as admin:
            # Hold the session's append lock, so the next append stops inside its transaction.
            await admin.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", (APPEND_LOCK, "s"))
            append = asyncio.create_task(store.append_entries("s", [user("b"), user("c")]))
            for _ in range(200):
                cur = await admin.execute(
                    "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND datname = current_database()"
                )
                waiting = [r[0] for r in await cur.fetchall()]
                if waiting:
                    break
                await asyncio.sleep(0.05)
            assert len(waiting) == 1
            await admin.execute("SELECT pg_terminate_backend(%s)", (waiting[0],))
            with pytest.raises(psycopg.OperationalError):
                await append
            await admin.execute("SELECT pg_advisory_unlock_all()")
        assert [e.id for _, e in await store.entries_after("s")] == ["a"]
        # The retry (Temporal's, of the activity) writes the batch, once.
        assert [e.id for e in await store.append_entries("s", [user("b"), user("c")])] == [
            "b",
            "c",
        ]
        assert await store.append_entries("s", [user("b"), user("c")]) == []
        assert [e.id for _, e in await store.entries_after("s")] == ["a", "b", "c"]
    finally:
        await store.close()


async def test_a_server_restart_costs_the_next_call_nothing(
    postgres: PostgresCluster, url: str
) -> None:
    store = await open_postgres(url + "?pool_min=3&pool_max=3")
    try:
        # Fill the pool: three connections in use at once.
        await asyncio.gather(*(store.append_entries(f"k{i}", [user("a")]) for i in range(3)))
        postgres.restart()
        # Every idle connection died with the server; the calls get fresh ones.
        assert (
            await asyncio.gather(*(store.session_keys() for _ in range(3)))
            == [["k0", "k1", "k2"]] * 3
        )
        assert [e.id for e in await store.append_entries("k0", [user("b")])] == ["b"]
    finally:
        await store.close()


async def test_an_unreachable_server_is_a_clear_error() -> None:
    from store.interface import StoreError

    with pytest.raises(StoreError, match="cannot reach PostgreSQL at postgresql://u:\\*\\*\\*@"):
        await open_postgres("postgresql://u:hunter2@127.0.0.1:1/db?connect_timeout=1")


def test_url_options() -> None:
    assert redact("postgresql://u:pw@h:5/db") == "postgresql://u:***@h:5/db"
    assert redact("postgresql://u@h/db") == "postgresql://u@h/db"
    conninfo, low, high = split_pool_options("postgresql://h/db?sslmode=require&pool_max=4")
    assert (low, high) == (1, 4)
    assert "pool_max" not in conninfo and "sslmode=require" in conninfo
    assert "connect_timeout=10" in conninfo


async def test_a_write_after_a_cancelled_transaction_is_not_lost(url: str) -> None:
    # A transaction cancelled mid-pipeline (an activity cancelled by an abort or a timeout)
    # must not hand its connection back in pipeline mode: a write made on it next was only
    # queued, reported success and was lost with the connection.
    import random
    import uuid

    store = PostgresStore(f"{url}{'&' if '?' in url else '?'}pool_min=1&pool_max=1")
    await store.open()
    await store.migrate()

    async def slow(tx: Any) -> int:
        await tx.fetch_batch([("SELECT pg_sleep(0.05)", ()), ("SELECT 1", ())])
        await tx.execute("SELECT pg_sleep(0.05)")
        return 1

    rng = random.Random(7)
    written: list[str] = []
    try:
        for _ in range(200):
            cut = asyncio.create_task(store._session(slow, tx=True))
            await asyncio.sleep(rng.uniform(0.0, 0.12))
            cut.cancel()
            with contextlib.suppress(BaseException):
                await cut
            chain = uuid.uuid4().hex
            await store.set_run_workspace("cancelled", chain, "w")
            written.append(chain)
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as admin:
            cur = await admin.execute(
                "SELECT run_chain FROM run_workspaces WHERE session_key = 'cancelled'"
            )
            stored = {r[0] for r in await cur.fetchall()}
        assert set(written) <= stored, f"{len(set(written) - stored)} writes lost"
    finally:
        await store.close()
