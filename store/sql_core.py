"""What both SQL backends share: every operation of the interface, written once, over a small
connection seam (`Tx`) each backend implements (`store/embedded.py`: SQLite on a thread of its
own; `store/postgres.py`: psycopg 3 with a pool).

SQL here uses `?` placeholders and only what both dialects accept (`ON CONFLICT`, `CASE`,
`IN (...)`); what differs is a class attribute of the backend (the schema folder, how to ask
whether a table exists, the insertion order column, row locks) or a hook (the per-session lock
of an append, the migration lock). A backend runs a body in one transaction (`tx=True`: all of
it or nothing) or as single autocommitted statements (`tx=False`).
"""

from __future__ import annotations

import abc
import json
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

from agentlane.context_floor import FLOOR_ROLES, marker_floor
from agentlane.transcript import Role, TranscriptEntry
from store import migrations
from store.interface import Store, StoreError
from store.models import PayloadOwnerRef, ProfileRow, StoreStatus, TokenRow, UsageRow

T = TypeVar("T")
Row = tuple[Any, ...]
Statement = tuple[str, Sequence[Any]]

# Tables `status` counts, in the order it shows them.
COUNTED = (
    "transcript_entries",
    "session_records",
    "runs",
    "auth_profiles",
    "profile_usage",
    "gateway_tokens",
    "webhook_secrets",
    "stream_starts",
    "payloads",
    "payload_owners",
)

# A payload sweep locks and deletes at most this many rows per statement.
SWEEP_CHUNK = 500
# A transcript read of at most this many entries may be answered on the caller's thread.
PEEK_ENTRIES = 16
# An append of at most this many entries is a short transaction (`_short_tx`): a step's own.
SHORT_APPEND = 8


def result_for(entry: TranscriptEntry) -> str | None:
    return entry.tool_call_id if entry.role == Role.TOOL and entry.tool_call_id else None


def entry_body(entry: TranscriptEntry) -> str:
    return entry.model_dump_json(exclude_defaults=True)


def marks(n: int) -> str:
    return ", ".join("?" * n)


class Tx(abc.ABC):
    """One connection, for one body: a transaction, or single autocommitted statements."""

    @abc.abstractmethod
    async def execute(self, sql: str, args: Sequence[Any] | None = None) -> int:
        """Run one statement; rows it changed. `args` None: the SQL is run as written (a
        migration's DDL)."""

    @abc.abstractmethod
    async def fetch(self, sql: str, args: Sequence[Any] = ()) -> list[Row]: ...

    @abc.abstractmethod
    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...

    async def fetch_batch(self, statements: Sequence[Statement]) -> list[list[Row]]:
        """Several reads; a backend that can sends them in one round trip."""
        return [await self.fetch(sql, args) for sql, args in statements]

    async def execute_batch(self, statements: Sequence[Statement]) -> list[int]:
        """Several writes; rows each changed (one round trip where the backend can)."""
        return [await self.execute(sql, args) for sql, args in statements]


Body = Callable[[Tx], Coroutine[Any, Any, T]]


def plan_append(
    key: str, entries: Sequence[TranscriptEntry], last: Row | None, seen: list[Row]
) -> tuple[list[TranscriptEntry], list[Statement]]:
    """Which of `entries` are new (`seen`: rows (entry id, result for) the session has among
    them), their seq after `last` (seq, entry id) and default parents: (entries written, their
    inserts). The unique keys still decide what is written."""
    seq, last_id = (int(last[0]), str(last[1])) if last else (0, None)
    seen_ids = {str(r[0]) for r in seen}
    seen_calls = {str(r[1]) for r in seen if r[1] is not None}
    written: list[TranscriptEntry] = []
    inserts: list[Statement] = []
    for entry in entries:
        call = result_for(entry)
        if entry.id in seen_ids or (call is not None and call in seen_calls):
            continue
        if entry.parent_id is None and last_id is not None:
            entry = entry.model_copy(update={"parent_id": last_id})
        seq += 1
        inserts.append(
            (
                "INSERT INTO transcript_entries (session_key, seq, entry_id, result_for, body) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (key, seq, entry.id, call, entry_body(entry)),
            )
        )
        seen_ids.add(entry.id)
        if call is not None:
            seen_calls.add(call)
        last_id = entry.id
        written.append(entry)
    return written, inserts


