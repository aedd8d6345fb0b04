"""The embedded store: one SQLite file in the data dir (`<data>/agentlane.db`, 0600), for one
host, no server to run.

WAL mode, so readers never wait for the writer and a write is one append to the log; every
write transaction starts with `BEGIN IMMEDIATE`, so two processes (worker, gateway, CLI) take
the write lock up front instead of failing on a lock upgrade, and wait for it (`busy_timeout`).
`synchronous=FULL`: a committed entry survives a power cut, as the fsync'd files did before.
All SQL runs on one thread per store object (sqlite3 blocks): the event loop never waits on it.
The store migrates itself when opened.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from agentlane.transcript import Role, TranscriptEntry
from store import migrations
from store.interface import Store, StoreError
from store.models import ProfileRow, StoreStatus, TokenRow, UsageRow
from store.sealing import Sealer

DB_NAME = "agentlane.db"
DIALECT = "sqlite"
BUSY_TIMEOUT_MS = 30_000

T = TypeVar("T")

# Tables `status` counts, in the order it shows them.
COUNTED = (
    "transcript_entries",
    "session_records",
    "runs",
    "auth_profiles",
    "profile_usage",
    "gateway_tokens",
    "webhook_secrets",
    "payloads",
)


def result_for(entry: TranscriptEntry) -> str | None:
    return entry.tool_call_id if entry.role == Role.TOOL and entry.tool_call_id else None


def entry_body(entry: TranscriptEntry) -> str:
    return entry.model_dump_json(exclude_defaults=True)


class EmbeddedStore(Store):
    backend = "sqlite"

    def __init__(self, path: Path, sealer: Sealer | None = None) -> None:
        super().__init__(sealer)
        self.path = path
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentlane-db")
        self._conn: sqlite3.Connection | None = None
        self._opened = threading.Lock()

    @classmethod
    def in_data_dir(cls, data_dir: Path, sealer: Sealer | None = None) -> EmbeddedStore:
        return cls(data_dir / DB_NAME, sealer)

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
            self._migrate(conn)
        return self._conn

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        def call() -> T:
            return fn(self._connection())

        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    @staticmethod
    def _write(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn` in one write transaction: all of it or nothing."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            result = fn(conn)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return result

    async def _tx(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await self._run(lambda conn: self._write(conn, fn))

    # -- lifecycle ----------------------------------------------------------------------------

    def _version(self, conn: sqlite3.Connection) -> int:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations "
            "(version INTEGER PRIMARY KEY, applied_at REAL NOT NULL)"
        )
        row = conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()
        return int(row[0] or 0)

    def _migrate(self, conn: sqlite3.Connection) -> int:
        known = migrations.load(DIALECT)

        def apply(conn: sqlite3.Connection) -> int:
            version = self._version(conn)
            if version > len(known):
                raise StoreError(
                    f"{self.path} has schema version {version}, newer than this agentlane "
                    f"knows ({len(known)}): upgrade agentlane"
                )
            for migration in known[version:]:
                for statement in migration.statements:
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
                    (migration.version, time.time()),
                )
                version = migration.version
            return version

        return self._write(conn, apply)

    async def migrate(self) -> int:
        return await self._run(self._migrate)

    async def status(self) -> StoreStatus:
        def read(conn: sqlite3.Connection) -> StoreStatus:
            counts = {
                table: int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
                for table in COUNTED
            }
            counts["sessions"] = len(self._keys(conn))
            return StoreStatus(
                backend=self.backend,
                location=str(self.path),
                schema_version=self._version(conn),
                latest_version=migrations.latest(DIALECT),
                counts=counts,
            )

        return await self._run(read)

    async def close(self) -> None:
        def shut(conn: sqlite3.Connection) -> None:
            conn.close()
            self._conn = None

        if self._conn is not None:
            await self._run(shut)
        self._executor.shutdown(wait=True)

    # -- transcripts --------------------------------------------------------------------------

    async def append_entries(
        self, key: str, entries: Sequence[TranscriptEntry]
    ) -> list[TranscriptEntry]:
        if not entries:
            return []

        def append(conn: sqlite3.Connection) -> list[TranscriptEntry]:
            last = conn.execute(
                "SELECT seq, entry_id FROM transcript_entries WHERE session_key = ? "
                "ORDER BY seq DESC LIMIT 1",
                (key,),
            ).fetchone()
            seq, last_id = (int(last[0]), str(last[1])) if last else (0, None)
            written = []
            for entry in entries:
                if entry.parent_id is None and last_id is not None:
                    entry = entry.model_copy(update={"parent_id": last_id})
                cursor = conn.execute(
                    "INSERT INTO transcript_entries "
                    "(session_key, seq, entry_id, result_for, body) VALUES (?, ?, ?, ?, ?) "
                    "ON CONFLICT DO NOTHING",
                    (key, seq + 1, entry.id, result_for(entry), entry_body(entry)),
                )
                if cursor.rowcount == 1:
                    seq += 1
                    last_id = entry.id
                    written.append(entry)
            return written

        return await self._tx(append)

    async def entries_after(self, key: str, seq: int = 0) -> list[tuple[int, TranscriptEntry]]:
        def read(conn: sqlite3.Connection) -> list[tuple[int, TranscriptEntry]]:
            rows = conn.execute(
                "SELECT seq, body FROM transcript_entries WHERE session_key = ? AND seq > ? "
                "ORDER BY seq",
                (key, seq),
            ).fetchall()
            # Parsed here, off the event loop: a long transcript's first read is all of it.
            return [(int(s), TranscriptEntry.model_validate_json(body)) for s, body in rows]

        return await self._run(read)

    async def _one_entry(self, sql: str, args: tuple[Any, ...]) -> TranscriptEntry | None:
        row = await self._run(lambda conn: conn.execute(sql, args).fetchone())
        return None if row is None else TranscriptEntry.model_validate_json(row[0])

    async def entry(self, key: str, entry_id: str) -> TranscriptEntry | None:
        return await self._one_entry(
            "SELECT body FROM transcript_entries WHERE session_key = ? AND entry_id = ?",
            (key, entry_id),
        )

    async def tool_result(self, key: str, tool_call_id: str) -> TranscriptEntry | None:
        return await self._one_entry(
            "SELECT body FROM transcript_entries WHERE session_key = ? AND result_for = ?",
            (key, tool_call_id),
        )

    @staticmethod
    def _keys(conn: sqlite3.Connection) -> list[str]:
        rows = conn.execute(
            "SELECT DISTINCT session_key FROM transcript_entries "
            "UNION SELECT session_key FROM session_records ORDER BY 1"
        ).fetchall()
        return [str(r[0]) for r in rows]

    async def session_keys(self) -> list[str]:
        return await self._run(self._keys)

    # -- session and run records ----------------------------------------------------------------

    async def put_session_record(self, key: str, record: str) -> None:
        await self._tx(
            lambda conn: conn.execute(
                "INSERT INTO session_records (session_key, record, updated) VALUES (?, ?, ?) "
                "ON CONFLICT (session_key) DO UPDATE SET record = excluded.record, "
                "updated = excluded.updated",
                (key, record, time.time()),
            )
        )

    async def _scalar(self, sql: str, args: tuple[Any, ...]) -> Any:
        row = await self._run(lambda conn: conn.execute(sql, args).fetchone())
        return None if row is None else row[0]

    async def session_record(self, key: str) -> str | None:
        value = await self._scalar(
            "SELECT record FROM session_records WHERE session_key = ?", (key,)
        )
        return None if value is None else str(value)

    async def _insert(self, sql: str, args: tuple[Any, ...]) -> bool:
        cursor = await self._tx(lambda conn: conn.execute(sql, args))
        return cursor.rowcount == 1

    async def put_branch_source(self, key: str, source: str) -> bool:
        return await self._insert(
            "INSERT INTO branch_sources (session_key, source) VALUES (?, ?) ON CONFLICT DO NOTHING",
            (key, source),
        )

    async def branch_source(self, key: str) -> str | None:
        value = await self._scalar(
            "SELECT source FROM branch_sources WHERE session_key = ?", (key,)
        )
        return None if value is None else str(value)

    async def record_run(self, key: str, run_id: str, result: str) -> bool:
        return await self._insert(
            "INSERT INTO runs (session_key, run_id, recorded, result) VALUES (?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            (key, run_id, time.time(), result),
        )

    async def runs(self, key: str) -> list[tuple[str, str]]:
        rows = await self._run(
            lambda conn: conn.execute(
                "SELECT run_id, result FROM runs WHERE session_key = ? ORDER BY recorded, rowid",
                (key,),
            ).fetchall()
        )
        return [(str(r), str(res)) for r, res in rows]

    async def set_run_workspace(self, key: str, run_chain: str, workspace: str) -> None:
        await self._tx(
            lambda conn: conn.execute(
                "INSERT INTO run_workspaces (session_key, run_chain, workspace) VALUES (?, ?, ?) "
                "ON CONFLICT (session_key, run_chain) DO UPDATE SET workspace = excluded.workspace",
                (key, run_chain, workspace),
            )
        )

    async def run_workspace(self, key: str, run_chain: str) -> str | None:
        value = await self._scalar(
            "SELECT workspace FROM run_workspaces WHERE session_key = ? AND run_chain = ?",
            (key, run_chain),
        )
        return None if value is None else str(value)

    async def mark_tool_call(self, key: str, tool_call_id: str, kind: str, value: str) -> bool:
        return await self._insert(
            "INSERT INTO tool_marks (session_key, tool_call_id, kind, value) "
            "VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (key, tool_call_id, kind, value),
        )

    async def tool_mark(self, key: str, tool_call_id: str, kind: str) -> str | None:
        value = await self._scalar(
            "SELECT value FROM tool_marks WHERE session_key = ? AND tool_call_id = ? AND kind = ?",
            (key, tool_call_id, kind),
        )
        return None if value is None else str(value)

    # -- auth profiles ------------------------------------------------------------------------

    async def _write_profile(self, profile: ProfileRow, sealed: bytes) -> None:
        await self._tx(
            lambda conn: conn.execute(
                "INSERT INTO auth_profiles "
                "(profile_id, provider, type, base_url, auth_header, sealed) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (profile_id) DO UPDATE SET "
                "provider = excluded.provider, type = excluded.type, "
                "base_url = excluded.base_url, auth_header = excluded.auth_header, "
                "sealed = excluded.sealed",
                (
                    profile.id,
                    profile.provider,
                    profile.type,
                    profile.base_url,
                    profile.auth_header,
                    sealed,
                ),
            )
        )

    async def _read_profiles(self) -> list[tuple[ProfileRow, bytes]]:
        rows = await self._run(
            lambda conn: conn.execute(
                "SELECT profile_id, provider, type, base_url, auth_header, sealed "
                "FROM auth_profiles ORDER BY profile_id"
            ).fetchall()
        )
        return [
            (ProfileRow(id=p, provider=pr, type=t, base_url=b, auth_header=h), bytes(s))
            for p, pr, t, b, h, s in rows
        ]

    async def delete_profile(self, profile_id: str) -> bool:
        cursor = await self._tx(
            lambda conn: conn.execute(
                "DELETE FROM auth_profiles WHERE profile_id = ?", (profile_id,)
            )
        )
        return cursor.rowcount == 1

    # -- shared profile usage -----------------------------------------------------------------

    async def usage_rows(self) -> list[UsageRow]:
        rows = await self._run(
            lambda conn: conn.execute(
                "SELECT profile_id, usage, version FROM profile_usage ORDER BY profile_id"
            ).fetchall()
        )
        return [UsageRow(profile_id=p, usage=u, version=v) for p, u, v in rows]

    async def usage_row(self, profile_id: str) -> UsageRow | None:
        row = await self._run(
            lambda conn: conn.execute(
                "SELECT profile_id, usage, version FROM profile_usage WHERE profile_id = ?",
                (profile_id,),
            ).fetchone()
        )
        return None if row is None else UsageRow(profile_id=row[0], usage=row[1], version=row[2])

    async def set_usage(
        self,
        profile_id: str,
        expected_version: int | None,
        usage: str,
        *,
        last_good_for: str | None = None,
    ) -> bool:
        def cas(conn: sqlite3.Connection) -> bool:
            if expected_version is None:
                cursor = conn.execute(
                    "INSERT INTO profile_usage (profile_id, usage, version) VALUES (?, ?, 1) "
                    "ON CONFLICT DO NOTHING",
                    (profile_id, usage),
                )
            else:
                cursor = conn.execute(
                    "UPDATE profile_usage SET usage = ?, version = version + 1 "
                    "WHERE profile_id = ? AND version = ?",
                    (usage, profile_id, expected_version),
                )
            if cursor.rowcount != 1:
                return False
            if last_good_for is not None:
                conn.execute(
                    "INSERT INTO profile_last_good (provider, profile_id) VALUES (?, ?) "
                    "ON CONFLICT (provider) DO UPDATE SET profile_id = excluded.profile_id",
                    (last_good_for, profile_id),
                )
            return True

        return await self._tx(cas)

    async def last_good(self) -> dict[str, str]:
        rows = await self._run(
            lambda conn: conn.execute(
                "SELECT provider, profile_id FROM profile_last_good"
            ).fetchall()
        )
        return {str(p): str(i) for p, i in rows}

    async def profile_orders(self) -> dict[str, list[str]]:
        rows = await self._run(
            lambda conn: conn.execute("SELECT provider, profile_ids FROM profile_order").fetchall()
        )
        return {str(p): list(json.loads(ids)) for p, ids in rows}

    async def set_profile_order(self, provider: str, order: list[str] | None) -> None:
        def write(conn: sqlite3.Connection) -> None:
            if order is None:
                conn.execute("DELETE FROM profile_order WHERE provider = ?", (provider,))
            else:
                conn.execute(
                    "INSERT INTO profile_order (provider, profile_ids) VALUES (?, ?) "
                    "ON CONFLICT (provider) DO UPDATE SET profile_ids = excluded.profile_ids",
                    (provider, json.dumps(order)),
                )

        await self._tx(write)

    async def reset_profile_state(self) -> None:
        def reset(conn: sqlite3.Connection) -> None:
            for table in ("profile_usage", "profile_last_good", "profile_order"):
                conn.execute(f"DELETE FROM {table}")

        await self._tx(reset)

    # -- gateway tokens -----------------------------------------------------------------------

    async def add_token(self, token: TokenRow) -> bool:
        return await self._insert(
            "INSERT INTO gateway_tokens (token_id, name, prefixes, read_only, created, sha256) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (
                token.id,
                token.name,
                json.dumps(token.prefixes),
                int(token.read_only),
                token.created,
                token.sha256,
            ),
        )

    _TOKEN_COLUMNS = (
        "SELECT t.token_id, t.name, t.prefixes, t.read_only, t.created, t.sha256, u.last_used "
        "FROM gateway_tokens t LEFT JOIN gateway_token_use u ON u.token_id = t.token_id"
    )

    @staticmethod
    def _token(row: tuple[Any, ...]) -> TokenRow:
        tid, name, prefixes, read_only, created, sha, used = row
        return TokenRow(
            id=tid,
            name=name,
            prefixes=json.loads(prefixes),
            read_only=bool(read_only),
            created=created,
            sha256=sha,
            last_used=used,
        )

    async def token(self, token_id: str) -> TokenRow | None:
        row = await self._run(
            lambda conn: conn.execute(
                self._TOKEN_COLUMNS + " WHERE t.token_id = ?", (token_id,)
            ).fetchone()
        )
        return None if row is None else self._token(row)

    async def tokens(self) -> list[TokenRow]:
        rows = await self._run(
            lambda conn: conn.execute(self._TOKEN_COLUMNS + " ORDER BY t.created").fetchall()
        )
        return [self._token(r) for r in rows]

    async def revoke_token(self, token_id: str) -> bool:
        def revoke(conn: sqlite3.Connection) -> bool:
            conn.execute("DELETE FROM gateway_token_use WHERE token_id = ?", (token_id,))
            cursor = conn.execute("DELETE FROM gateway_tokens WHERE token_id = ?", (token_id,))
            return cursor.rowcount == 1

        return await self._tx(revoke)

    async def note_token_use(self, used: dict[str, float]) -> None:
        if not used:
            return

        def note(conn: sqlite3.Connection) -> None:
            conn.executemany(
                "INSERT INTO gateway_token_use (token_id, last_used) "
                "SELECT token_id, ? FROM gateway_tokens WHERE token_id = ? "
                "ON CONFLICT (token_id) DO UPDATE SET last_used = "
                "MAX(gateway_token_use.last_used, excluded.last_used)",
                [(ts, tid) for tid, ts in used.items()],
            )

        await self._tx(note)

    # -- webhook secrets and deliveries ----------------------------------------------------

    async def _read_secret(self, ref: str) -> bytes | None:
        value = await self._scalar("SELECT sealed FROM webhook_secrets WHERE ref = ?", (ref,))
        return None if value is None else bytes(value)

    async def _write_secret(self, ref: str, sealed: bytes, *, replace: bool) -> None:
        conflict = (
            "ON CONFLICT (ref) DO UPDATE SET sealed = excluded.sealed, updated = excluded.updated"
            if replace
            else "ON CONFLICT DO NOTHING"
        )
        await self._tx(
            lambda conn: conn.execute(
                "INSERT INTO webhook_secrets (ref, sealed, updated) VALUES (?, ?, ?) " + conflict,
                (ref, sealed, time.time()),
            )
        )

    async def webhook_secret_refs(self) -> list[str]:
        rows = await self._run(
            lambda conn: conn.execute("SELECT ref FROM webhook_secrets ORDER BY ref").fetchall()
        )
        return [str(r[0]) for r in rows]

    async def delivery_progress(self, delivery_id: str) -> str | None:
        value = await self._scalar(
            "SELECT progress FROM webhook_deliveries WHERE delivery_id = ?", (delivery_id,)
        )
        return None if value is None else str(value)

    async def save_delivery_progress(self, delivery_id: str, progress: str) -> None:
        await self._tx(
            lambda conn: conn.execute(
                "INSERT INTO webhook_deliveries (delivery_id, progress, updated) "
                "VALUES (?, ?, ?) ON CONFLICT (delivery_id) DO UPDATE SET "
                "progress = excluded.progress, updated = excluded.updated",
                (delivery_id, progress, time.time()),
            )
        )

    # -- payloads -------------------------------------------------------------------------------

    async def put_payload(self, digest: str, data: bytes) -> None:
        await self._insert(
            "INSERT INTO payloads (digest, data, created) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
            (digest, data, time.time()),
        )

    async def payload(self, digest: str) -> bytes | None:
        value = await self._scalar("SELECT data FROM payloads WHERE digest = ?", (digest,))
        return None if value is None else bytes(value)

    async def delete_payload(self, digest: str) -> bool:
        cursor = await self._tx(
            lambda conn: conn.execute("DELETE FROM payloads WHERE digest = ?", (digest,))
        )
        return cursor.rowcount == 1
