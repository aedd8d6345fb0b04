"""Restores a reopened session's settings and records the settings in force (one local activity
when a session chain starts, and again when its queue settings change)."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

from temporalio import activity
from temporalio.contrib.workflow_streams import WorkflowStreamClient

from activities.transcript_store import TranscriptStore
from agentlane.ids import events_workflow_id
from agentlane.private_files import write_private
from agentlane.queue_settings import QueueOptions
from agentlane.session import BranchSource, SessionSettings
from agentlane.session_records import (
    RECORD_SESSION,
    RESTORE_SESSION,
    RecordSessionInput,
    RestoredSession,
    RestoreSessionInput,
)

log = logging.getLogger(__name__)

RECORD_FILE = "session.json"
# Written once when a branch is made (activities/session_tree.py); never rewritten.
BRANCH_FILE = "branch.json"


class SessionRecords:
    def __init__(self, store: TranscriptStore) -> None:
        self.store = store

    def _path(self, key: str) -> Path:
        return self.store.session_dir(key) / RECORD_FILE

    def _runs_numbered(self, key: str, recorded: int) -> int:
        """The highest run number any incarnation of the key used: the recorded count, or the
        runs in runs.jsonl (a session that was never closed cleanly recorded no count)."""
        highest = recorded
        try:
            lines = (self.store.session_dir(key) / "runs.jsonl").read_text().splitlines()
        except OSError:
            return highest
        for line in lines:
            try:
                run_id = str(json.loads(line).get("run_id", ""))
                highest = max(highest, int(run_id.rsplit(":run:", 1)[1]))
            except (ValueError, IndexError, AttributeError):
                continue
        return highest

    def _merge(self, inp: RestoreSessionInput) -> RestoredSession:
        restored = self._merge_settings(inp)
        restored.run_count = self._runs_numbered(inp.key, restored.run_count)
        restored.branch = self.branch_of(inp.key)
        return restored

    def recorded(self, key: str) -> tuple[SessionSettings, QueueOptions | None] | None:
        """The settings the key's session recorded last, None if none (or unreadable)."""
        path = self._path(key)
        try:
            recorded = json.loads(path.read_text())
            settings = SessionSettings.model_validate(recorded["settings"])
            raw = recorded.get("queue_override")
            override = QueueOptions.model_validate(raw) if raw else None
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError) as err:
            log.warning("session %s: ignoring an unreadable %s: %s", key, path, err)
            return None
        return settings, override

    def branch_of(self, key: str) -> BranchSource | None:
        try:
            return BranchSource.model_validate_json(
                (self.store.session_dir(key) / BRANCH_FILE).read_bytes()
            )
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as err:
            log.warning("session %s: ignoring an unreadable %s: %s", key, BRANCH_FILE, err)
            return None

    def record_branch(self, key: str, source: BranchSource) -> None:
        self.store.ensure_session_dir(key)
        write_private(self.store.session_dir(key) / BRANCH_FILE, source.model_dump_json().encode())

    def _merge_settings(self, inp: RestoreSessionInput) -> RestoredSession:
        path = self._path(inp.key)
        if not path.exists():
            return RestoredSession(settings=inp.settings, queue_override=inp.queue_override)
        try:
            recorded = json.loads(path.read_text())
            old = SessionSettings.model_validate(recorded["settings"])
        except (OSError, ValueError, KeyError) as err:
            log.warning("session %s: ignoring an unreadable %s: %s", inp.key, path, err)
            return RestoredSession(settings=inp.settings, queue_override=inp.queue_override)
        explicit = {name: getattr(inp.settings, name) for name in inp.explicit}
        settings = old.model_copy(update=explicit)
        override = inp.queue_override or recorded.get("queue_override")
        return RestoredSession(
            settings=settings,
            queue_override=override,
            reopened=True,
            run_count=int(recorded.get("run_count") or 0),
        )

    def record(
        self, key: str, settings: SessionSettings, override: object, run_count: int = 0
    ) -> None:
        body = {
            "settings": settings.model_dump(mode="json"),
            "queue_override": override,
            "run_count": run_count,
        }
        self.store.ensure_session_dir(key)
        write_private(self._path(key), json.dumps(body).encode())

    @activity.defn(name=RESTORE_SESSION)
    async def restore_session(self, inp: RestoreSessionInput) -> RestoredSession:
        restored = await asyncio.to_thread(self._merge, inp)
        override = (
            restored.queue_override.model_dump(mode="json", exclude_none=True)
            if restored.queue_override
            else None
        )
        await asyncio.to_thread(
            self.record, inp.key, restored.settings, override, restored.run_count
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
        await asyncio.to_thread(self.record, inp.key, inp.settings, override, inp.run_count)