def _seen_query(key: str, ids: list[str], calls: list[str]) -> Statement:
    where = [f"entry_id IN ({marks(len(ids))})"]
    if calls:
        where.append(f"result_for IN ({marks(len(calls))})")
    return (
        "SELECT entry_id, result_for FROM transcript_entries WHERE session_key = ? "
        f"AND ({' OR '.join(where)})",
        (key, *ids, *calls),
    )


def _run_starts(key: str, written: Sequence[TranscriptEntry], first_seq: int) -> list[Statement]:
    """The first seq of each run among `written` (seqs from `first_seq`), kept once per run."""
    starts: dict[str, int] = {}
    for seq, entry in enumerate(written, first_seq):
        if entry.run_id is not None:
            starts.setdefault(entry.run_id, seq)
    return [
        (
            "INSERT INTO run_starts (session_key, run_id, first_seq) VALUES (?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            (key, run_id, seq),
        )
        for run_id, seq in starts.items()
    ]


def _floor_upsert(key: str, floor_seq: int, marker_seq: int, reset_seq: int) -> Statement:
    """The session's context floor, unless a later marker already set it."""
    return (
        "INSERT INTO context_floors (session_key, floor_seq, marker_seq, reset_seq) "
        "VALUES (?, ?, ?, ?) ON CONFLICT (session_key) DO UPDATE SET "
        "floor_seq = excluded.floor_seq, marker_seq = excluded.marker_seq, "
        "reset_seq = excluded.reset_seq WHERE excluded.marker_seq >= context_floors.marker_seq",
        (key, floor_seq, marker_seq, reset_seq),
    )


_TOKEN_COLUMNS = (
    "SELECT t.token_id, t.name, t.prefixes, t.read_only, t.created, t.sha256, u.last_used "
    "FROM gateway_tokens t LEFT JOIN gateway_token_use u ON u.token_id = t.token_id"
)


def _token(row: Row) -> TokenRow:
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


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


