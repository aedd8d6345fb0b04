"""The embedded store: one SQLite file in the data dir (`<data>/agentlane.db`, 0600), for one
host, no server to run. Every operation is `store/sql_core.py`'s; this module is the connection.

WAL mode, so readers never wait for the writer and a write is one append to the log; every
write transaction starts with `BEGIN IMMEDIATE`, so two processes (worker, gateway, CLI) take
the write lock up front instead of failing on a lock upgrade, and wait for it (`busy_timeout`).
`synchronous=FULL`: a committed entry survives a power cut, as the fsync'd files did before.
Writes and large reads run on one thread per store object (sqlite3 blocks; a commit waits for
the disk): the event loop never waits on them, and a transaction's statements run there back to
back, so no other call's statement can land inside it. Reads of a row or a few (`_peek`: a
transcript cache's refresh, a record by its key) are answered on the event loop's thread from a
read-only connection of its own: WAL readers never wait for the writer, the read takes a few
microseconds, and the hop to the store's thread and back costs about sixty of CPU (two thread
wake-ups, the interpreter lock handed over twice). The reader never waits: a file that is busy
for a moment (the log being restarted) sends the read to the store's thread instead. The store
migrates itself when opened.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar, cast

from store.sealing import Sealer
from store.sql_core import Body, Row, SqlStore, Tx

DB_NAME = "agentlane.db"
BUSY_TIMEOUT_MS = 30_000

T = TypeVar("T")


class SqliteTx(Tx):
    """Statements on the store's thread. Its methods never suspend, so a body made of them
    runs to its end in one `drive` (one hop to the thread per body, not per statement)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    async def execute(self, sql: str, args: Sequence[Any] | None = None) -> int:
        return self.conn.execute(sql, () if args is None else args).rowcount

    async def fetch(self, sql: str, args: Sequence[Any] = ()) -> list[Row]:
        return self.conn.execute(sql, args).fetchall()

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self.conn.executemany(sql, rows)


def drive(coro: Coroutine[Any, Any, T]) -> T:
    """Run a body over a `SqliteTx` on this thread: it awaits only statements that complete at
    once, so it ends on the first step."""
    try:
        coro.send(None)
    except StopIteration as done:
        return cast(T, done.value)
    coro.close()
    raise RuntimeError("an embedded store body awaited something other than its statements")


class EmbeddedStore(SqlStore):
    backend = "sqlite"
    dialect = "sqlite"
    has_table_sql = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
    insertion_order = "rowid"

    def __init__(
        self, path: Path, sealer: Sealer | None = None, *, self_migrate: bool = True
    ) -> None:
        """`self_migrate` False: the schema is left as found until `migrate` (a test of one
        migration starts from an older schema)."""
        super().__init__(sealer)
        self.path = path
        self.self_migrate = self_migrate
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentlane-db")
        self._conn: sqlite3.Connection | None = None
        # Set once the writer has opened (and migrated) the file: reads may then peek.
        self._ready = False
        self._reader: sqlite3.Connection | None = None
        self._reader_thread = 0

    @classmethod
    def in_data_dir(cls, data_dir: Path, sealer: Sealer | None = None) -> EmbeddedStore:
        return cls(data_dir / DB_NAME, sealer)

    @property
    def location(self) -> str:
        return str(self.path)

    # -- plumbing -----------------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            if not self.path.exists():
                # Created 0600 before SQLite writes a byte: it holds transcripts and keys.
                os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
            conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=30.0
            )
            conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            self._conn = conn
            if self.self_migrate:  # the embedded store migrates itself, on first use
                self._in_session(conn, self._apply_migrations, tx=True)
            self._ready = True
        return self._conn

    def _reader_here(self) -> sqlite3.Connection | None:
        """The read-only connection of the first thread that peeks (the event loop's), once the
        writer has the file ready; None on any other thread."""
        if not self._ready:
            return None
        if self._reader is None:
            # timeout 0: a busy file fails the read at once (`_peek` then takes the thread).
            reader = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=0
            )
            reader.execute("PRAGMA query_only=ON")
            self._reader, self._reader_thread = reader, threading.get_ident()
        elif self._reader_thread != threading.get_ident():
            return None
        return self._reader

    def _peek(self, sql: str, args: Sequence[Any] = ()) -> list[Row] | None:
        reader = self._reader_here()
        if reader is None:
            return None
        try:
            return reader.execute(sql, args).fetchall()
        except sqlite3.OperationalError:
            return None  # busy, or an error the store's thread reports with its context

    @staticmethod
    def _in_session(conn: sqlite3.Connection, body: Body[T], *, tx: bool) -> T:
        if not tx:
            return drive(body(SqliteTx(conn)))
        conn.execute("BEGIN IMMEDIATE")
        try:
            result = drive(body(SqliteTx(conn)))
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return result

    async def _session(self, body: Body[T], *, tx: bool) -> T:
        def call() -> T:
            return self._in_session(self._connection(), body, tx=tx)

        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    async def close(self) -> None:
        def shut() -> None:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

        self._ready = False
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        if self._conn is not None:
            await asyncio.get_running_loop().run_in_executor(self._executor, shut)
        self._executor.shutdown(wait=True)
