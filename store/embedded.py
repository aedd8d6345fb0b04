"""The embedded store: one SQLite file in the data dir (`<data>/agentlane.db`, 0600), for one
host, no server to run. Every operation is `store/sql_core.py`'s; this module is the connection.

WAL mode, so readers never wait for the writer and a write is one append to the log; every
write transaction starts with `BEGIN IMMEDIATE`, so two processes (worker, gateway, CLI) take
the write lock up front instead of failing on a lock upgrade, and wait for it (`busy_timeout`).
`synchronous=FULL`: a committed entry survives a power cut, as the fsync'd files did before.
Writes and large reads run on one thread per store object (sqlite3 blocks; a commit waits for
the disk), and a transaction's statements run there back to back, so no other call's statement
can land inside it. Reads of a row or a few (`_peek`: a
transcript cache's refresh, a record by its key) are answered on the event loop's thread from a
read-only connection of its own: WAL readers never wait for the writer, the read takes a few
microseconds, and the hop to the store's thread and back costs about sixty of CPU (two thread
wake-ups, the interpreter lock handed over twice). The reader never waits: a file that is busy
for a moment (the log being restarted) sends the read to the store's thread instead.

A short write (`_write_here`: an append of a step's entry) is committed on the loop's thread
too, from a writer connection of its own, when the disk is fast: the commit with its fsync takes
about 0.15 ms here, the hop more in CPU and interpreter-lock hand-overs. It waits for nothing:
`busy_timeout` 0, so a write lock held by another process sends it to the store's thread, as
does any work still handed there (so writes keep their order). Writes that take over 2 ms on
average, or one over 20 ms, send the writes to the thread for a minute: the loop serves every
session's heartbeats and streams. The loop's writer does not checkpoint the log (a checkpoint
copies it into the file, with an fsync); it asks the thread for one every 256 commits. The store
migrates itself when opened.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar, cast

from store.sealing import Sealer
from store.sql_core import Body, Row, SqlStore, Tx

DB_NAME = "agentlane.db"
BUSY_TIMEOUT_MS = 30_000
# Short writes committed on the event loop's thread that take longer than this on average (a
# slow disk's fsync), or one that takes STALL_SECONDS, send the writes to the store's thread for
# SLOW_WRITE_COOL_OFF seconds: the loop serves every session's activities meanwhile.
SLOW_WRITE_SECONDS = 0.002
STALL_SECONDS = 0.02
SLOW_WRITE_COOL_OFF = 60.0
# The loop's writer leaves checkpoints to the store's thread: one is asked for every this many
# commits (SQLite's own would copy the log into the file, with an fsync, during a commit).
CHECKPOINT_EVERY = 256

log = logging.getLogger(__name__)

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
    transient_errors = (sqlite3.OperationalError,)
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
        self._writer: sqlite3.Connection | None = None
        # Sessions handed to the store's thread and not finished: the loop's writer waits
        # for none of them (order), and never shares the thread's connection.
        self._handed = 0
        self._handed_lock = threading.Lock()
        self._slow_until = 0.0
        self._write_seconds = 0.0  # a moving average of the loop's writes
        self._since_checkpoint = 0

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

    def _writer_here(self) -> sqlite3.Connection | None:
        """The loop's writer: the reader's thread only, `busy_timeout` 0 (a lock held elsewhere
        sends the write to the store's thread instead of waiting), no checkpoints of its own."""
        if self._reader_here() is None:
            return None
        if self._writer is None:
            writer = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=0
            )
            writer.execute("PRAGMA synchronous=FULL")
            writer.execute("PRAGMA wal_autocheckpoint=0")
            self._writer = writer
        return self._writer

    def _write_here(self, body: Body[T]) -> tuple[T] | None:
        if self._handed or time.monotonic() < self._slow_until:
            return None
        writer = self._writer_here()
        if writer is None:
            return None
        try:
            writer.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:
            return None  # another process (or the store's thread) holds the write lock
        began = time.perf_counter()
        result = _to_commit(writer, body)
        took = time.perf_counter() - began
        self._write_seconds += (took - self._write_seconds) / 5
        if took > STALL_SECONDS or self._write_seconds > SLOW_WRITE_SECONDS:
            self._slow_until = time.monotonic() + SLOW_WRITE_COOL_OFF
            self._write_seconds = 0.0
            log.info(
                "a write took %.1f ms on the event loop; the store's thread takes them for %.0f s",
                took * 1000,
                SLOW_WRITE_COOL_OFF,
            )
        self._since_checkpoint += 1
        if self._since_checkpoint >= CHECKPOINT_EVERY:
            self._since_checkpoint = 0
            self._checkpoint_soon()
        return (result,)

    def _checkpoint_soon(self) -> None:
        """A passive checkpoint on the store's thread; nobody waits for it."""

        def checkpoint() -> None:
            self._connection().execute("PRAGMA wal_checkpoint(PASSIVE)")

        task = asyncio.get_running_loop().create_task(self._handed_over(checkpoint))
        task.add_done_callback(_log_failure)

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
        return _to_commit(conn, body)

    async def _session(self, body: Body[T], *, tx: bool) -> T:
        def call() -> T:
            return self._in_session(self._connection(), body, tx=tx)

        return await self._handed_over(call)

    async def _handed_over(self, call: Callable[[], T]) -> T:
        with self._handed_lock:
            self._handed += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, call)
        finally:
            with self._handed_lock:
                self._handed -= 1

    async def close(self) -> None:
        def shut() -> None:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

        self._ready = False
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._conn is not None:
            await asyncio.get_running_loop().run_in_executor(self._executor, shut)
        self._executor.shutdown(wait=True)


def _to_commit(conn: sqlite3.Connection, body: Body[T]) -> T:
    """`body` in the transaction `conn` has begun, committed; rolled back if anything fails,
    the commit too (a full disk), so the connection is never left inside a transaction."""
    try:
        result = drive(body(SqliteTx(conn)))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return result


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("a checkpoint of the embedded store failed: %r", task.exception())
