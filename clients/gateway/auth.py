"""Who may do what through the gateway: bearer tokens, their scopes, and rate limits.

A token is `agl_<id>_<secret>` (32 random bytes): shown once, when it is made, and stored only
as its SHA-256 in `<data dir>/gateway-tokens.json` (0600, written by the CLI alone). A token can
be limited to session-key prefixes (`slack:T1:`) and made read-only. The gateway re-reads the
file when it changes, so a new or revoked token counts at once without a restart. When each
token was last used is kept apart (`gateway-tokens-used.json`, written by the gateway alone) so
the two writers never overwrite each other.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, Field

from agentlane.private_files import write_private

TOKEN_PREFIX = "agl_"
_TOKEN_SHAPE = re.compile(r"^agl_([0-9a-f]{8})_[A-Za-z0-9_-]{20,}$")
# A prefix is the start of a session key: the key alphabet (agentlane/ids.py), not empty.
_PREFIX_SHAPE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@:-]{0,127}$")
# How often the last-used times are written back (they are kept in memory in between).
USED_FLUSH_SECONDS = 30.0


class TokenError(ValueError):
    pass


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


class TokenFile(BaseModel):
    tokens: list[TokenRecord] = Field(default_factory=list)


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


class TokenStore:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "gateway-tokens.json"
        self.used_path = data_dir / "gateway-tokens-used.json"
        self._stamp: tuple[int, int] | None = None
        self._records: dict[str, TokenRecord] = {}
        self._used: dict[str, float] = {}
        self._used_dirty = False
        self._used_flushed = 0.0

    # -- the file (CLI side) -----------------------------------------------------------------

    def _read(self) -> TokenFile:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return TokenFile()
        return TokenFile.model_validate_json(raw or b"{}")

    def _write(self, content: TokenFile) -> None:
        write_private(self.path, content.model_dump_json(indent=2).encode())

    def create(
        self, name: str = "", prefixes: list[str] | None = None, read_only: bool = False
    ) -> tuple[TokenRecord, str]:
        """A new token: its record, and the token itself (shown once, never stored)."""
        scopes = [check_prefix(p) for p in prefixes or []]
        content = self._read()
        taken = {r.id for r in content.tokens}
        token_id = secrets.token_hex(4)
        while token_id in taken:
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
        content.tokens.append(record)
        self._write(content)
        return record, token

    def revoke(self, token_id: str) -> bool:
        content = self._read()
        kept = [r for r in content.tokens if r.id != token_id]
        if len(kept) == len(content.tokens):
            return False
        self._write(TokenFile(tokens=kept))
        return True

    def list(self) -> list[TokenInfo]:
        used = self._read_used()
        return [
            TokenInfo(
                id=r.id,
                name=r.name,
                prefixes=r.prefixes,
                read_only=r.read_only,
                created=r.created,
                last_used=used.get(r.id),
            )
            for r in self._read().tokens
        ]

    def _read_used(self) -> dict[str, float]:
        try:
            raw = self.used_path.read_bytes()
        except FileNotFoundError:
            return {}
        try:
            data = TokenUse.model_validate_json(raw or b"{}")
        except ValueError:
            return {}
        return dict(data.last_used)

    # -- verification (gateway side) -----------------------------------------------------------

    def _refresh(self) -> None:
        try:
            st = self.path.stat()
            stamp: tuple[int, int] | None = (st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            stamp = None
        if stamp == self._stamp and self._stamp is not None:
            return
        self._records = {r.id: r for r in self._read().tokens} if stamp else {}
        self._stamp = stamp
        if not self._used:
            self._used = self._read_used()

    def verify(self, token: str) -> TokenRecord | None:
        """The token's record if it is a live token, else None (constant-time comparison)."""
        self._refresh()
        match = _TOKEN_SHAPE.fullmatch(token)
        digest = _digest(token)
        record = self._records.get(match.group(1)) if match else None
        expected = record.sha256 if record else "0" * 64
        if not hmac.compare_digest(digest, expected) or record is None:
            return None
        self._note_use(record.id)
        return record

    def _note_use(self, token_id: str) -> None:
        now = time.time()
        self._used[token_id] = now
        self._used_dirty = True
        if now - self._used_flushed >= USED_FLUSH_SECONDS:
            self.flush_used()

    def flush_used(self) -> None:
        if not self._used_dirty:
            return
        live = {k: v for k, v in self._used.items() if k in self._records}
        write_private(self.used_path, TokenUse(last_used=live).model_dump_json().encode())
        self._used_dirty = False
        self._used_flushed = time.time()


class TokenUse(BaseModel):
    last_used: dict[str, float] = Field(default_factory=dict)


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
