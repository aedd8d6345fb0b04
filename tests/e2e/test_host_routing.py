"""Workspaces stay with their host (issue 20): two workers with different host ids on one dev
server and task queue. A session's tools all run on the host its workspace is on; that host
killed mid-run, the run waits (status `waiting`, `host a unavailable`, found by `sessions
--phase waiting`) and finishes once the host is back; an abort ends the wait at once; a host
that never comes back ends the run after the bound, naming it.

Both workers share one data dir (the transcript store is still files per data dir); what differs
is their host id, so which host ran a tool is read from the transcript (each tool result names
its host) and from the workers' own task queues.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import TimeoutType

from agentlane.events import EventKind
from agentlane.run import ExecutionStatus
from agentlane.session import SessionPhase
from agentlane.session_query import SessionFilter
from agentlane.transcript import Role, TranscriptEntry
from clients.api import AgentlaneClient
from tests.conftest import make_deployment, settings_for
from tests.e2e.support import assert_transcript_valid
from tests.e2e.test_crash_recovery import worker_running_activity
from tests.harness import Deployment


class Hosts:
    """Host `a` and host `b`: one data dir and task queue, a deployment per host id."""

    def __init__(self, server: object, root: Path) -> None:
        base = make_deployment(server, root)
        self.a = Deployment(root, server, base.task_queue, {"AGENTLANE_HOST_ID": "a"})
        self.b = Deployment(root, server, base.task_queue, {"AGENTLANE_HOST_ID": "b"})

    def stop(self) -> None:
        self.a.stop_workers()
        self.b.stop_workers()


@pytest.fixture
def hosts(server: object, tmp_path: Path) -> Iterator[Hosts]:
    pair = Hosts(server, tmp_path)
    yield pair
    pair.stop()


def tool_hosts(entries: list[TranscriptEntry]) -> list[str | None]:
    return [e.meta.get("host") for e in entries if e.role == Role.TOOL]


async def wait_for_host_wait(client: AgentlaneClient, key: str, timeout: float = 45) -> float:
    """Until the session says its run waits for host a; returns when it did (monotonic)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = await client.status(key)
        if status.phase == SessionPhase.WAITING:
            assert status.waiting_reason == "host a unavailable", status.waiting_reason
            assert status.workspace_host == "a"
            return time.monotonic()
        await asyncio.sleep(0.3)
    raise AssertionError(f"session {key} never waited for host a: {await client.status(key)}")


