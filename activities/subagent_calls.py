"""The two activity steps of a `sessions_spawn` call (the child run between them is a child
workflow): `spawn_read` reads and checks the call's arguments from the transcript and announces
the call; `spawn_record` writes the child's reply as the call's result (once per call id) and
announces its end. Both are idempotent, so a retry after a crash changes nothing."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from temporalio import activity

from activities.stream_publishers import SessionPublishers
from activities.tools.specs import InvalidToolArguments, SpawnArgs, parse_args
from activities.tools.workspace import local_workspace
from activities.transcript_store import TranscriptStore, tool_result_entry
from agentlane.events import AgentEvent, EventKind
from agentlane.private_files import make_private_dir
from agentlane.settings import Settings
from agentlane.subagents import (
    SPAWN_READ,
    SPAWN_RECORD,
    SPAWN_TOOL,
    SpawnArgsRead,
    SpawnReadInput,
    SpawnRecordInput,
)


class SubagentActivities:
    def __init__(
        self,
        store: TranscriptStore,
        publishers: SessionPublishers,
        settings: Settings | None = None,
    ) -> None:
        self.store = store
        self.publishers = publishers
        self.settings = settings

    async def _workspace_here(self, inp: SpawnReadInput) -> str | None:
        """Workspaces per host, a session not pinned yet: its default workspace made here, and
        this host named (the children would each have made it on a host of their own)."""
        settings = self.settings
        if settings is None or settings.workspaces != "host" or not inp.create_workspace:
            return None
        path = local_workspace(inp.workspace, settings.data_dir)
        await asyncio.to_thread(make_private_dir, Path(path))
        return settings.host_id

    def _event(
        self, inp: SpawnReadInput | SpawnRecordInput, kind: EventKind, **fields: object
    ) -> AgentEvent:
        return AgentEvent(
            kind=kind,
            event_id=f"{inp.tool_call_id}/{kind.value}",
            session_key=inp.session_key,
            run_id=inp.run_id,
            attempt=activity.info().attempt,
            turn_index=inp.turn_index,
            message_id=inp.assistant_entry_id,
            tool_call_id=inp.tool_call_id,
            tool_name=SPAWN_TOOL,
            **fields,
        )

    @activity.defn(name=SPAWN_READ)
    async def spawn_read(self, inp: SpawnReadInput) -> SpawnArgsRead:
        host = await self._workspace_here(inp)
        read = await self._read(inp)
        return read.model_copy(update={"host": host}) if host is not None else read

    async def _read(self, inp: SpawnReadInput) -> SpawnArgsRead:
        entry = await self.store.get(inp.session_key, inp.assistant_entry_id)
        call = (
            next((c for c in entry.tool_calls if c.id == inp.tool_call_id), None) if entry else None
        )
        if call is None:
            return SpawnArgsRead(error=f"tool call {inp.tool_call_id} not found in the transcript")
        try:
            if call.raw_arguments is not None:
                raise InvalidToolArguments("tool arguments were not a JSON object")
            args = parse_args(SpawnArgs, call.arguments)
        except InvalidToolArguments as err:
            return SpawnArgsRead(error=f"Error: {err}")
        async with self.publishers.lease(activity.client(), inp.session_key) as publisher:
            publisher.publish(
                self._event(inp, EventKind.TOOL_EXECUTION_START, data={"input": call.arguments})
            )
        return SpawnArgsRead(task=args.task, agent_id=args.agent_id, label=args.label)

    @activity.defn(name=SPAWN_RECORD)
    async def spawn_record(self, inp: SpawnRecordInput) -> None:
        meta: dict[str, object] = {"summary": inp.summary}
        if inp.child_session_key:
            meta["child_session_key"] = inp.child_session_key
        entry = tool_result_entry(
            inp.tool_call_id, SPAWN_TOOL, inp.text, inp.run_id, is_error=inp.is_error, meta=meta
        )
        existing = await self.store.tool_result(inp.session_key, inp.tool_call_id)
        if existing is None:
            await self.store.append(inp.session_key, [entry])
        async with self.publishers.lease(activity.client(), inp.session_key) as publisher:
            publisher.publish(
                self._event(
                    inp,
                    EventKind.TOOL_EXECUTION_END,
                    success=not inp.is_error,
                    summary=inp.summary,
                    text=inp.text[:2000],
                    data={"child_session_key": inp.child_session_key},
                    ts=time.time(),
                )
            )
