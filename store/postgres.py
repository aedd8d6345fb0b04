"""The PostgreSQL store: every host of a deployment on one database, chosen by
`AGENTLANE_DATABASE_URL=postgresql://user:pass@host:5432/db`.

psycopg 3, async, through one `psycopg_pool.AsyncConnectionPool` per store object. Every
operation is `store/sql_core.py`'s; this module is the connection. How each rule of the
interface holds across hosts:

- Appends: each is one transaction that first takes a transaction-scoped advisory lock on the
  session key, so two hosts appending to one session take turns for the next `seq` (other
  sessions never wait). The unique keys (entry id; one result per tool call) decide what is
  written (`ON CONFLICT DO NOTHING`, every insert checked); the read under the lock only numbers
  the new entries and fills in default parents. Three round trips for a batch.
- Cooldowns and other shared profile usage: `UPDATE … WHERE version = expected`, one row.
- Every multi-row change is one transaction.
- A lost connection (server restarted, network cut) raises `psycopg.OperationalError` out of the
  call: the activity fails and Temporal retries it, and the server has rolled back whatever the
  transaction had not committed. A pooled connection is checked before use (a look at its
  socket, no round trip), so after a server restart the next call gets a fresh connection
  instead of a dead one.
- Migrations (`store/migrations/postgres/`) run in one transaction under an advisory lock: two
  hosts starting (or running `agentlane db migrate`) at once apply each one once.

URL query options read here (and removed before the URL reaches libpq): `pool_min` (default 1)
and `pool_max` (default 10) connections per process. Every other libpq option (`sslmode`,
`connect_timeout`, `application_name`, …) passes through.
"""

from __future__ import annotations

import functools
import select
import time
import weakref
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import AsyncConnection, AsyncPipeline, pq
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from store.interface import StoreError
from store.sealing import Sealer
from store.sql_core import Body, Row, SqlStore, Statement, Tx

# Advisory lock keys (one namespace per use, so they never meet).
MIGRATION_LOCK = 0x61676C6D  # "aglm"
APPEND_LOCK = 0x61676C61  # "agla": pg_advisory_xact_lock(APPEND_LOCK, hashtext(session key))

# A pooled connection idle longer than this is pinged before it is lent again (a cut network
# path sends nothing); sooner than that, only if the server has sent it something.
PING_AFTER_IDLE_S = 30.0

T = TypeVar("T")
Conn = AsyncConnection[tuple[Any, ...]]


def redact(url: str) -> str:
    """The URL without its password, for logs, errors and `db status`."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def split_pool_options(url: str) -> tuple[str, int, int]:
    """(libpq URL, pool min, pool max): the pool options are ours, libpq would refuse them."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    options = dict(query)
    try:
        pool_min = int(options.get("pool_min", "1"))
        pool_max = int(options.get("pool_max", "10"))
    except ValueError as err:
        raise StoreError(f"{redact(url)}: pool_min / pool_max must be integers") from err
    if not 0 <= pool_min <= pool_max or pool_max < 1:
        raise StoreError(f"{redact(url)}: need 0 <= pool_min <= pool_max, pool_max >= 1")
    rest = [(k, v) for k, v in query if k not in ("pool_min", "pool_max")]
    if not any(k == "connect_timeout" for k, _ in rest):
        rest.append(("connect_timeout", "10"))
    return urlunsplit(parts._replace(query=urlencode(rest))), pool_min, pool_max


# When each pooled connection was last handed back (weak: a connection the pool drops goes).
_idle_since: weakref.WeakKeyDictionary[Conn, float] = weakref.WeakKeyDictionary()


def _left_mid_statement(conn: Conn) -> bool:
    """A connection a cancelled transaction gave back still in pipeline mode or inside a
    transaction: a statement run on it later would only be queued (pipeline mode), report
    success and be lost with the connection."""
    pgconn = conn.pgconn
    return (
        pgconn.pipeline_status != pq.PipelineStatus.OFF
        or pgconn.transaction_status != pq.TransactionStatus.IDLE
    )


async def _reset(conn: Conn) -> None:
    if _left_mid_statement(conn):
        # The pool discards a connection whose reset fails.
        raise psycopg.InterfaceError("connection returned mid-statement: discarded")
    _idle_since[conn] = time.monotonic()


def _has_unread(conn: Conn) -> bool:
    """An idle connection (autocommit, no LISTEN) is sent nothing, unless the server is
    ending it: a restart or crash leaves a termination message or EOF on its socket."""
    try:
        poller = select.poll()  # not select(): a busy worker's descriptors pass 1024
        poller.register(conn.fileno(), select.POLLIN | select.POLLERR | select.POLLHUP)
        return bool(poller.poll(0))
    except (OSError, ValueError, psycopg.Error):
        return True


async def _usable(conn: Conn) -> bool:
    """Whether a connection just taken from the pool can be used: one the server has sent
    something while idle (a restart or crash leaves a termination message or EOF there), or
    that sat idle long, is pinged first. A connection in steady use costs no round trip."""
    if conn.closed or conn.broken or _left_mid_statement(conn):
        return False
    since = _idle_since.get(conn)
    if since is not None and time.monotonic() - since < PING_AFTER_IDLE_S and not _has_unread(conn):
        return True
    try:
        await conn.execute("SELECT 1")
    except psycopg.Error:
        return False
    return True


