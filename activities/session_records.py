"""Restores a reopened session's settings and records the settings in force (one local activity
when a session chain starts, and again when its queue settings change), in the store."""

from __future__ import annotations

import json
import logging
from typing import Any

from temporalio import activity
from temporalio.contrib.workflow_streams import WorkflowStreamClient

from agentlane.ids import events_workflow_id
from agentlane.queue_settings import DedupeEntry, QueueOptions
from agentlane.session import BranchSource, SessionSettings
from agentlane.session_records import (
    RECORD_SESSION,
    RESTORE_SESSION,
    RecordSessionInput,
    RestoredSession,
    RestoreSessionInput,
    SessionTotals,
)
from store.interface import Store

log = logging.getLogger(__name__)


class SessionRecords:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def _runs_numbered(self, key: str, recorded: int) -> int:
        """The highest run number any incarnation of the key used: the recorded count, or the
        runs recorded at their end (a session that was never closed cleanly recorded no
        count)."""
        highest = recorded
        for run_id, _ in await self.store.runs(key):
            try:
                highest = max(highest, int(run_id.rsplit(":run:", 1)[1]))
            except (ValueError, IndexError):
                continue
        return highest

    async def pinned_host(self, key: str) -> str | None:
        """The host a session's workspace is on as its runs found it (each run's result
        records it at the run's end), for a session whose record does not say yet: the record
        is written when the session starts and closes, the pin is learned in between."""
        for _, result in reversed(await self.store.runs(key)):
            try:
                host = json.loads(result).get("workspace_host")
            except (ValueError, AttributeError):
                continue
            if isinstance(host, str) and host:
                return host
        return None

    async def _merge(self, inp: RestoreSessionInput) -> RestoredSession:
        restored = await self._merge_settings(inp)
        restored.run_count = await self._runs_numbered(inp.key, restored.run_count)
        restored.branch = await self.branch_of(inp.key)
        return restored

    async def _raw(self, key: str) -> dict[str, Any] | None:
        text = await self.store.session_record(key)
        if text is None:
            return None
        try:
            recorded = json.loads(text)
            SessionSettings.model_validate(recorded["settings"])
        except (ValueError, KeyError, TypeError) as err:
            log.warning("session %s: ignoring an unreadable session record: %s", key, err)
            return None
        return dict(recorded)

    async def recorded(self, key: str) -> tuple[SessionSettings, QueueOptions | None] | None:
        """The settings the key's session recorded last, None if none (or unreadable)."""
        recorded = await self._raw(key)
        if recorded is None:
            return None
        try:
            settings = SessionSettings.model_validate(recorded["settings"])
            raw = recorded.get("queue_override")
            override = QueueOptions.model_validate(raw) if raw else None
        except ValueError as err:
            log.warning("session %s: ignoring an unreadable session record: %s", key, err)
            return None
        return settings, override

    async def branch_of(self, key: str) -> BranchSource | None:
        text = await self.store.branch_source(key)
        if text is None:
            return None
        try:
            return BranchSource.model_validate_json(text)
        except ValueError as err:
            log.warning("session %s: ignoring an unreadable branch source: %s", key, err)
            return None

    async def record_branch(self, key: str, source: BranchSource) -> None:
        await self.store.put_branch_source(key, source.model_dump_json())

    async def _merge_settings(self, inp: RestoreSessionInput) -> RestoredSession:
        recorded = await self._raw(inp.key)
        if recorded is None:
            return RestoredSession(settings=inp.settings, queue_override=inp.queue_override)
        old = SessionSettings.model_validate(recorded["settings"])
        explicit = {name: getattr(inp.settings, name) for name in inp.explicit}
        settings = old.model_copy(update=explicit)
        if settings.workspace_host is None and "workspace_host" not in inp.explicit:
            # The record was written before the session learned its host, and it ended
            # without a clean close (terminated, failed): its runs say where its files are.
            settings.workspace_host = await self.pinned_host(inp.key)
        override = inp.queue_override or recorded.get("queue_override")
        return RestoredSession(
            settings=settings,
            queue_override=override,
            reopened=True,
            run_count=int(recorded.get("run_count") or 0),
            totals=_totals(recorded.get("totals"), inp.key),
            recent_ids=_recent_ids(recorded.get("recent_ids"), inp.key),
        )

    async def record(
        self,
        key: str,
        settings: SessionSettings,
        override: object,
        run_count: int = 0,
        totals: SessionTotals | None = None,
        recent_ids: list[DedupeEntry] | None = None,
    ) -> None:
        body: dict[str, Any] = {
            "settings": settings.model_dump(mode="json"),
            "queue_override": override,
            "run_count": run_count,
        }
        if totals is not None:
            body["totals"] = totals.model_dump(mode="json")
        if recent_ids:
            body["recent_ids"] = [e.model_dump(mode="json") for e in recent_ids]
        await self.store.put_session_record(key, json.dumps(body))

    @activity.defn(name=RESTORE_SESSION)
    async def restore_session(self, inp: RestoreSessionInput) -> RestoredSession:
        restored = await self._merge(inp)
        override = (
            restored.queue_override.model_dump(mode="json", exclude_none=True)
            if restored.queue_override
            else None
        )
        await self.record(
            inp.key,
            restored.settings,
            override,
            restored.run_count,
            restored.totals,
            restored.recent_ids,
        )
        if restored.reopened:
            # The previous incarnation's stream (closed or still draining) tells where its
            # offsets ended; the new stream goes on from there, so no watcher's offset is stale.
            stream = WorkflowStreamClient.create(activity.client(), events_workflow_id(inp.key))
            try:
                restored.events_offset = await stream.get_offset()
            except Exception as err:
                log.info("session %s: no earlier event stream (%s)", inp.key, err)
        return restored

    @activity.defn(name=RECORD_SESSION)
    async def record_session(self, inp: RecordSessionInput) -> None:
        override = (
            inp.queue_override.model_dump(mode="json", exclude_none=True)
            if inp.queue_override
            else None
        )
        await self.record(
            inp.key, inp.settings, override, inp.run_count, inp.totals, inp.recent_ids
        )


def _recent_ids(raw: object, key: str) -> list[DedupeEntry]:
    if not isinstance(raw, list):
        return []
    try:
        return [DedupeEntry.model_validate(item) for item in raw]
    except ValueError as err:
        log.warning("session %s: ignoring unreadable recorded message ids: %s", key, err)
        return []


def _totals(raw: object, key: str) -> SessionTotals | None:
    if raw is None:
        return None
    try:
        return SessionTotals.model_validate(raw)
    except ValueError as err:
        log.warning("session %s: ignoring unreadable recorded totals: %s", key, err)
        return None
