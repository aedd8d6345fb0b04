"""Who may do what through the gateway: bearer tokens, their scopes, and rate limits.

A token is `agl_<id>_<secret>` (32 random bytes): shown once, when it is made, and stored only
as its SHA-256 in the store (`store/`, shared by every gateway host that reaches it). A token
can be limited to session-key prefixes (`slack:T1:`) and made read-only. The gateway looks the
token up at each request, so a new or revoked token counts at once, on every host, without a
restart. When each token was last used is kept apart (its own table, only ever moved forward)
and written in batches, so the CLI's writes and the gateways' never overwrite each other.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import math
import os
import re
import secrets
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from pydantic import BaseModel, Field

from agentlane.settings import Settings
from store.interface import Store
from store.models import TokenRow
from store.open import describe, shared_store
from store.sync import run_sync

TOKEN_PREFIX = "agl_"
_TOKEN_SHAPE = re.compile(r"^agl_([0-9a-f]{8})_[A-Za-z0-9_-]{20,}$")
# A prefix is the start of a session key: the key alphabet (agentlane/ids.py), not empty.
_PREFIX_SHAPE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@:-]{0,127}$")
# How often the last-used times are written back (they are kept in memory in between).
USED_FLUSH_SECONDS = 30.0
# How long a request waits for the store to look its token up before the gateway says it is
# unavailable (a PostgreSQL restart took the pool's 20 s per request, then a bare 500).
STORE_WAIT_SECONDS = 3.0
# A token verified this recently is taken on its last verification while the store cannot be
# reached: a few seconds' outage fails no request of a known client.
VERIFIED_GRACE_SECONDS = 120.0
MAX_VERIFIED = 10_000


class TokenError(ValueError):
    pass


class StoreUnavailable(RuntimeError):
    """The store holding the tokens could not be reached in time."""


MAX_NAME_CHARS = 200


class TokenRecord(BaseModel):
    """One token as stored: never the token itself."""

    id: str
    name: str = ""
    prefixes: list[str] = Field(default_factory=list)
    read_only: bool = False
    created: float
    sha256: str

    def allows_key(self, key: str) -> bool:
        return not self.prefixes or any(key.startswith(p) for p in self.prefixes)


class TokenInfo(BaseModel):
    """What `token list` shows."""

    id: str
    name: str
    prefixes: list[str]
    read_only: bool
    created: float
    last_used: float | None = None


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", errors="replace")).hexdigest()


def check_prefix(prefix: str) -> str:
    if not _PREFIX_SHAPE.fullmatch(prefix) or ".." in prefix:
        raise TokenError(
            f"invalid prefix {prefix!r}: a session-key prefix uses letters, digits and ._@:- "
            "and starts with a letter or digit"
        )
    return prefix


async def _add(row: TokenRow, store: Store) -> bool:
    return await store.add_token(row)


class TokenStore:
    """The CLI's side is synchronous (each call opens the store); the gateway's (`averify`,
    `aflush_used`) uses the process's shared store."""

    def __init__(self, place: Settings | Path) -> None:
        self.settings = (
            place
            if isinstance(place, Settings)
            else Settings(
                data_dir=place, database_url=os.environ.get("AGENTLANE_DATABASE_URL") or None
            )
        )
        self._used: dict[str, float] = {}
        self._used_flushed = 0.0
        # token digest -> (its record, when it was last verified against the store)
        self._verified: dict[str, tuple[TokenRecord, float]] = {}

    def where(self) -> str:
        return describe(self.settings)

    # -- the CLI side --------------------------------------------------------------------------

    def create(
        self, name: str = "", prefixes: list[str] | None = None, read_only: bool = False
    ) -> tuple[TokenRecord, str]:
        """A new token: its record, and the token itself (shown once, never stored)."""
        if len(name) > MAX_NAME_CHARS or any(ord(c) < 32 or ord(c) == 127 for c in name):
            raise TokenError(
                f"a token's name is at most {MAX_NAME_CHARS} characters, without control "
                "characters (it is printed by `token list`)"
            )
        scopes = [check_prefix(p) for p in prefixes or []]
        while True:
            token_id = secrets.token_hex(4)
            token = f"{TOKEN_PREFIX}{token_id}_{secrets.token_urlsafe(32)}"
            record = TokenRecord(
                id=token_id,
                name=name,
                prefixes=scopes,
                read_only=read_only,
                created=time.time(),
                sha256=_digest(token),
            )
            # The id is the key: a taken one (one in 4 billion) is simply drawn again.
            if run_sync(self.settings, partial(_add, TokenRow(**record.model_dump()))):
                return record, token

    def revoke(self, token_id: str) -> bool:
        return run_sync(self.settings, lambda store: store.revoke_token(token_id))

    def list(self) -> list[TokenInfo]:
        rows = run_sync(self.settings, lambda store: store.tokens())
        return [
            TokenInfo(
                id=r.id,
                name=r.name,
                prefixes=r.prefixes,
                read_only=r.read_only,
                created=r.created,
                last_used=r.last_used,
            )
            for r in rows
        ]

    # -- verification (gateway side) -----------------------------------------------------------

    @staticmethod
    def _check(token: str, row: TokenRow | None) -> TokenRecord | None:
        digest = _digest(token)
        expected = row.sha256 if row else "0" * 64
        if not hmac.compare_digest(digest, expected) or row is None:
            return None
        return TokenRecord.model_validate(row.model_dump(exclude={"last_used"}))

    async def _row(self, token_id: str) -> TokenRow | None:
        """The token's row; `StoreUnavailable` when the store does not answer in time."""
        try:
            async with asyncio.timeout(STORE_WAIT_SECONDS):
                store = await shared_store(self.settings)
                return await store.token(token_id)
        except (TimeoutError, OSError) as err:
            raise StoreUnavailable(f"the store did not answer: {err or 'timed out'}") from None
        except Exception as err:  # the driver's own (psycopg's pool timeout, a lost server)
            raise StoreUnavailable(f"the store did not answer: {err}") from None

    async def averify(self, token: str) -> TokenRecord | None:
        """The token's record if it is a live token, else None (constant-time comparison).
        While the store cannot be reached, a token verified within the last
        `VERIFIED_GRACE_SECONDS` is taken on that verification; another raises
        `StoreUnavailable`."""
        match = _TOKEN_SHAPE.fullmatch(token)
        digest = _digest(token)
        try:
            row = await self._row(match.group(1)) if match else None
        except StoreUnavailable:
            known = self._verified.get(digest)
            if known is not None and time.monotonic() - known[1] < VERIFIED_GRACE_SECONDS:
                return known[0]
            raise
        record = self._check(token, row)
        if record is None:
            self._verified.pop(digest, None)
            return None
        if len(self._verified) >= MAX_VERIFIED:
            self._verified.clear()
        self._verified[digest] = (record, time.monotonic())
        try:
            await self._note_use(record.id)
        except Exception:  # noqa: BLE001 - a note of use, kept for the next flush
            pass
        return record

    async def alive(self, record: TokenRecord) -> bool:
        """Whether the token `record` was verified as still is (not revoked since). While the
        store cannot be reached it is taken as alive (asked again at the next check): an
        outage must not cut every open stream."""
        try:
            row = await self._row(record.id)
        except StoreUnavailable:
            return True
        return row is not None and hmac.compare_digest(row.sha256, record.sha256)

    def verify(self, token: str) -> TokenRecord | None:
        """`averify` for synchronous callers (tests, tools)."""
        match = _TOKEN_SHAPE.fullmatch(token)
        row = run_sync(self.settings, lambda store: store.token(match.group(1))) if match else None
        record = self._check(token, row)
        if record is not None:
            self._used[record.id] = time.time()
        return record

    async def _note_use(self, token_id: str) -> None:
        now = time.time()
        self._used[token_id] = now
        if now - self._used_flushed >= USED_FLUSH_SECONDS:
            await self.aflush_used()

    async def aflush_used(self) -> None:
        if not self._used:
            return
        used, self._used = self._used, {}
        self._used_flushed = time.time()
        await (await shared_store(self.settings)).note_token_use(used)

    def flush_used(self) -> None:
        if self._used:
            used, self._used = self._used, {}
            self._used_flushed = time.time()
            run_sync(self.settings, lambda store: store.note_token_use(used))


@dataclass
class _Bucket:
    tokens: float
    stamp: float


@dataclass
class RateLimiter:
    """A token bucket per bearer token: `rate` requests a second sustained, `burst` at once."""

    rate: float
    burst: int
    buckets: dict[str, _Bucket] = field(default_factory=dict)

    def take(self, who: str, now: float | None = None) -> float:
        """0 when the request may go ahead, else how many seconds until it may."""
        if self.rate <= 0:
            return 0.0
        now = time.monotonic() if now is None else now
        bucket = self.buckets.get(who)
        if bucket is None:
            bucket = self.buckets[who] = _Bucket(float(self.burst), now)
        bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.stamp) * self.rate)
        bucket.stamp = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return 0.0
        return (1.0 - bucket.tokens) / self.rate

    @staticmethod
    def retry_after(wait: float) -> str:
        return str(max(1, math.ceil(wait)))
