"""The PostgreSQL store: every host of a deployment on one database, chosen by
`AGENTLANE_DATABASE_URL=postgresql://user:pass@host:5432/db`.

psycopg 3, async, through one `psycopg_pool.AsyncConnectionPool` per store object. How each rule
of the interface holds across hosts:

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

import json
import select
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from agentlane.transcript import TranscriptEntry
from store import migrations

# The same rows as the embedded store: the same entry body, the same tool-result key.
from store.embedded import COUNTED, entry_body, result_for
from store.interface import Store, StoreError
from store.models import ProfileRow, StoreStatus, TokenRow, UsageRow
from store.sealing import Sealer

DIALECT = "postgres"

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


async def _reset(conn: Conn) -> None:
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
    if conn.closed or conn.broken:
        return False
    since = _idle_since.get(conn)
    if since is not None and time.monotonic() - since < PING_AFTER_IDLE_S and not _has_unread(conn):
        return True
    try:
        await conn.execute("SELECT 1")
    except psycopg.Error:
        return False
    return True


class PostgresStore(Store):
    backend = "postgresql"

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

    async def _tx(self, fn: Callable[[Conn], Awaitable[T]]) -> T:
        """`fn` in one transaction: all of it or nothing (also when the connection drops)."""
        async with self._conn() as conn, conn.transaction():
            return await fn(conn)

    async def _one(self, sql: str, args: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        async with self._conn() as conn:
            cur = await conn.execute(sql, args)
            return await cur.fetchone()

    async def _all(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        async with self._conn() as conn:
            cur = await conn.execute(sql, args)
            return await cur.fetchall()

    async def _scalar(self, sql: str, args: Sequence[Any] = ()) -> Any:
        row = await self._one(sql, args)
        return None if row is None else row[0]

    async def _count(self, sql: str, args: Sequence[Any] = ()) -> int:
        """Rows a single statement changed (autocommit: it is its own transaction)."""
        async with self._conn() as conn:
            cur = await conn.execute(sql, args)
            return cur.rowcount

    async def _changed(self, sql: str, args: Sequence[Any] = ()) -> bool:
        """Whether a single statement changed exactly one row."""
        return await self._count(sql, args) == 1

    # -- lifecycle ----------------------------------------------------------------------------

    @staticmethod
    async def _version(conn: Conn) -> int:
        cur = await conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL")
        row = await cur.fetchone()
        if not row or not row[0]:
            return 0
        cur = await conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations")
        row = await cur.fetchone()
        return int(row[0]) if row else 0

    async def migrate(self) -> int:
        known = migrations.load(DIALECT)
        async with self._conn() as conn:
            version = await self._version(conn)
            if version == len(known):
                return version
            async with conn.transaction():
                # Whoever holds this lock migrates; the others wait, then find nothing to do.
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
                await conn.execute(
                    "CREATE TABLE IF NOT EXISTS schema_migrations "
                    "(version INTEGER PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)"
                )
                version = await self._version(conn)
                if version > len(known):
                    raise StoreError(
                        f"{redact(self.url)} has schema version {version}, newer than this "
                        f"agentlane knows ({len(known)}): upgrade agentlane"
                    )
                for migration in known[version:]:
                    for statement in migration.statements:
                        await conn.execute(statement.encode())
                    await conn.execute(
                        "INSERT INTO schema_migrations (version, applied_at) VALUES (%s, %s)",
                        (migration.version, time.time()),
                    )
                    version = migration.version
            return version

    async def status(self) -> StoreStatus:
        async with self._conn() as conn:
            version = await self._version(conn)
            counts: dict[str, int] = {}
            if version:
                for table in COUNTED:
                    cur = await conn.execute(f"SELECT COUNT(*) FROM {table}".encode())
                    row = await cur.fetchone()
                    counts[table] = int(row[0]) if row else 0
                counts["sessions"] = len(await self._keys(conn))
        return StoreStatus(
            backend=self.backend,
            location=redact(self.url),
            schema_version=version,
            latest_version=migrations.latest(DIALECT),
            counts=counts,
        )

    async def close(self) -> None:
        await self._pool.close()

    # -- transcripts --------------------------------------------------------------------------

    async def append_entries(
        self, key: str, entries: Sequence[TranscriptEntry]
    ) -> list[TranscriptEntry]:
        if not entries:
            return []

        ids = [e.id for e in entries]
        calls = [c for c in (result_for(e) for e in entries) if c is not None]
        async with self._conn() as conn, conn.pipeline() as pipeline, conn.transaction():
            # Appends to one session take turns across hosts (other sessions never wait): the
            # next seq is read and written under this lock, released at commit or rollback.
            # Queued together with the two reads: one round trip.
            await conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (APPEND_LOCK, key))
            last_cur = await conn.execute(
                "SELECT seq, entry_id FROM transcript_entries WHERE session_key = %s "
                "ORDER BY seq DESC LIMIT 1",
                (key,),
            )
            seen_cur = await conn.execute(
                "SELECT entry_id, result_for FROM transcript_entries WHERE session_key = %s "
                "AND (entry_id = ANY(%s) OR result_for = ANY(%s))",
                (key, ids, calls),
            )
            last = await last_cur.fetchone()
            seen = await seen_cur.fetchall()
            seq, last_id = (int(last[0]), str(last[1])) if last else (0, None)
            seen_ids = {str(r[0]) for r in seen}
            seen_calls = {str(r[1]) for r in seen if r[1] is not None}
            # Which entries are new decides their seq and default parent; the unique keys
            # below still decide what is written (a conflict there rolls the batch back).
            written: list[TranscriptEntry] = []
            inserts = []
            for entry in entries:
                call = result_for(entry)
                if entry.id in seen_ids or (call is not None and call in seen_calls):
                    continue
                if entry.parent_id is None and last_id is not None:
                    entry = entry.model_copy(update={"parent_id": last_id})
                seq += 1
                inserts.append(
                    await conn.execute(
                        "INSERT INTO transcript_entries "
                        "(session_key, seq, entry_id, result_for, body) "
                        "VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                        (key, seq, entry.id, call, entry_body(entry)),
                    )
                )
                seen_ids.add(entry.id)
                if call is not None:
                    seen_calls.add(call)
                last_id = entry.id
                written.append(entry)
            await pipeline.sync()
            if any(cur.rowcount != 1 for cur in inserts):
                raise StoreError(
                    f"transcript {key!r}: an append under the session's lock met an entry it "
                    "had not seen; nothing of this batch was written"
                )
        return written

    async def entries_after(self, key: str, seq: int = 0) -> list[tuple[int, TranscriptEntry]]:
        rows = await self._all(
            "SELECT seq, body FROM transcript_entries WHERE session_key = %s AND seq > %s "
            "ORDER BY seq",
            (key, seq),
        )
        return [(int(s), TranscriptEntry.model_validate_json(body)) for s, body in rows]

    async def _one_entry(self, sql: str, args: tuple[Any, ...]) -> TranscriptEntry | None:
        body = await self._scalar(sql, args)
        return None if body is None else TranscriptEntry.model_validate_json(body)

    async def entry(self, key: str, entry_id: str) -> TranscriptEntry | None:
        return await self._one_entry(
            "SELECT body FROM transcript_entries WHERE session_key = %s AND entry_id = %s",
            (key, entry_id),
        )

    async def tool_result(self, key: str, tool_call_id: str) -> TranscriptEntry | None:
        return await self._one_entry(
            "SELECT body FROM transcript_entries WHERE session_key = %s AND result_for = %s",
            (key, tool_call_id),
        )

    @staticmethod
    async def _keys(conn: Conn) -> list[str]:
        cur = await conn.execute(
            "SELECT DISTINCT session_key FROM transcript_entries "
            "UNION SELECT session_key FROM session_records ORDER BY 1"
        )
        return [str(r[0]) for r in await cur.fetchall()]

    async def session_keys(self) -> list[str]:
        async with self._conn() as conn:
            return await self._keys(conn)

    # -- session and run records ----------------------------------------------------------------

    async def put_session_record(self, key: str, record: str) -> None:
        await self._count(
            "INSERT INTO session_records (session_key, record, updated) VALUES (%s, %s, %s) "
            "ON CONFLICT (session_key) DO UPDATE SET record = excluded.record, "
            "updated = excluded.updated",
            (key, record, time.time()),
        )

    async def session_record(self, key: str) -> str | None:
        value = await self._scalar(
            "SELECT record FROM session_records WHERE session_key = %s", (key,)
        )
        return None if value is None else str(value)

    async def put_branch_source(self, key: str, source: str) -> bool:
        return await self._changed(
            "INSERT INTO branch_sources (session_key, source) VALUES (%s, %s) "
            "ON CONFLICT DO NOTHING",
            (key, source),
        )

    async def branch_source(self, key: str) -> str | None:
        value = await self._scalar(
            "SELECT source FROM branch_sources WHERE session_key = %s", (key,)
        )
        return None if value is None else str(value)

    async def record_run(self, key: str, run_id: str, result: str) -> bool:
        return await self._changed(
            "INSERT INTO runs (session_key, run_id, recorded, result) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT DO NOTHING",
            (key, run_id, time.time(), result),
        )

    async def runs(self, key: str) -> list[tuple[str, str]]:
        rows = await self._all(
            "SELECT run_id, result FROM runs WHERE session_key = %s ORDER BY recorded, position",
            (key,),
        )
        return [(str(r), str(res)) for r, res in rows]

    async def set_run_workspace(self, key: str, run_chain: str, workspace: str) -> None:
        await self._count(
            "INSERT INTO run_workspaces (session_key, run_chain, workspace) VALUES (%s, %s, %s) "
            "ON CONFLICT (session_key, run_chain) DO UPDATE SET workspace = excluded.workspace",
            (key, run_chain, workspace),
        )

    async def run_workspace(self, key: str, run_chain: str) -> str | None:
        value = await self._scalar(
            "SELECT workspace FROM run_workspaces WHERE session_key = %s AND run_chain = %s",
            (key, run_chain),
        )
        return None if value is None else str(value)

    async def mark_tool_call(self, key: str, tool_call_id: str, kind: str, value: str) -> bool:
        return await self._changed(
            "INSERT INTO tool_marks (session_key, tool_call_id, kind, value) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
            (key, tool_call_id, kind, value),
        )

    async def tool_mark(self, key: str, tool_call_id: str, kind: str) -> str | None:
        value = await self._scalar(
            "SELECT value FROM tool_marks "
            "WHERE session_key = %s AND tool_call_id = %s AND kind = %s",
            (key, tool_call_id, kind),
        )
        return None if value is None else str(value)

    # -- auth profiles ------------------------------------------------------------------------

    async def _write_profile(self, profile: ProfileRow, sealed: bytes) -> None:
        await self._count(
            "INSERT INTO auth_profiles (profile_id, provider, type, base_url, auth_header, sealed) "
            "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (profile_id) DO UPDATE SET "
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
        return await self._changed("DELETE FROM auth_profiles WHERE profile_id = %s", (profile_id,))

    # -- shared profile usage -----------------------------------------------------------------

    async def usage_rows(self) -> list[UsageRow]:
        rows = await self._all(
            "SELECT profile_id, usage, version FROM profile_usage ORDER BY profile_id"
        )
        return [UsageRow(profile_id=p, usage=u, version=v) for p, u, v in rows]

    async def usage_row(self, profile_id: str) -> UsageRow | None:
        row = await self._one(
            "SELECT profile_id, usage, version FROM profile_usage WHERE profile_id = %s",
            (profile_id,),
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
        async def cas(conn: Conn) -> bool:
            if expected_version is None:
                cur = await conn.execute(
                    "INSERT INTO profile_usage (profile_id, usage, version) VALUES (%s, %s, 1) "
                    "ON CONFLICT DO NOTHING",
                    (profile_id, usage),
                )
            else:
                cur = await conn.execute(
                    "UPDATE profile_usage SET usage = %s, version = version + 1 "
                    "WHERE profile_id = %s AND version = %s",
                    (usage, profile_id, expected_version),
                )
            if cur.rowcount != 1:
                return False
            if last_good_for is not None:
                await conn.execute(
                    "INSERT INTO profile_last_good (provider, profile_id) VALUES (%s, %s) "
                    "ON CONFLICT (provider) DO UPDATE SET profile_id = excluded.profile_id",
                    (last_good_for, profile_id),
                )
            return True

        return await self._tx(cas)

    async def last_good(self) -> dict[str, str]:
        rows = await self._all("SELECT provider, profile_id FROM profile_last_good")
        return {str(p): str(i) for p, i in rows}

    async def profile_orders(self) -> dict[str, list[str]]:
        rows = await self._all("SELECT provider, profile_ids FROM profile_order")
        return {str(p): list(json.loads(ids)) for p, ids in rows}

    async def set_profile_order(self, provider: str, order: list[str] | None) -> None:
        if order is None:
            await self._count("DELETE FROM profile_order WHERE provider = %s", (provider,))
        else:
            await self._count(
                "INSERT INTO profile_order (provider, profile_ids) VALUES (%s, %s) "
                "ON CONFLICT (provider) DO UPDATE SET profile_ids = excluded.profile_ids",
                (provider, json.dumps(order)),
            )

    async def reset_profile_state(self) -> None:
        async def reset(conn: Conn) -> None:
            for table in ("profile_usage", "profile_last_good", "profile_order"):
                await conn.execute(f"DELETE FROM {table}".encode())

        await self._tx(reset)

    # -- gateway tokens -----------------------------------------------------------------------

    async def add_token(self, token: TokenRow) -> bool:
        return await self._changed(
            "INSERT INTO gateway_tokens (token_id, name, prefixes, read_only, created, sha256) "
            "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            (
                token.id,
                token.name,
                json.dumps(token.prefixes),
                token.read_only,
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
        row = await self._one(self._TOKEN_COLUMNS + " WHERE t.token_id = %s", (token_id,))
        return None if row is None else self._token(row)

    async def tokens(self) -> list[TokenRow]:
        rows = await self._all(self._TOKEN_COLUMNS + " ORDER BY t.created")
        return [self._token(r) for r in rows]

    async def revoke_token(self, token_id: str) -> bool:
        async def revoke(conn: Conn) -> bool:
            await conn.execute("DELETE FROM gateway_token_use WHERE token_id = %s", (token_id,))
            cur = await conn.execute("DELETE FROM gateway_tokens WHERE token_id = %s", (token_id,))
            return cur.rowcount == 1

        return await self._tx(revoke)

    async def note_token_use(self, used: dict[str, float]) -> None:
        if not used:
            return

        async def note(conn: Conn) -> None:
            async with conn.cursor() as cur:
                await cur.executemany(
                    "INSERT INTO gateway_token_use (token_id, last_used) "
                    "SELECT token_id, %s FROM gateway_tokens WHERE token_id = %s "
                    "ON CONFLICT (token_id) DO UPDATE SET last_used = "
                    "GREATEST(gateway_token_use.last_used, excluded.last_used)",
                    # Sorted: two hosts noting the same tokens lock their rows in one order.
                    [(ts, tid) for tid, ts in sorted(used.items())],
                )

        await self._tx(note)

    # -- webhook secrets and deliveries ----------------------------------------------------

    async def _read_secret(self, ref: str) -> bytes | None:
        value = await self._scalar("SELECT sealed FROM webhook_secrets WHERE ref = %s", (ref,))
        return None if value is None else bytes(value)

    async def _write_secret(self, ref: str, sealed: bytes, *, replace: bool) -> None:
        conflict = (
            "ON CONFLICT (ref) DO UPDATE SET sealed = excluded.sealed, updated = excluded.updated"
            if replace
            else "ON CONFLICT DO NOTHING"
        )
        await self._count(
            "INSERT INTO webhook_secrets (ref, sealed, updated) VALUES (%s, %s, %s) " + conflict,
            (ref, sealed, time.time()),
        )

    async def webhook_secret_refs(self) -> list[str]:
        rows = await self._all("SELECT ref FROM webhook_secrets ORDER BY ref")
        return [str(r[0]) for r in rows]

    async def delivery_progress(self, delivery_id: str) -> str | None:
        value = await self._scalar(
            "SELECT progress FROM webhook_deliveries WHERE delivery_id = %s", (delivery_id,)
        )
        return None if value is None else str(value)

    async def save_delivery_progress(self, delivery_id: str, progress: str) -> None:
        await self._count(
            "INSERT INTO webhook_deliveries (delivery_id, progress, updated) "
            "VALUES (%s, %s, %s) ON CONFLICT (delivery_id) DO UPDATE SET "
            "progress = excluded.progress, updated = excluded.updated",
            (delivery_id, progress, time.time()),
        )

    # -- payloads -------------------------------------------------------------------------------

    async def put_payload(self, digest: str, data: bytes) -> None:
        await self._count(
            "INSERT INTO payloads (digest, data, created) VALUES (%s, %s, %s) "
            "ON CONFLICT DO NOTHING",
            (digest, data, time.time()),
        )

    async def payload(self, digest: str) -> bytes | None:
        value = await self._scalar("SELECT data FROM payloads WHERE digest = %s", (digest,))
        return None if value is None else bytes(value)

    async def delete_payload(self, digest: str) -> bool:
        return await self._changed("DELETE FROM payloads WHERE digest = %s", (digest,))


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