async def test_tools_stay_on_their_host_which_a_run_waits_for(hosts: Hosts) -> None:
    hosts.a.start_worker()
    client = await AgentlaneClient.connect(settings_for(hosts.b))
    key = "pinned"
    # Only host a runs: the session's first tool call runs there and pins the session to it
    # (the default workspace is made there on first use).
    # Runs and the session continue as new every few steps: the pin goes along.
    handovers: dict[str, object] = {
        "run_continue_as_new_after_events": 25,
        "continue_as_new_after_events": 20,
    }
    first = await client.send_and_start(
        key, "write a.txt with one then read a.txt", session_overrides=handovers
    )
    assert first.run_id
    assert (await client.wait_for_run(first.run_id)).status == ExecutionStatus.SUCCESS
    assert (await client.status(key)).workspace_host == "a"
    # A default workspace is named under the data dir of the host its tools run on (both hosts
    # share one data dir here).
    workspace = hosts.a.data_dir / (await client.status(key)).workspace
    hosts.b.start_worker()

    # Host b holds workflows and model calls as much as a does; the tools still run on a.
    second = await client.send_and_start(
        key, "run `echo two > b.txt` then read b.txt then edit a.txt replacing one with three"
    )
    assert second.run_id
    assert (await client.wait_for_run(second.run_id)).status == ExecutionStatus.SUCCESS

    # Host a dies while its exec runs: the retry finds no worker of host a, the run waits.
    third = await client.send_and_start(
        key, "run `sleep 3` then read a.txt then write d.txt with four"
    )
    assert third.run_id
    victim = await worker_running_activity(client, hosts.a, third.run_id, "tool_exec", 30)
    await asyncio.sleep(0.5)
    victim.kill9()
    await wait_for_host_wait(client, key)
    progress = await client.run_progress(third.run_id)
    assert progress is not None and progress.waiting_reason == "host a unavailable"
    # The Temporal UI's list (AgentPhase=waiting) and `agentlane sessions --phase waiting`.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        listing = await client.find_sessions(SessionFilter(phase="waiting"))
        if key in [row["key"] for row in listing.rows]:
            break
        await asyncio.sleep(0.5)
    else:
        raise AssertionError("the waiting session is not listed by --phase waiting")
    # Nothing ran on host b meanwhile: the write after the read has not happened.
    assert not (workspace / "d.txt").exists()

    hosts.a.start_worker()
    result = await asyncio.wait_for(client.wait_for_run(third.run_id), 90)
    assert result.status == ExecutionStatus.SUCCESS, result.error
    assert result.workspace_host == "a"
    assert (workspace / "d.txt").read_text() == "four"
    assert (workspace / "a.txt").read_text() == "three"
    entries = client.transcript(key)
    assert_transcript_valid(entries)
    assert tool_hosts(entries) == ["a"] * 8, tool_hosts(entries)
    # In Temporal's terms, over every segment of the run (it continued as new on the way): tool
    # calls went to host a's own queue, and the one scheduled while a was gone timed out
    # waiting for a worker there (schedule-to-start), then was scheduled again.
    runs = [wf async for wf in client.client.list_workflows(f"WorkflowId = '{third.run_id}'")]
    assert len(runs) > 1, "the run was meant to continue as new on the way"
    events = []
    for wf in runs:
        handle = client.client.get_workflow_handle(wf.id, run_id=wf.run_id)
        events += (await handle.fetch_history()).events
    queues = [
        e.activity_task_scheduled_event_attributes.task_queue.name
        for e in events
        if e.HasField("activity_task_scheduled_event_attributes")
        and e.activity_task_scheduled_event_attributes.activity_type.name.startswith("tool_")
    ]
    assert queues and set(queues) == {f"{hosts.a.task_queue}@host:a"}, queues
    timeouts = [
        e.activity_task_timed_out_event_attributes.failure.timeout_failure_info.timeout_type
        for e in events
        if e.HasField("activity_task_timed_out_event_attributes")
    ]
    assert TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_START in timeouts, timeouts
    status = await client.status(key)
    assert status.phase == SessionPhase.IDLE and status.waiting_reason is None
    # Watchers were told why the run waited.
    told = [
        item.event
        async for item in client.watch(key, 0, until_run=third.run_id)
        if item.event.kind == EventKind.WARNING
        and (item.event.data or {}).get("code") == "waiting_for_host"
    ]
    assert len(told) == 1 and told[0].data["host"] == "a", told
    assert told[0].text and told[0].text.startswith("host a unavailable")


async def test_abort_ends_the_wait_and_a_host_gone_for_good_ends_the_run(
    hosts: Hosts, tmp_path: Path
) -> None:
    hosts.a.start_worker()
    hosts.b.start_worker()
    # A workspace named by a client on host a is on a's disk: the session is pinned to a.
    client = await AgentlaneClient.connect(settings_for(hosts.a))
    workspace = tmp_path / "ws-a"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("alpha\n")
    hosts.a.stop_workers()

    aborted, bounded = "abort-wait", "bounded-wait"
    waits = await client.send_and_start(aborted, "read notes.txt", workspace=str(workspace))
    ends = await client.send_and_start(
        bounded,
        "read notes.txt",
        workspace=str(workspace),
        session_overrides={"host_wait_seconds": 12},
    )
    assert waits.run_id and ends.run_id
    assert (await client.status(aborted)).workspace_host == "a"

    await wait_for_host_wait(client, aborted)
    asked = time.monotonic()
    await client.abort(aborted)
    result = await asyncio.wait_for(client.wait_for_run(waits.run_id), 30)
    assert result.status == ExecutionStatus.ABORTED
    # At once: well inside the attempt that was waiting (10 s, then 60 s per recheck).
    assert time.monotonic() - asked < 8, "the abort did not end the wait at once"

    started = time.monotonic()
    gone = await asyncio.wait_for(client.wait_for_run(ends.run_id), 60)
    assert gone.status == ExecutionStatus.ERROR
    assert gone.error is not None and "Host a is unavailable" in gone.error.message
    assert gone.error.kind.value == "runtime_unavailable"
    assert time.monotonic() - started < 30
    # No tool ran on host b: the call is answered with the reason, never executed.
    entries = client.transcript(bounded)
    assert_transcript_valid(entries)
    answers = [e for e in entries if e.role == Role.TOOL]
    assert len(answers) == 1 and "Host a is unavailable" in answers[0].text
    assert tool_hosts(entries) == [None]