class SqlStore(Store):
    """The interface over SQL; a backend supplies `_session` and its dialect's attributes."""

    dialect: str  # the migrations folder
    # A row for table name `?` when it exists.
    has_table_sql: str
    # The column that orders a session's runs recorded at the same time (insertion order).
    insertion_order: str
    # Appended to a SELECT that must lock the rows it reads until the transaction ends.
    lock_rows: str = ""

    @abc.abstractmethod
    async def _session(self, body: Body[T], *, tx: bool) -> T:
        """`body` on one connection: in one transaction (`tx`), else autocommitted."""

    @property
    @abc.abstractmethod
    def location(self) -> str:
        """Where the store is, for `db status` and errors (never a password)."""

    def _append_lock(self, key: str) -> list[Statement]:
        """Statements that make appends to one session take turns (none where the whole
        transaction already holds the only write lock)."""
        return []

    def _migration_lock(self) -> list[Statement]:
        return []

    # -- one-statement helpers ---------------------------------------------------------------

    async def _all(self, sql: str, args: Sequence[Any] = ()) -> list[Row]:
        return await self._session(lambda tx: tx.fetch(sql, args), tx=False)

    def _peek(self, sql: str, args: Sequence[Any] = ()) -> list[Row] | None:
        """The rows of a small read answered at once on the caller's thread, or None where this
        backend (or this moment) needs `_session`: the embedded store answers from the loop's
        own connection, which costs a few microseconds where a hop to its thread costs about
        sixty, and a step makes eight such reads (`store/embedded.py`)."""
        return None

    def _write_here(self, body: Body[T]) -> tuple[T] | None:
        """A short write transaction committed at once on the caller's thread, its result in a
        1-tuple; None where this backend (or this moment) needs `_session`. The embedded store
        commits there while its disk is fast and nothing else is writing (`store/embedded.py`):
        a step makes two appends, and the hop to the store's thread costs more than the
        commit."""
        return None

    async def _short_tx(self, body: Body[T]) -> T:
        """`_session(body, tx=True)` for a transaction of a few rows."""
        done = self._write_here(body)
        return done[0] if done is not None else await self._session(body, tx=True)

    async def _few(self, sql: str, args: Sequence[Any] = ()) -> list[Row]:
        """`_all` for a read of a row or a handful."""
        rows = self._peek(sql, args)
        return rows if rows is not None else await self._all(sql, args)

    async def _one(self, sql: str, args: Sequence[Any] = ()) -> Row | None:
        rows = await self._few(sql, args)
        return rows[0] if rows else None

    async def _scalar(self, sql: str, args: Sequence[Any] = ()) -> Any:
        row = await self._one(sql, args)
        return None if row is None else row[0]

    async def _count(self, sql: str, args: Sequence[Any] = ()) -> int:
        """Rows one statement changed (autocommitted: it is its own transaction)."""
        return await self._session(lambda tx: tx.execute(sql, args), tx=False)

    async def _changed(self, sql: str, args: Sequence[Any] = ()) -> bool:
        return await self._count(sql, args) == 1

    # -- lifecycle ----------------------------------------------------------------------------

    async def _version(self, tx: Tx) -> int:
        if not await tx.fetch(self.has_table_sql, ("schema_migrations",)):
            return 0
        rows = await tx.fetch("SELECT COALESCE(MAX(version), 0) FROM schema_migrations")
        return int(rows[0][0])

    async def _apply_migrations(self, tx: Tx, up_to: int | None = None) -> int:
        known = migrations.load(self.dialect)[:up_to]
        # Whoever holds this lock migrates; the others wait, then find nothing to do.
        await tx.fetch_batch(self._migration_lock())
        await tx.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations "
            "(version INTEGER PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)"
        )
        version = await self._version(tx)
        latest = migrations.latest(self.dialect)
        if version > latest:
            raise StoreError(
                f"{self.location} has schema version {version}, newer than this agentlane "
                f"knows ({latest}): upgrade agentlane"
            )
        for migration in known[version:]:
            for statement in migration.statements:
                await tx.execute(statement)
            await tx.execute(
                "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
                (migration.version, time.time()),
            )
            version = migration.version
        return version

    async def migrate(self, up_to: int | None = None) -> int:
        """Apply the migrations not applied yet (`up_to`: stop after that version, for tests
        of a migration); return the schema version."""
        version = await self._session(self._version, tx=False)
        if version == (up_to or migrations.latest(self.dialect)):
            return version
        return await self._session(lambda tx: self._apply_migrations(tx, up_to), tx=True)

    async def _keys(self, tx: Tx) -> list[str]:
        rows = await tx.fetch(
            "SELECT DISTINCT session_key FROM transcript_entries "
            "UNION SELECT session_key FROM session_records ORDER BY 1"
        )
        return [str(r[0]) for r in rows]

    async def status(self) -> StoreStatus:
        async def read(tx: Tx) -> tuple[int, dict[str, int]]:
            version = await self._version(tx)
            counts: dict[str, int] = {}
            for table in COUNTED if version else ():
                if await tx.fetch(self.has_table_sql, (table,)):
                    counts[table] = int((await tx.fetch(f"SELECT COUNT(*) FROM {table}"))[0][0])
            if version:
                counts["sessions"] = len(await self._keys(tx))
            return version, counts

        version, counts = await self._session(read, tx=False)
        return StoreStatus(
            backend=self.backend,
            location=self.location,
            schema_version=version,
            latest_version=migrations.latest(self.dialect),
            counts=counts,
        )

    # -- transcripts --------------------------------------------------------------------------

    async def append_numbered(
        self, key: str, entries: Sequence[TranscriptEntry]
    ) -> list[tuple[int, TranscriptEntry]]:
        if not entries:
            return []
        ids = [e.id for e in entries]
        calls = sorted({c for c in map(result_for, entries) if c is not None})

        async def append(tx: Tx) -> list[tuple[int, TranscriptEntry]]:
            # Under the session's lock (PostgreSQL) or the only write lock (SQLite): which
            # entries are new decides their seq and default parent. Sent together: one trip.
            *_, last, seen = await tx.fetch_batch(
                [
                    *self._append_lock(key),
                    (
                        "SELECT seq, entry_id FROM transcript_entries WHERE session_key = ? "
                        "ORDER BY seq DESC LIMIT 1",
                        (key,),
                    ),
                    _seen_query(key, ids, calls),
                ]
            )
            written, inserts = plan_append(key, entries, last[0] if last else None, seen)
            first_seq = int(last[0][0]) + 1 if last else 1
            # Where each new run begins goes in the same trip (a row per run, kept once).
            changed = await tx.execute_batch([*inserts, *_run_starts(key, written, first_seq)])
            if any(n != 1 for n in changed[: len(inserts)]):
                raise StoreError(
                    f"transcript {key!r}: an append under the session's lock met an entry it "
                    "had not seen; nothing of this batch was written"
                )
            await self._note_floor(tx, key, written, first_seq)
            return list(enumerate(written, first_seq))

        if len(entries) <= SHORT_APPEND:
            return await self._short_tx(append)
        return await self._session(append, tx=True)

    async def entries_after(self, key: str, seq: int = 0) -> list[tuple[int, TranscriptEntry]]:
        sql = (
            "SELECT seq, body FROM transcript_entries WHERE session_key = ? AND seq > ? "
            "ORDER BY seq"
        )
        # Mostly a cache's refresh: what was appended since it last looked, none or a few
        # entries. More than a few (a session read whole) is read off the caller's thread.
        rows = self._peek(f"{sql} LIMIT {PEEK_ENTRIES + 1}", (key, seq))
        if rows is None or len(rows) > PEEK_ENTRIES:
            rows = await self._all(sql, (key, seq))
        return [(int(s), TranscriptEntry.model_validate_json(body)) for s, body in rows]

    async def _note_floor(
        self, tx: Tx, key: str, written: Sequence[TranscriptEntry], first_seq: int
    ) -> None:
        """In the append's transaction: the context floor a reset or compaction among
        `written` (seqs from `first_seq`) moves to."""
        markers = [
            (seq, entry)
            for seq, entry in enumerate(written, first_seq)
            if entry.role in FLOOR_ROLES
        ]
        if not markers:
            return
        rows = await tx.fetch("SELECT reset_seq FROM context_floors WHERE session_key = ?", (key,))
        reset_seq = int(rows[0][0]) if rows else 0
        for seq, marker in markers:
            if marker.role == Role.RESET:
                reset_seq = seq
            names = [
                str(v)
                for v in (marker.meta.get("first_kept_id"), marker.meta.get("turn_start_id"))
                if v and marker.role == Role.COMPACTION
            ]
            found = (
                await tx.fetch(
                    "SELECT entry_id, seq FROM transcript_entries WHERE session_key = ? "
                    f"AND entry_id IN ({marks(len(names))})",
                    (key, *names),
                )
                if names
                else []
            )
            position = {str(name): int(at) for name, at in found}
            floor = marker_floor(marker, seq, reset_seq, position)
            await tx.execute(*_floor_upsert(key, floor, seq, reset_seq))

    async def context_floor(self, key: str) -> int:
        return int(
            await self._scalar("SELECT floor_seq FROM context_floors WHERE session_key = ?", (key,))
            or 0
        )

    async def record_context_floor(
        self, key: str, floor_seq: int, marker_seq: int, reset_seq: int
    ) -> None:
        await self._count(*_floor_upsert(key, floor_seq, marker_seq, reset_seq))

    async def run_start(self, key: str, run_id: str) -> int | None:
        value = await self._scalar(
            "SELECT first_seq FROM run_starts WHERE session_key = ? AND run_id = ?",
            (key, run_id),
        )
        return None if value is None else int(value)

    async def _one_entry(self, column: str, key: str, value: str) -> TranscriptEntry | None:
        body = await self._scalar(
            f"SELECT body FROM transcript_entries WHERE session_key = ? AND {column} = ?",
            (key, value),
        )
        return None if body is None else TranscriptEntry.model_validate_json(body)

    async def entry(self, key: str, entry_id: str) -> TranscriptEntry | None:
        return await self._one_entry("entry_id", key, entry_id)

    async def tool_result(self, key: str, tool_call_id: str) -> TranscriptEntry | None:
        return await self._one_entry("result_for", key, tool_call_id)

    async def session_keys(self) -> list[str]:
        return await self._session(self._keys, tx=False)

    # -- session and run records ----------------------------------------------------------------

    async def put_session_record(self, key: str, record: str) -> None:
        await self._count(
            "INSERT INTO session_records (session_key, record, updated) VALUES (?, ?, ?) "
            "ON CONFLICT (session_key) DO UPDATE SET record = excluded.record, "
            "updated = excluded.updated",
            (key, record, time.time()),
        )

    async def session_record(self, key: str) -> str | None:
        return _text(
            await self._scalar("SELECT record FROM session_records WHERE session_key = ?", (key,))
        )

    async def put_branch_source(self, key: str, source: str) -> bool:
        return await self._changed(
            "INSERT INTO branch_sources (session_key, source) VALUES (?, ?) ON CONFLICT DO NOTHING",
            (key, source),
        )

    async def branch_source(self, key: str) -> str | None:
        return _text(
            await self._scalar("SELECT source FROM branch_sources WHERE session_key = ?", (key,))
        )

    async def record_run(self, key: str, run_id: str, result: str) -> bool:
        return await self._changed(
            "INSERT INTO runs (session_key, run_id, recorded, result) VALUES (?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            (key, run_id, time.time(), result),
        )

    async def runs(self, key: str) -> list[tuple[str, str]]:
        rows = await self._all(
            "SELECT run_id, result FROM runs WHERE session_key = ? "
            f"ORDER BY recorded, {self.insertion_order}",
            (key,),
        )
        return [(str(r), str(res)) for r, res in rows]

    async def set_run_workspace(self, key: str, run_chain: str, workspace: str) -> None:
        await self._count(
            "INSERT INTO run_workspaces (session_key, run_chain, workspace) VALUES (?, ?, ?) "
            "ON CONFLICT (session_key, run_chain) DO UPDATE SET workspace = excluded.workspace",
            (key, run_chain, workspace),
        )

    async def run_workspace(self, key: str, run_chain: str) -> str | None:
        return _text(
            await self._scalar(
                "SELECT workspace FROM run_workspaces WHERE session_key = ? AND run_chain = ?",
                (key, run_chain),
            )
        )

    async def mark_tool_call(self, key: str, tool_call_id: str, kind: str, value: str) -> bool:
        return await self._changed(
            "INSERT INTO tool_marks (session_key, tool_call_id, kind, value) "
            "VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (key, tool_call_id, kind, value),
        )

    async def tool_mark(self, key: str, tool_call_id: str, kind: str) -> str | None:
        return _text(
            await self._scalar(
                "SELECT value FROM tool_marks "
                "WHERE session_key = ? AND tool_call_id = ? AND kind = ?",
                (key, tool_call_id, kind),
            )
        )

    async def forget_tool_mark(self, key: str, tool_call_id: str, kind: str) -> None:
        await self._count(
            "DELETE FROM tool_marks WHERE session_key = ? AND tool_call_id = ? AND kind = ?",
            (key, tool_call_id, kind),
        )

    async def set_stream_start(self, key: str, run_id: str, offset: int) -> None:
        await self._count(
            "INSERT INTO stream_starts (session_key, run_id, stream_offset, updated) "
            "VALUES (?, ?, ?, ?) ON CONFLICT (session_key) DO UPDATE SET "
            "run_id = excluded.run_id, stream_offset = excluded.stream_offset, "
            "updated = excluded.updated",
            (key, run_id, offset, time.time()),
        )

    async def stream_start(self, key: str) -> tuple[str, int] | None:
        row = await self._one(
            "SELECT run_id, stream_offset FROM stream_starts WHERE session_key = ?", (key,)
        )
        return None if row is None else (str(row[0]), int(row[1]))

    # -- auth profiles ------------------------------------------------------------------------

    async def _write_profile(self, profile: ProfileRow, sealed: bytes) -> None:
        await self._count(
            "INSERT INTO auth_profiles (profile_id, provider, type, base_url, auth_header, sealed) "
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

    async def _read_profiles(self) -> list[tuple[ProfileRow, bytes]]:
        rows = await self._all(
            "SELECT profile_id, provider, type, base_url, auth_header, sealed "
            "FROM auth_profiles ORDER BY profile_id"
        )
        return [
            (ProfileRow(id=p, provider=pr, type=t, base_url=b, auth_header=h), bytes(s))
            for p, pr, t, b, h, s in rows
        ]

    async def delete_profile(self, profile_id: str) -> bool:
        return await self._changed("DELETE FROM auth_profiles WHERE profile_id = ?", (profile_id,))

    # -- shared profile usage -----------------------------------------------------------------

    _USAGE = "SELECT profile_id, usage, version FROM profile_usage"

    async def usage_rows(self) -> list[UsageRow]:
        rows = await self._all(self._USAGE + " ORDER BY profile_id")
        return [UsageRow(profile_id=p, usage=u, version=v) for p, u, v in rows]

    async def usage_row(self, profile_id: str) -> UsageRow | None:
        row = await self._one(self._USAGE + " WHERE profile_id = ?", (profile_id,))
        return None if row is None else UsageRow(profile_id=row[0], usage=row[1], version=row[2])

    async def set_usage(
        self,
        profile_id: str,
        expected_version: int | None,
        usage: str,
        *,
        last_good_for: str | None = None,
    ) -> bool:
        async def cas(tx: Tx) -> bool:
            if expected_version is None:
                changed = await tx.execute(
                    "INSERT INTO profile_usage (profile_id, usage, version) VALUES (?, ?, 1) "
                    "ON CONFLICT DO NOTHING",
                    (profile_id, usage),
                )
            else:
                changed = await tx.execute(
                    "UPDATE profile_usage SET usage = ?, version = version + 1 "
                    "WHERE profile_id = ? AND version = ?",
                    (usage, profile_id, expected_version),
                )
            if changed != 1:
                return False
            if last_good_for is not None:
                await tx.execute(
                    "INSERT INTO profile_last_good (provider, profile_id) VALUES (?, ?) "
                    "ON CONFLICT (provider) DO UPDATE SET profile_id = excluded.profile_id",
                    (last_good_for, profile_id),
                )
            return True

        return await self._session(cas, tx=True)

    async def last_good(self) -> dict[str, str]:
        rows = await self._all("SELECT provider, profile_id FROM profile_last_good")
        return {str(p): str(i) for p, i in rows}

    async def profile_orders(self) -> dict[str, list[str]]:
        rows = await self._all("SELECT provider, profile_ids FROM profile_order")
        return {str(p): list(json.loads(ids)) for p, ids in rows}

    async def set_profile_order(self, provider: str, order: list[str] | None) -> None:
        if order is None:
            await self._count("DELETE FROM profile_order WHERE provider = ?", (provider,))
        else:
            await self._count(
                "INSERT INTO profile_order (provider, profile_ids) VALUES (?, ?) "
                "ON CONFLICT (provider) DO UPDATE SET profile_ids = excluded.profile_ids",
                (provider, json.dumps(order)),
            )

    async def reset_profile_state(self) -> None:
        async def reset(tx: Tx) -> None:
            for table in ("profile_usage", "profile_last_good", "profile_order"):
                await tx.execute(f"DELETE FROM {table}", ())

        await self._session(reset, tx=True)

    # -- gateway tokens -----------------------------------------------------------------------

    async def add_token(self, token: TokenRow) -> bool:
        return await self._changed(
            "INSERT INTO gateway_tokens (token_id, name, prefixes, read_only, created, sha256) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (
                token.id,
                token.name,
                json.dumps(token.prefixes),
                token.read_only,
                token.created,
                token.sha256,
            ),
        )

    async def token(self, token_id: str) -> TokenRow | None:
        row = await self._one(_TOKEN_COLUMNS + " WHERE t.token_id = ?", (token_id,))
        return None if row is None else _token(row)

    async def tokens(self) -> list[TokenRow]:
        return [_token(r) for r in await self._all(_TOKEN_COLUMNS + " ORDER BY t.created")]

    async def revoke_token(self, token_id: str) -> bool:
        async def revoke(tx: Tx) -> bool:
            await tx.execute("DELETE FROM gateway_token_use WHERE token_id = ?", (token_id,))
            gone = await tx.execute("DELETE FROM gateway_tokens WHERE token_id = ?", (token_id,))
            return gone == 1

        return await self._session(revoke, tx=True)

    async def note_token_use(self, used: dict[str, float]) -> None:
        if not used:
            return

        async def note(tx: Tx) -> None:
            await tx.executemany(
                "INSERT INTO gateway_token_use (token_id, last_used) "
                "SELECT token_id, ? FROM gateway_tokens WHERE token_id = ? "
                "ON CONFLICT (token_id) DO UPDATE SET last_used = CASE "
                "WHEN excluded.last_used > gateway_token_use.last_used "
                "THEN excluded.last_used ELSE gateway_token_use.last_used END",
                # Sorted: two hosts noting the same tokens lock their rows in one order.
                [(ts, tid) for tid, ts in sorted(used.items())],
            )

        await self._session(note, tx=True)

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
        await self._count(
            "INSERT INTO webhook_secrets (ref, sealed, updated) VALUES (?, ?, ?) " + conflict,
            (ref, sealed, time.time()),
        )

    async def webhook_secret_refs(self) -> list[str]:
        return [str(r[0]) for r in await self._all("SELECT ref FROM webhook_secrets ORDER BY ref")]

    async def delivery_progress(self, delivery_id: str) -> str | None:
        return _text(
            await self._scalar(
                "SELECT progress FROM webhook_deliveries WHERE delivery_id = ?", (delivery_id,)
            )
        )

    async def save_delivery_progress(self, delivery_id: str, progress: str) -> None:
        await self._count(
            "INSERT INTO webhook_deliveries (delivery_id, progress, updated) "
            "VALUES (?, ?, ?) ON CONFLICT (delivery_id) DO UPDATE SET "
            "progress = excluded.progress, updated = excluded.updated",
            (delivery_id, progress, time.time()),
        )

    # -- offloaded payloads -----------------------------------------------------------------

    async def put_payload(
        self, digest: str, data: bytes, owner: PayloadOwnerRef | None = None
    ) -> None:
        async def put(tx: Tx) -> None:
            # An upsert, not DO NOTHING: it takes the row's lock, so a sweep deciding about
            # this payload waits for the owner row below (or has deleted it, and this inserts
            # it again). `created` moves forward: an unowned payload put again is kept anew.
            await tx.execute(
                "INSERT INTO payloads (digest, data, created, owned) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (digest) DO UPDATE SET created = excluded.created, "
                "owned = (payloads.owned OR excluded.owned)",
                (digest, data, time.time(), owner is not None),
            )
            if owner is not None:
                await tx.execute(
                    "INSERT INTO payload_owners (workflow_id, run_id, digest, stored) "
                    "VALUES (?, ?, ?, ?) ON CONFLICT (workflow_id, run_id, digest) "
                    "DO UPDATE SET stored = excluded.stored",
                    (owner.workflow_id, owner.run_id or "", digest, time.time()),
                )

        await self._session(put, tx=True)

    async def payload(self, digest: str) -> bytes | None:
        # Up to the offload limit's megabytes: never read on the caller's thread.
        rows = await self._all("SELECT data FROM payloads WHERE digest = ?", (digest,))
        value = rows[0][0] if rows else None
        return None if value is None else bytes(value)

    async def delete_payload(self, digest: str) -> bool:
        async def delete(tx: Tx) -> bool:
            await tx.execute("DELETE FROM payload_owners WHERE digest = ?", (digest,))
            return await tx.execute("DELETE FROM payloads WHERE digest = ?", (digest,)) == 1

        return await self._session(delete, tx=True)

    async def payload_owners(self) -> list[PayloadOwnerRef]:
        rows = await self._all(
            "SELECT workflow_id, run_id, MIN(stored) FROM payload_owners "
            "GROUP BY workflow_id, run_id ORDER BY 1, 2"
        )
        return [
            PayloadOwnerRef(workflow_id=w, run_id=r or None, oldest=float(t)) for w, r, t in rows
        ]

    async def release_payload_owner(self, owner: PayloadOwnerRef, stored_before: float) -> int:
        return await self._count(
            "DELETE FROM payload_owners WHERE workflow_id = ? AND run_id = ? AND stored < ?",
            (owner.workflow_id, owner.run_id or "", stored_before),
        )

    async def sweep_payloads(self, unowned_before: float) -> tuple[int, int]:
        orphan = "NOT EXISTS (SELECT 1 FROM payload_owners o WHERE o.digest = payloads.digest)"

        async def sweep(tx: Tx) -> tuple[int, int, bool]:
            # Lock the candidates first (PostgreSQL; in one order, so two hosts sweeping at once
            # never deadlock), then delete in a statement of its own: it sees every owner
            # committed meanwhile, so a payload just claimed stays.
            found = await tx.fetch(
                f"SELECT digest, length(data) FROM payloads WHERE {orphan} "
                "AND (owned = ? OR created < ?) "
                f"ORDER BY digest LIMIT {SWEEP_CHUNK}{self.lock_rows}",
                (True, unowned_before),
            )
            if not found:
                return 0, 0, False
            digests = [str(r[0]) for r in found]
            sizes = {str(r[0]): int(r[1]) for r in found}
            gone = await tx.fetch(
                f"DELETE FROM payloads WHERE digest IN ({marks(len(digests))}) AND {orphan} "
                "RETURNING digest",
                digests,
            )
            return len(gone), sum(sizes[str(r[0])] for r in gone), len(found) == SWEEP_CHUNK

        count = size = 0
        more = True
        while more:
            n, b, more = await self._session(sweep, tx=True)
            count, size = count + n, size + b
        return count, size
