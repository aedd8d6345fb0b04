"""A worker killed with events still in its publish batch: a watcher never misses an event
silently (issue 11). Either the stream holds every event the transcript implies, or the run's
`stream_gap` event, published before `agent_end`, names the missing ones and the entries to
re-read."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from activities.stream_gaps import expected_event_ids
from agentlane.events import AgentEvent, EventKind
from agentlane.run import ExecutionStatus
from clients.api import AgentlaneClient
from tests.conftest import make_deployment, settings_for
from tests.harness import Deployment


@pytest.fixture
def dep(server: object, tmp_path: Path) -> Iterator[Deployment]:
    deployment = make_deployment(server, tmp_path)
    yield deployment
    deployment.stop_workers()


async def test_events_lost_with_a_killed_worker_are_announced(dep: Deployment) -> None:
    # The first worker sends its batch only every 30 s: whatever its steps publish without
    # waiting is still in its memory when it dies.
    dep.extra_env["AGENTLANE_STREAM_BATCH_MS"] = "30000"
    victim = dep.start_worker()
    dep.extra_env.pop("AGENTLANE_STREAM_BATCH_MS")
    ws = dep.data_dir / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("alpha\nbeta\n")
    client = await AgentlaneClient.connect(settings_for(dep))
    key = "gap"
    receipt = await client.send_and_start(
        key, "read notes.txt then run `sleep 2` then say done", workspace=str(ws)
    )
    assert receipt.run_id
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if any(e.role.value == "tool" for e in client.transcript(key)):
            break
        await asyncio.sleep(0.05)
    victim.kill9()
    dep.start_worker()
    result = await client.wait_for_run(receipt.run_id)
    assert result.status == ExecutionStatus.SUCCESS, result.error
    events: list[AgentEvent] = []
    async for item in client.watch(key, 0, until_run=receipt.run_id):
        events.append(item.event)
    seen = {e.event_id for e in events}
    gaps = [e for e in events if e.kind == EventKind.STREAM_GAP]
    announced = {eid for gap in gaps for eid in gap.data["missing"]}
    expected = expected_event_ids(client.transcript(key), receipt.run_id)
    unaccounted = [eid for eid in expected if eid not in seen and eid not in announced]
    assert not unaccounted, f"events missing without an announcement: {unaccounted}"
    # The kill did lose events here, and the gap says so before the run's end.
    assert gaps, "the killed worker's batch was expected to hold this run's first events"
    assert announced and not (announced & seen)
    assert events[-1].kind == EventKind.AGENT_END
    assert events.index(gaps[0]) < len(events) - 1
    assert set(gaps[0].data["entries"]) <= {e.id for e in client.transcript(key)}


async def test_a_run_whose_events_all_arrived_announces_no_gap(dep: Deployment) -> None:
    dep.start_worker()
    ws = dep.data_dir / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("alpha\n")
    client = await AgentlaneClient.connect(settings_for(dep))
    receipt = await client.send_and_start(
        "nogap", "read notes.txt then say done", workspace=str(ws)
    )
    assert receipt.run_id
    await client.wait_for_run(receipt.run_id)
    kinds = [i.event.kind async for i in client.watch("nogap", 0, until_run=receipt.run_id)]
    assert EventKind.STREAM_GAP not in kinds