@functools.lru_cache(maxsize=512)
def _query(sql: str) -> bytes:
    """The core's `?` placeholders in psycopg's style (no `%` or `?` appears otherwise)."""
    return sql.replace("?", "%s").encode()


class PgTx(Tx):
    """Statements on one pooled connection; in a transaction, in pipeline mode, so what can be
    sent together (BEGIN with the first statement, a batch of reads or inserts) is one round
    trip."""

    def __init__(self, conn: Conn, pipeline: AsyncPipeline | None) -> None:
        self.conn = conn
        self.pipeline = pipeline

    async def _sync(self) -> None:
        if self.pipeline is not None:
            await self.pipeline.sync()

    async def execute(self, sql: str, args: Sequence[Any] | None = None) -> int:
        if args is None:
            cur = await self.conn.execute(sql.encode())
        else:
            cur = await self.conn.execute(_query(sql), args)
        await self._sync()
        return cur.rowcount

    async def fetch(self, sql: str, args: Sequence[Any] = ()) -> list[Row]:
        cur = await self.conn.execute(_query(sql), args)
        await self._sync()
        return await cur.fetchall()

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        async with self.conn.cursor() as cur:
            await cur.executemany(_query(sql), rows)

    async def fetch_batch(self, statements: Sequence[Statement]) -> list[list[Row]]:
        curs = [await self.conn.execute(_query(sql), args) for sql, args in statements]
        await self._sync()
        return [await cur.fetchall() for cur in curs]

    async def execute_batch(self, statements: Sequence[Statement]) -> list[int]:
        curs = [await self.conn.execute(_query(sql), args) for sql, args in statements]
        await self._sync()
        return [cur.rowcount for cur in curs]


class PostgresStore(SqlStore):
    backend = "postgresql"
    dialect = "postgres"
    transient_errors = (psycopg.OperationalError, PoolTimeout)
    has_table_sql = "SELECT 1 WHERE to_regclass(?) IS NOT NULL"
    insertion_order = "position"
    lock_rows = " FOR UPDATE"

    def __init__(self, url: str, sealer: Sealer | None = None) -> None:
        super().__init__(sealer)
        self.url = url
        self._conninfo, pool_min, pool_max = split_pool_options(url)
        self._pool: AsyncConnectionPool[Conn] = AsyncConnectionPool(
            self._conninfo,
            min_size=pool_min,
            max_size=pool_max,
            open=False,
            kwargs={"autocommit": True},
            reset=_reset,
            # How long a call waits for a free (or new) connection before failing.
            timeout=20.0,
            name="agentlane-store",
        )

    @property
    def location(self) -> str:
        return redact(self.url)

    async def open(self) -> None:
        # One direct connection first: a wrong address, password or database fails here at
        # once, with libpq's own words, instead of as a pool timeout.
        try:
            first = await AsyncConnection.connect(self._conninfo, autocommit=True)
        except psycopg.Error as err:
            raise StoreError(f"cannot reach PostgreSQL at {redact(self.url)}: {err}") from err
        await first.close()
        try:
            await self._pool.open(wait=True, timeout=30.0)
        except Exception as err:
            await self._pool.close()
            raise StoreError(f"cannot reach PostgreSQL at {redact(self.url)}: {err}") from err

    async def close(self) -> None:
        await self._pool.close()

    # -- plumbing -----------------------------------------------------------------------------

    @asynccontextmanager
    async def _conn(self) -> AsyncIterator[Conn]:
        # A server restart leaves every idle pooled connection dead: skip (and close) those,
        # without the pool's back-off between checks, so the call gets a fresh one.
        for _ in range(self._pool.max_size + 1):
            conn = await self._pool.getconn()
            if await _usable(conn):
                break
            await conn.close()
            await self._pool.putconn(conn)
        else:
            conn = await self._pool.getconn()
        try:
            yield conn
        finally:
            await self._pool.putconn(conn)

    async def _session(self, body: Body[T], *, tx: bool) -> T:
        """`body` on one pooled connection: in one transaction (all of it or nothing, also
        when the connection drops), else each statement autocommitted."""
        async with self._conn() as conn:
            if not tx:
                return await body(PgTx(conn, None))
            try:
                async with conn.pipeline() as pipeline, conn.transaction():
                    return await body(PgTx(conn, pipeline))
            except BaseException:
                # Cut short (a cancelled activity, an error): a connection left in pipeline
                # mode or a transaction is closed (the server rolls back), never reused.
                if not conn.closed and _left_mid_statement(conn):
                    await conn.close()
                raise

    def _append_lock(self, key: str) -> list[Statement]:
        # Appends to one session take turns across hosts (other sessions never wait): the next
        # seq is read and written under this lock, released at commit or rollback.
        return [("SELECT pg_advisory_xact_lock(?, hashtext(?))", (APPEND_LOCK, key))]

    def _migration_lock(self) -> list[Statement]:
        return [("SELECT pg_advisory_xact_lock(?)", (MIGRATION_LOCK,))]


async def open_postgres(url: str, sealer: Sealer | None = None) -> PostgresStore:
    """Connect, then bring the schema up to date (safe when several hosts start at once)."""
    store = PostgresStore(url, sealer)
    await store.open()
    try:
        await store.migrate()
    except BaseException:
        await store.close()
        raise
    return store
