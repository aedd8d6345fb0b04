"""Restores a reopened session's settings and records the settings in force (one local activity
when a session chain starts, and again when its queue settings change)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from pathlib import Path

from temporalio import activity
from temporalio.contrib.workflow_streams import WorkflowStreamClient

from activities.transcript_store import TranscriptStore
from agentlane.ids import events_workflow_id
from agentlane.session import SessionSettings
from agentlane.session_records import (
    RECORD_SESSION,
    RESTORE_SESSION,
    RecordSessionInput,
    RestoredSession,
    RestoreSessionInput,
)

log = logging.getLogger(__name__)

RECORD_FILE = "session.json"


class SessionRecords:
    def __init__(self, store: TranscriptStore) -> None:
        self.store = store

    def _path(self, key: str) -> Path:
        return self.store.session_dir(key) / RECORD_FILE

    def _merge(self, inp: RestoreSessionInput) -> RestoredSession:
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
        )

    def record(self, key: str, settings: SessionSettings, override: object) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        body = {"settings": settings.model_dump(mode="json"), "queue_override": override}
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(body))
        os.replace(tmp, path)

    @activity.defn(name=RESTORE_SESSION)
    async def restore_session(self, inp: RestoreSessionInput) -> RestoredSession:
        restored = await asyncio.to_thread(self._merge, inp)
        override = (
            restored.queue_override.model_dump(mode="json", exclude_none=True)
            if restored.queue_override
            else None
        )
        await asyncio.to_thread(self.record, inp.key, restored.settings, override)
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
        await asyncio.to_thread(self.record, inp.key, inp.settings, override)
