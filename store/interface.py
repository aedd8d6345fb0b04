"""The one store interface: everything agentlane keeps outside Temporal, async.

Backends (`store/embedded.py`: SQLite in the data dir; PostgreSQL for many hosts) implement the
abstract `_`-less methods below; this base class adds only what must be the same everywhere:
secrets (provider keys, webhook secrets) are sealed with the payload key before they reach a
backend and opened after (`store/sealing.py`), so no backend ever sees them in clear when
encryption is on.

Rules every backend keeps (the contract tests in `tests/store/test_contract.py` check them):

- Transcript appends are idempotent by entry id (a unique key, never read-then-write), and a
  session holds at most one tool result per tool call id, even when two attempts race. An
  append is one transaction: all of a batch's new entries or none.
- Shared profile usage is written by compare-and-set on the row's version.
- Every multi-row change is one transaction.
- A lost connection raises (an ordinary exception): the activity fails and Temporal retries it;
  nothing half-written remains.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence

from agentlane.transcript import TranscriptEntry
from store.models import PayloadOwnerRef, ProfileRow, StoreStatus, TokenRow, UsageRow
from store.sealing import Sealer


class StoreError(Exception):
    """The store cannot be used (unreachable database, schema newer than this code, ...)."""


class Store(abc.ABC):
    """The interface. `backend` names it in `agentlane db status` and logs."""

    backend: str = "abstract"
    # What a call raises while the database cannot be reached for a while (restarting, a
    # network cut, a lock held too long): worth asking again, unlike any other failure.
    transient_errors: tuple[type[BaseException], ...] = ()

    def __init__(self, sealer: Sealer | None = None) -> None:
        self.sealer = sealer or Sealer(None)

    # -- lifecycle ---------------------------------------------------------------------------

    @abc.abstractmethod
    async def migrate(self, up_to: int | None = None) -> int:
        """Apply the migrations not applied yet (idempotent; `up_to`: stop after that version,
        for a test of one migration); return the schema version."""

    @abc.abstractmethod
    async def status(self) -> StoreStatus:
        """Backend, location, schema version and row counts per table."""

    @abc.abstractmethod
    async def close(self) -> None: ...

    # -- transcripts -------------------------------------------------------------------------

    async def append_entries(
        self, key: str, entries: Sequence[TranscriptEntry]
    ) -> list[TranscriptEntry]:
        """Append the entries not present yet, in one transaction; return those written.

        Skipped: an entry whose id the session has, and a tool result (role `tool` with a
        `tool_call_id`) for a call the session already has a result for (within the batch too).
        An entry without `parent_id` gets the id of the entry written before it.
        """
        return [entry for _, entry in await self.append_numbered(key, entries)]

    @abc.abstractmethod
    async def append_numbered(
        self, key: str, entries: Sequence[TranscriptEntry]
    ) -> list[tuple[int, TranscriptEntry]]:
        """`append_entries`, with the seq each written entry got (dense: the first is one above
        the session's last seq when the append began). A cache that had read up to the seq
        before the first takes them as written, without reading them back."""

    @abc.abstractmethod
    async def entries_after(self, key: str, seq: int = 0) -> list[tuple[int, TranscriptEntry]]:
        """The session's entries with a sequence number above `seq`, in order, with it."""

    @abc.abstractmethod
    async def context_floor(self, key: str) -> int:
        """The seq where the session's live context starts (`agentlane/context_floor.py`),
        recorded with the reset or compaction marker that set it; 0 when none is recorded."""

    @abc.abstractmethod
    async def record_context_floor(
        self, key: str, floor_seq: int, marker_seq: int, reset_seq: int
    ) -> None:
        """Record the floor that the marker at `marker_seq` sets (for a session written before
        floors were recorded); a floor recorded from a later marker stays."""

    @abc.abstractmethod
    async def run_start(self, key: str, run_id: str) -> int | None:
        """The seq of the run's first entry in the session; None when it has none."""

    @abc.abstractmethod
    async def entry(self, key: str, entry_id: str) -> TranscriptEntry | None: ...

    @abc.abstractmethod
    async def tool_result(self, key: str, tool_call_id: str) -> TranscriptEntry | None: ...

    @abc.abstractmethod
    async def session_keys(self) -> list[str]:
        """Every key with a transcript or a session record."""

    # -- session and run records ---------------------------------------------------------------

    @abc.abstractmethod
    async def put_session_record(self, key: str, record: str) -> None:
        """The session's recorded settings (JSON, shape owned by activities/session_records.py),
        replacing the previous one."""

    @abc.abstractmethod
    async def session_record(self, key: str) -> str | None: ...

    @abc.abstractmethod
    async def put_branch_source(self, key: str, source: str) -> bool:
        """Where the key was branched from (JSON): written once, never replaced; False when
        one was there already."""

    @abc.abstractmethod
    async def branch_source(self, key: str) -> str | None: ...

    @abc.abstractmethod
    async def record_run(self, key: str, run_id: str, result: str) -> bool:
        """A finished run's result (JSON), once per run id; False when already recorded."""

    @abc.abstractmethod
    async def runs(self, key: str) -> list[tuple[str, str]]:
        """(run id, result JSON) of the session's recorded runs, in the order recorded."""

    @abc.abstractmethod
    async def set_run_workspace(self, key: str, run_chain: str, workspace: str) -> None: ...

    @abc.abstractmethod
    async def run_workspace(self, key: str, run_chain: str) -> str | None: ...

    @abc.abstractmethod
    async def mark_tool_call(self, key: str, tool_call_id: str, kind: str, value: str) -> bool:
        """Note what an attempt of a tool call did (`kind`: exec-started, edit-applied), once:
        False (nothing written) when an earlier attempt noted it already."""

    @abc.abstractmethod
    async def tool_mark(self, key: str, tool_call_id: str, kind: str) -> str | None: ...

    @abc.abstractmethod
    async def forget_tool_mark(self, key: str, tool_call_id: str, kind: str) -> None:
        """Drop a note no attempt needs any more (its call's result is in the transcript)."""

    @abc.abstractmethod
    async def set_stream_start(self, key: str, run_id: str, offset: int) -> None:
        """The offset in the session's event stream at which `run_id` began: one row per
        session, overwritten by each run (one run at a time), so it never grows."""

    @abc.abstractmethod
    async def stream_start(self, key: str) -> tuple[str, int] | None:
        """(run id, offset) last recorded for the session."""

    # -- auth profiles (keys sealed here, stored by the backend) --------------------------------

    async def put_profile(self, profile: ProfileRow) -> None:
        await self._write_profile(
            profile.model_copy(update={"key": None, "headers": {}}),
            await self.sealer.seal_json({"key": profile.key, "headers": profile.headers}),
        )

    async def profiles(self) -> list[ProfileRow]:
        out = []
        for row, sealed in await self._read_profiles():
            secret = await self.sealer.open_json(sealed)
            out.append(
                row.model_copy(
                    update={"key": secret.get("key"), "headers": secret.get("headers") or {}}
                )
            )
        return out

    @abc.abstractmethod
    async def _write_profile(self, profile: ProfileRow, sealed: bytes) -> None:
        """Insert or replace the profile; `profile.key` and `headers` are empty, `sealed` holds
        them."""

    @abc.abstractmethod
    async def _read_profiles(self) -> list[tuple[ProfileRow, bytes]]: ...

    @abc.abstractmethod
    async def delete_profile(self, profile_id: str) -> bool: ...

    # -- shared profile usage and routing state --------------------------------------------------

    @abc.abstractmethod
    async def usage_rows(self) -> list[UsageRow]: ...

    @abc.abstractmethod
    async def usage_row(self, profile_id: str) -> UsageRow | None: ...

    @abc.abstractmethod
    async def set_usage(
        self,
        profile_id: str,
        expected_version: int | None,
        usage: str,
        *,
        last_good_for: str | None = None,
    ) -> bool:
        """Compare-and-set: write `usage` (JSON) when the row's version is still
        `expected_version` (None: the row must not exist yet), bumping the version; also
        record `profile_id` as `last_good_for`'s last good profile, in the same transaction.
        False (nothing written) when another writer got there first."""

    @abc.abstractmethod
    async def last_good(self) -> dict[str, str]:
        """provider -> the profile that last worked for it."""

    @abc.abstractmethod
    async def profile_orders(self) -> dict[str, list[str]]:
        """provider -> stored profile order override."""

    @abc.abstractmethod
    async def set_profile_order(self, provider: str, order: list[str] | None) -> None: ...

    @abc.abstractmethod
    async def reset_profile_state(self) -> None:
        """Forget every profile's usage, last-good mark and stored order, in one transaction
        (an operator's fresh start; tests)."""

    # -- gateway tokens --------------------------------------------------------------------------

    @abc.abstractmethod
    async def add_token(self, token: TokenRow) -> bool:
        """False when the id is taken (nothing written)."""

    @abc.abstractmethod
    async def token(self, token_id: str) -> TokenRow | None: ...

    @abc.abstractmethod
    async def tokens(self) -> list[TokenRow]: ...

    @abc.abstractmethod
    async def revoke_token(self, token_id: str) -> bool: ...

    @abc.abstractmethod
    async def note_token_use(self, used: dict[str, float]) -> None:
        """Last-used times (only ever moved forward), in one transaction."""

    # -- webhook secrets and delivery state ---------------------------------------------------

    async def webhook_secret(self, ref: str) -> bytes | None:
        sealed = await self._read_secret(ref)
        return None if sealed is None else await self.sealer.open(sealed)

    async def ensure_webhook_secret(self, ref: str, candidate: bytes) -> bytes:
        """The stored secret, storing `candidate` first if there is none (a racing writer's
        wins: everyone gets the same one)."""
        await self._write_secret(ref, await self.sealer.seal(candidate), replace=False)
        stored = await self.webhook_secret(ref)
        if stored is None:
            raise StoreError(f"webhook secret {ref!r} vanished right after it was stored")
        return stored

    async def set_webhook_secret(self, ref: str, secret: bytes) -> None:
        await self._write_secret(ref, await self.sealer.seal(secret), replace=True)

    @abc.abstractmethod
    async def _read_secret(self, ref: str) -> bytes | None: ...

    @abc.abstractmethod
    async def _write_secret(self, ref: str, sealed: bytes, *, replace: bool) -> None: ...

    @abc.abstractmethod
    async def webhook_secret_refs(self) -> list[str]: ...

    @abc.abstractmethod
    async def delivery_progress(self, delivery_id: str) -> str | None:
        """How far a webhook delivery got (JSON), whichever host worked on it."""

    @abc.abstractmethod
    async def save_delivery_progress(self, delivery_id: str, progress: str) -> None: ...

    # -- offloaded payloads (content-addressed, owned by the workflows that reference them) --

    @abc.abstractmethod
    async def put_payload(
        self, digest: str, data: bytes, owner: PayloadOwnerRef | None = None
    ) -> None:
        """Idempotent: the same digest is the same bytes. `owner`: the workflow whose history
        references it (kept until released); None: kept for the retention after its last put."""

    @abc.abstractmethod
    async def payload(self, digest: str) -> bytes | None: ...

    @abc.abstractmethod
    async def delete_payload(self, digest: str) -> bool: ...

    @abc.abstractmethod
    async def payload_owners(self) -> list[PayloadOwnerRef]: ...

    @abc.abstractmethod
    async def release_payload_owner(self, owner: PayloadOwnerRef, stored_before: float) -> int:
        """The owner no longer needs what it stored before `stored_before` (epoch seconds; its
        workflow closed since): how many payloads it let go."""

    @abc.abstractmethod
    async def sweep_payloads(self, unowned_before: float) -> tuple[int, int]:
        """Delete payloads no owner holds: once owned, at once; never owned, when last put
        before `unowned_before` (epoch seconds). A payload claimed by an owner meanwhile stays.
        (payloads, bytes) deleted."""