async def test_shared_workspaces_run_tools_anywhere(server: object, tmp_path: Path) -> None:
    dep = make_deployment(server, tmp_path, AGENTLANE_WORKSPACES="shared", AGENTLANE_HOST_ID="s")
    dep.start_worker()
    try:
        client = await AgentlaneClient.connect(settings_for(dep))
        receipt = await client.send_and_start("shared", "write x.txt with one then read x.txt")
        assert receipt.run_id
        result = await client.wait_for_run(receipt.run_id)
        assert result.status == ExecutionStatus.SUCCESS and result.workspace_host is None
        assert (await client.status("shared")).workspace_host is None
        assert tool_hosts(client.transcript("shared")) == [None, None]
    finally:
        dep.stop_workers()


async def test_a_first_call_whose_worker_dies_stays_with_the_host_it_started_on(
    hosts: Hosts,
) -> None:
    """The session's first tool call started on host a (its default workspace made there, its
    command running there) when a's worker was killed: the retry, taken by host b, touches
    nothing; the run waits for host a and the call is answered there, and the session's tools
    stay on a. It used to run on b and pin the session there, away from its files."""
    hosts.a.start_worker()
    client = await AgentlaneClient.connect(settings_for(hosts.a))
    key = "first-dies"
    first = await client.send_and_start(key, "run `sleep 20` then say done")
    assert first.run_id
    victim = await worker_running_activity(client, hosts.a, first.run_id, "tool_exec", 30)
    hosts.b.start_worker()
    await asyncio.sleep(0.5)
    victim.kill9()
    deadline = time.monotonic() + 60
    while (await client.status(key)).waiting_reason != "host a unavailable":
        assert time.monotonic() < deadline, await client.status(key)
        await asyncio.sleep(0.3)
    hosts.a.start_worker()
    result = await client.wait_for_run(first.run_id)
    assert result.status == ExecutionStatus.SUCCESS, result.error
    entries = client.transcript(key)
    assert tool_hosts(entries) == ["a"]
    assert (await client.status(key)).workspace_host == "a"
    assert_transcript_valid(entries)


async def test_spawns_in_an_unpinned_session_pin_the_parent_and_every_child_to_one_host(
    hosts: Hosts,
) -> None:
    """A new session whose first tool calls are spawns: each child used to make the parent's
    default workspace on a host of its own (the parent then found none of their files). The
    first spawn's step makes it where it runs, and the parent and its children work there."""
    hosts.a.start_worker()
    hosts.b.start_worker()
    client = await AgentlaneClient.connect(settings_for(hosts.a))
    key = "spawn-pins"
    receipt = await client.send_and_start(
        key,
        'spawn a sub-agent to "write a.txt with one" then spawn a sub-agent to '
        '"write b.txt with two" then read a.txt then read b.txt',
    )
    assert receipt.run_id
    result = await asyncio.wait_for(client.wait_for_run(receipt.run_id), 120)
    assert result.status == ExecutionStatus.SUCCESS, result.error
    pinned = (await client.status(key)).workspace_host
    assert pinned in ("a", "b")
    parent = client.transcript(key)
    children = [str(e.meta["child_session_key"]) for e in parent if e.meta.get("child_session_key")]
    assert len(children) == 2
    seen = [h for h in tool_hosts(parent) if h is not None]
    for child in children:
        seen += [h for h in tool_hosts(client.transcript(child)) if h is not None]
    assert seen and set(seen) == {pinned}, seen


async def test_a_workspace_named_from_another_host_for_a_pinned_session_is_said_not_taken(
    hosts: Hosts,
) -> None:
    """Review S F2: a send naming the same folder from a client of another host was taken
    silently, and the session went on waiting for its own host."""
    hosts.a.start_worker()
    folder = hosts.a.data_dir / "shared-ws"
    folder.mkdir()
    on_a = await AgentlaneClient.connect(settings_for(hosts.a))
    first = await on_a.send_and_start("pinned-ws", "write a.txt with one", workspace=str(folder))
    assert first.run_id
    await on_a.wait_for_run(first.run_id)
    assert (await on_a.status("pinned-ws")).workspace_host == "a"
    on_b = await AgentlaneClient.connect(settings_for(hosts.b))
    again = await on_b.send("pinned-ws", "read a.txt", workspace=str(folder))
    assert f"it stays {folder.resolve()} on host a" in again.note, again.note
