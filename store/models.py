"""Rows the store hands back that are not already contracts in `agentlane/`."""

from __future__ import annotations

from pydantic import BaseModel, Field


class StoredEntry(BaseModel):
    """A transcript entry's place: `seq` grows by one per entry within a session, so a reader
    that has seen up to `seq` fetches only what came after it."""

    seq: int
    body: bytes


class ProfileRow(BaseModel):
    """One auth profile as stored. `key` and `headers` are secrets: the backend keeps them
    encrypted at rest when a payload key is configured (`agentlane/encryption.py`)."""

    id: str
    provider: str
    type: str = "api_key"
    key: str | None = None
    base_url: str | None = None
    auth_header: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)

    def __repr__(self) -> str:
        return (
            f"ProfileRow(id={self.id!r}, provider={self.provider!r}, type={self.type!r}, "
            f"key=<redacted>, headers={sorted(self.headers)!r})"
        )

    __str__ = __repr__


class UsageRow(BaseModel):
    """One profile's shared usage (JSON of `agentlane.profile_state.ProfileUsage`) and the
    row's version, which every write bumps (compare-and-set)."""

    profile_id: str
    usage: str
    version: int


class TokenRow(BaseModel):
    """A gateway token as stored: never the token itself, only its SHA-256."""

    id: str
    name: str = ""
    prefixes: list[str] = Field(default_factory=list)
    read_only: bool = False
    created: float
    sha256: str
    last_used: float | None = None


class StoreStatus(BaseModel):
    backend: str
    location: str
    schema_version: int
    latest_version: int
    counts: dict[str, int] = Field(default_factory=dict)


class PayloadOwnerRef(BaseModel):
    """A workflow whose history references offloaded payloads (the SDK names it in the store
    context). `run_id` None: any run of the id (a child's input, stored before the child had a
    run id)."""

    workflow_id: str
    run_id: str | None = None
    # As listed by the store: when the owner's oldest payload was stored (epoch seconds).
    oldest: float = 0.0
