"""The activities that stop a session's background processes on reset and close (contracts and
why: `agentlane/process_stop.py`)."""

from __future__ import annotations

import asyncio

from temporalio import activity

from activities.tools import process_tool
from activities.transcript_store import TranscriptStore
from agentlane.process_stop import (
    LIST_PROCESS_OWNERS,
    STOP_SESSION_PROCESSES,
    ProcessesStopped,
    ProcessOwners,
    SessionProcesses,
)


class ProcessStop:
    def __init__(self, store: TranscriptStore) -> None:
        self.store = store

    @activity.defn(name=LIST_PROCESS_OWNERS)
    async def list_process_owners(self, inp: SessionProcesses) -> ProcessOwners:
        folder = self.store.session_dir(inp.session_key) / "processes"
        # Asked when the session is reset or closed: what finished is of no more use (its
        # running ones are forgotten once stopped, below).
        await process_tool.forget(inp.session_key, folder)
        return ProcessOwners(queues=await asyncio.to_thread(process_tool.owner_queues, folder))

    @activity.defn(name=STOP_SESSION_PROCESSES)
    async def stop_session_processes(self, inp: SessionProcesses) -> ProcessesStopped:
        stopped = await process_tool.stop_session(inp.session_key)
        if stopped:
            activity.logger.info("stopped %s of session %s", ", ".join(stopped), inp.session_key)
            folder = self.store.session_dir(inp.session_key) / "processes"
            await process_tool.forget(inp.session_key, folder)
        return ProcessesStopped(stopped=stopped)
