"""Shared steps of the end-to-end tests."""

from __future__ import annotations

import asyncio
import subprocess
from collections import Counter
from dataclasses import dataclass, field

from agentlane.events import AgentEvent, EventKind
from agentlane.transcript import Role, TranscriptEntry
from clients.api import AgentlaneClient, MessageView


@dataclass
class Collected:
    events: list[AgentEvent] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    view: MessageView = field(default_factory=MessageView)
    visible: str = ""

    def kinds(self) -> list[str]:
        return [e.kind.value for e in self.events]


async def collect(
    client: AgentlaneClient, key: str, run_id: str, from_offset: int = 0, timeout: float = 60
) -> Collected:
    out = Collected()

    async def go() -> None:
        async for item in client.watch(key, from_offset, until_run=run_id):
            out.events.append(item.event)
            out.offsets.append(item.offset)
            if item.event.run_id == run_id:
                fresh = out.view.apply(item.event)
                if fresh:
                    out.visible += fresh

    await asyncio.wait_for(go(), timeout)
    return out


def assert_transcript_valid(entries: list[TranscriptEntry]) -> None:
    """Every tool call has exactly one result, every result answers a call, ids are unique and
    parents chain."""
    ids = [e.id for e in entries]
    assert len(ids) == len(set(ids)), "duplicate entry ids"
    calls = [c.id for e in entries if e.role == Role.ASSISTANT for c in e.tool_calls]
    results = Counter(e.tool_call_id for e in entries if e.role == Role.TOOL)
    assert len(calls) == len(set(calls)), "duplicate tool call ids"
    for call in calls:
        assert results[call] == 1, f"tool call {call} has {results[call]} results"
    assert set(results) <= set(calls), "tool result without a call"
    for previous, entry in zip(entries, entries[1:], strict=False):
        assert entry.parent_id == previous.id, f"{entry.id} does not chain to {previous.id}"


def lifecycle_ok(events: list[AgentEvent], run_id: str) -> None:
    mine = [e for e in events if e.run_id == run_id]
    unique = {e.event_id: e for e in mine}
    kinds = [e.kind for e in unique.values()]
    assert kinds.count(EventKind.AGENT_START) == 1
    assert kinds.count(EventKind.AGENT_END) == 1
    assert kinds[0] == EventKind.AGENT_START
    assert EventKind.AGENT_END in kinds[-2:]
    starts = [e.turn_index for e in unique.values() if e.kind == EventKind.TURN_START]
    ends = [e.turn_index for e in unique.values() if e.kind == EventKind.TURN_END]
    assert starts == ends == list(range(len(starts)))


async def wait_idle(client: AgentlaneClient, key: str, runs: int, timeout: float = 60) -> None:
    """Until the session has finished `runs` runs and has nothing queued."""
    from agentlane.session import SessionPhase

    async def go() -> None:
        while True:
            status = await client.status(key)
            if (
                status.runs >= runs
                and status.phase == SessionPhase.IDLE
                and not status.queue_length
            ):
                return
            await asyncio.sleep(0.2)

    await asyncio.wait_for(go(), timeout)


async def update_identities(client: AgentlaneClient, workflow_id: str) -> set[str]:
    """The client identities of the updates a workflow accepted (who sent its messages)."""
    history = await client.client.get_workflow_handle(workflow_id).fetch_history()
    return {
        e.workflow_execution_update_accepted_event_attributes.accepted_request.meta.identity
        for e in history.events
        if e.HasField("workflow_execution_update_accepted_event_attributes")
    }


async def terminate_in_temporal(address: str, workflow_id: str, reason: str = "operator") -> None:
    """What an operator does from the Temporal CLI (or the UI): terminate a workflow."""
    from tests.harness import devserver

    await asyncio.to_thread(
        subprocess.run,
        [
            devserver.temporal_binary(),
            "workflow",
            "terminate",
            "--address",
            address,
            "--workflow-id",
            workflow_id,
            "--reason",
            reason,
        ],
        check=True,
        capture_output=True,
    )
