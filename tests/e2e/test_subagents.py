"""Sub-agents as child workflows (SPEC §13.4), end to end on a real dev server and worker
processes: a tree of depth 2 with the gate refusing depth 3, six children aborted with their
parent, and a child surviving a kill -9 of its worker."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus

from agentlane import search_attributes as sa
from agentlane.events import EventKind
from agentlane.run import ExecutionResult, ExecutionStatus
from agentlane.transcript import Role, TranscriptEntry
from clients.api import AgentlaneClient, SendRejected, SessionNotFound
from clients.session_text import tree_lines
from tests.conftest import make_deployment, settings_for
from tests.e2e.gateway_support import GatewayServer
from tests.e2e.support import assert_transcript_valid
from tests.harness import REPO, Deployment
from tests.process_groups import running_commands

CONFIG = """
[subagents]
max_spawn_depth = 2
max_children_per_agent = 6
"""


@pytest.fixture
def deployment(server: object, tmp_path: Path) -> Iterator[Deployment]:
    root = tmp_path / "data"
    root.mkdir()
    (root / "config.toml").write_text(CONFIG)
    dep = make_deployment(server, root)
    dep.start_worker()
    yield dep
    dep.stop_workers()


def spawn_results(entries: list[TranscriptEntry]) -> list[TranscriptEntry]:
    return [e for e in entries if e.role == Role.TOOL and e.tool_name == "sessions_spawn"]


async def child_run_ids(client: AgentlaneClient, run_id: str, count: int) -> list[str]:
    """The run's children as its history records them, once `count` have started."""
    handle = client.client.get_workflow_handle(run_id)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        started = [
            e.child_workflow_execution_started_event_attributes.workflow_execution.workflow_id
            async for e in handle.fetch_history_events()
            if e.event_type == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED
        ]
        started = [wid for wid in started if ":run:" in wid]  # not their event streams
        if len(started) >= count:
            return started
        await asyncio.sleep(0.2)
    raise AssertionError(f"{run_id} did not start {count} children")


async def started(deployment: Deployment, key: str, text: str) -> tuple[AgentlaneClient, str]:
    """A client, and the run of `text` sent to a new session `key` working in `<data>/ws`."""
    client = await AgentlaneClient.connect(settings_for(deployment))
    workspace = deployment.data_dir / "ws"
    workspace.mkdir(exist_ok=True)
    receipt = await client.send_and_start(key, text, workspace=str(workspace))
    assert receipt.run_id
    return client, receipt.run_id


async def succeeded(client: AgentlaneClient, run_id: str, timeout: float = 60) -> ExecutionResult:
    result = await asyncio.wait_for(client.wait_for_run(run_id), timeout)
    assert result.status == ExecutionStatus.SUCCESS, result.error
    return result


async def test_tree_of_depth_two_and_the_gate_refuses_depth_three(
    deployment: Deployment,
) -> None:
    client = await AgentlaneClient.connect(settings_for(deployment))
    workspace = deployment.data_dir / "ws"
    workspace.mkdir()
    key = "subagent-tree"
    receipt = await client.send_and_start(
        key,
        "spawn a sub-agent to \"spawn a sub-agent to 'spawn a sub-agent to `say too deep`' "
        'then say middle done" then say top done',
        workspace=str(workspace),
    )
    assert receipt.run_id
    result = await asyncio.wait_for(client.wait_for_run(receipt.run_id), 120)
    assert result.status == ExecutionStatus.SUCCESS, result.error
    assert result.reply.startswith("top done")

    top = spawn_results(client.transcript(key))
    assert len(top) == 1 and not top[0].is_error
    middle_key = str(top[0].meta["child_session_key"])
    assert middle_key.startswith("agent:main:subagent:")
    middle_entries = client.transcript(middle_key)
    assert_transcript_valid(middle_entries)
    assert "middle done" in top[0].text  # the child's final reply is the parent's tool result

    middle = spawn_results(middle_entries)
    assert len(middle) == 1 and not middle[0].is_error
    leaf_key = str(middle[0].meta["child_session_key"])
    assert leaf_key.startswith("agent:main:subagent:") and leaf_key.count(":subagent:") == 1
    leaf = spawn_results(client.transcript(leaf_key))
    assert len(leaf) == 1 and leaf[0].is_error
    assert leaf[0].text == (
        "Error: sessions_spawn is not allowed at this depth (current depth: 2, max: 2)"
    )

    # Children are child workflows of their parent's run, and their tokens count in it.
    middle_run = f"session:{middle_key}:run:1"
    assert await child_run_ids(client, receipt.run_id, 1) == [middle_run]
    middle_result = await client.client.get_workflow_handle(
        middle_run, result_type=ExecutionResult
    ).result()
    desc = await client.client.get_workflow_handle(middle_run).describe()
    assert desc.parent_id == receipt.run_id
    # Found in the UI as a session's runs are: by its key, agent and source.
    found = desc.typed_search_attributes
    assert found.get(sa.SESSION_KEY_KEY) == middle_key
    assert found.get(sa.SOURCE_KEY) == "subagent" and found.get(sa.AGENT_KEY) == "main"
    child_tokens = middle_result.usage.accumulated.total
    assert child_tokens > 0
    assert result.usage.accumulated.total > child_tokens
    status = await client.status(key)
    assert status.usage.total >= result.usage.accumulated.total

    # Each sub-agent's events are on its own stream, start to end, its refused spawn included.
    events = [item.event async for item in client.read_events(leaf_key, 0)]
    assert events[0].kind == EventKind.AGENT_START and events[-1].kind == EventKind.AGENT_END
    refused = [e for e in events if e.kind == EventKind.TOOL_EXECUTION_END]
    assert [(e.tool_name, e.success) for e in refused] == [("sessions_spawn", False)]

    # `agentlane sessions tree` shows the children under their parents.
    lines: list[str] = []
    for _ in range(50):
        lines = tree_lines(await client.session_tree())
        if sum(":subagent:" in line for line in lines) == 2:
            break
        await asyncio.sleep(0.2)
    at = next(i for i, line in enumerate(lines) if line.startswith(f"{key} ("))
    assert lines[at + 1].startswith(f"└── {middle_key} (completed")
    assert f"sub-agent of {receipt.run_id}" in lines[at + 1]
    assert lines[at + 2].startswith(f"    └── {leaf_key} (completed")

    # The gateway lists them too, and serves a child's transcript.
    with GatewayServer(settings_for(deployment)) as gw:
        async with gw.http(gw.token(name="t")) as http:
            listed = (await http.get(f"/v1/sessions/{key}/subagents")).json()
            got = [(n["key"], n["spawned_by"]) for n in listed["subagents"]]
            assert got == [(middle_key, receipt.run_id), (leaf_key, middle_run)]
            page = (await http.get(f"/v1/sessions/{leaf_key}/transcript")).json()
            assert page["entries"][0]["text"] == "spawn a sub-agent to `say too deep`"
        # A token scoped to the session's prefix follows its sub-agents at every depth, and
        # no other session's.
        async with gw.http(gw.token(name="scoped", prefixes=["subagent-t"])) as http:
            for sub in (middle_key, leaf_key):
                got = await http.get(f"/v1/sessions/{sub}/transcript")
                assert got.status_code == 200, got.text
        async with gw.http(gw.token(name="other", prefixes=["web:"])) as http:
            got = await http.get(f"/v1/sessions/{leaf_key}/transcript")
            assert got.status_code == 403 and "may only use sessions" in got.text
            got = await http.get("/v1/sessions/agent:main:subagent:nobody/transcript")
            assert got.status_code == 403


async def test_six_children_at_once_all_aborted_with_their_parent(
    deployment: Deployment,
) -> None:
    client = await AgentlaneClient.connect(settings_for(deployment))
    workspace = deployment.data_dir / "ws"
    workspace.mkdir()
    key = "subagent-fanout"
    receipt = await client.send_and_start(
        key, "spawn 6 sub-agents to `run sleep 60` then say never", workspace=str(workspace)
    )
    assert receipt.run_id
    children = await child_run_ids(client, receipt.run_id, 6)
    assert len(set(children)) == 6
    # All six are running at once.
    for child in children:
        desc = await client.client.get_workflow_handle(child).describe()
        assert desc.close_time is None
    # A sub-agent's session takes no messages: its run is its parent's child, and a message
    # would start a second run on its transcript beside it.
    child_key = children[0].removeprefix("session:").rsplit(":run:", 1)[0]
    with pytest.raises(SendRejected, match="is a sub-agent's session"):
        await client.send(child_key, "say hijack")
    with pytest.raises(SessionNotFound, match="is a sub-agent's session: its run is a child"):
        await client.status(child_key)
    await asyncio.sleep(1.0)
    started = time.monotonic()
    await client.abort(key, "stop the fan-out")
    result = await asyncio.wait_for(client.wait_for_run(receipt.run_id), 60)
    assert result.status == ExecutionStatus.ABORTED
    child_tokens = 0
    for child in children:
        # An aborted child fails its workflow (type `aborted`) with its result.
        child_result = await client.wait_for_run(child)
        assert child_result.status == ExecutionStatus.ABORTED, child
        desc = await client.client.get_workflow_handle(child).describe()
        assert desc.status == WorkflowExecutionStatus.FAILED, child
        # Its failure names who stopped its parent, and why (not a bare "run cancelled").
        assert child_result.error is not None and child_result.error.by == client.client.identity
        assert child_result.error.message == (
            f"its parent run {receipt.run_id} stopped: stop the fan-out"
        )
        assert child_result.usage.accumulated.total > 0
        child_tokens += child_result.usage.accumulated.total
    assert time.monotonic() - started < 30
    # Listed (`sessions tree`, the gateway's subagents) as aborted, not as failed.
    child_keys = {c.removeprefix("session:").rsplit(":run:", 1)[0] for c in children}
    for _ in range(50):  # the visibility store catches up with the runs' ends
        listed = {n.key: n.status for n in await client.session_tree() if n.key in child_keys}
        if set(listed.values()) == {"aborted"} and len(listed) == 6:
            break
        await asyncio.sleep(0.2)
    assert set(listed.values()) == {"aborted"} and len(listed) == 6, listed
    # The aborted children's tokens count in the parent's run, and so in its session.
    assert result.usage.accumulated.total > child_tokens
    status = await client.status(key)
    assert status.usage.total >= result.usage.accumulated.total
    assert_transcript_valid(client.transcript(key))


async def test_child_survives_a_kill_of_its_worker_during_a_tool_call(
    deployment: Deployment,
) -> None:
    deployment.start_worker()
    client = await AgentlaneClient.connect(settings_for(deployment))
    workspace = deployment.data_dir / "ws"
    workspace.mkdir()
    key = "subagent-crash"
    receipt = await client.send_and_start(
        key,
        'spawn a sub-agent to "run `sleep 3; echo ran >> count.txt` then write child.txt with '
        'child done" then say parent done',
        workspace=str(workspace),
    )
    assert receipt.run_id
    [child] = await child_run_ids(client, receipt.run_id, 1)
    handle = client.client.get_workflow_handle(child)
    victim = None
    deadline = time.monotonic() + 30
    while victim is None and time.monotonic() < deadline:
        desc = await handle.describe()
        for pending in desc.raw_description.pending_activities:
            identity = pending.last_worker_identity
            if pending.activity_type.name == "tool_exec" and identity:
                pid = int(identity.split("@")[0])
                victim = next((w for w in deployment.workers if w.pid == pid), None)
        await asyncio.sleep(0.1)
    assert victim is not None, "no worker ran the child's exec"
    await asyncio.sleep(0.5)
    victim.kill9()
    result = await asyncio.wait_for(client.wait_for_run(receipt.run_id), 120)
    assert result.status == ExecutionStatus.SUCCESS, result.error
    assert result.reply.startswith("parent done")
    assert (workspace / "child.txt").read_text() == "child done"
    [spawned] = spawn_results(client.transcript(key))
    assert not spawned.is_error
    child_entries = client.transcript(str(spawned.meta["child_session_key"]))
    assert_transcript_valid(child_entries)
    exec_result = next(e for e in child_entries if e.role == Role.TOOL and e.tool_name == "exec")
    assert exec_result.is_error and "interrupted" in exec_result.text


async def test_the_sub_agent_lane_holds_a_workers_sub_agent_model_calls(
    server: object, tmp_path: Path
) -> None:
    """SPEC §2's sub-agent lane, per worker: with 2 slots, four sub-agents whose model calls
    take 2 s each never have more than two calls running at once; the parent's own calls are
    on the global lane's queue."""
    root = tmp_path / "lane"
    root.mkdir()
    (root / "config.toml").write_text(CONFIG)
    dep = make_deployment(server, root, AGENTLANE_MAX_SUBAGENT_MODEL_CALLS="2")
    dep.start_worker()
    try:
        client = await AgentlaneClient.connect(settings_for(dep))
        workspace = root / "ws"
        workspace.mkdir()
        receipt = await client.send_and_start(
            "subagent-lane", "spawn 4 sub-agents to `count slowly to 40`", workspace=str(workspace)
        )
        assert receipt.run_id
        result = await asyncio.wait_for(client.wait_for_run(receipt.run_id), 120)
        assert result.status == ExecutionStatus.SUCCESS, result.error
        children = await child_run_ids(client, receipt.run_id, 4)
        spans: list[tuple[float, float]] = []
        for child in children:
            scheduled: dict[int, str] = {}
            started: dict[int, float] = {}
            async for e in client.client.get_workflow_handle(child).fetch_history_events():
                if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                    attrs = e.activity_task_scheduled_event_attributes
                    if attrs.activity_type.name == "call_model":
                        scheduled[e.event_id] = attrs.task_queue.name
                elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
                    started[e.event_id] = e.event_time.ToDatetime().timestamp()
                elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
                    attrs2 = e.activity_task_completed_event_attributes
                    if attrs2.scheduled_event_id in scheduled:
                        begin = started[attrs2.started_event_id]
                        spans.append((begin, e.event_time.ToDatetime().timestamp()))
            assert set(scheduled.values()) == {f"{dep.task_queue}-subagent-model"}
        assert len(spans) == 4
        # At any moment, at most two of the sub-agents' model calls were running.
        moments = sorted({begin for begin, _ in spans})
        most = max(sum(1 for b, end in spans if b <= t < end) for t in moments)
        assert most == 2, spans
        parent_queues = {
            e.activity_task_scheduled_event_attributes.task_queue.name
            async for e in client.client.get_workflow_handle(receipt.run_id).fetch_history_events()
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
            and e.activity_task_scheduled_event_attributes.activity_type.name == "call_model"
        }
        assert parent_queues == {f"{dep.task_queue}-model"}
    finally:
        dep.stop_workers()


async def test_a_terminated_child_is_an_error_result_and_the_parent_goes_on(
    deployment: Deployment,
) -> None:
    key = "subagent-terminated"
    client, run_id = await started(
        deployment, key, 'spawn a sub-agent to "run `sleep 60`" then say parent goes on'
    )
    [child] = await child_run_ids(client, run_id, 1)
    await client.client.get_workflow_handle(child).terminate(reason="operator")
    result = await succeeded(client, run_id)
    assert result.reply.startswith("parent goes on")
    [spawned] = spawn_results(client.transcript(key))
    assert spawned.is_error
    assert spawned.text.startswith(f"Error: the sub-agent {spawned.meta['child_session_key']}")
    assert "ended abnormally" in spawned.text and "terminated" in spawned.text.lower()
    assert_transcript_valid(client.transcript(key))


async def test_a_sub_agents_background_process_stops_when_it_ends(
    deployment: Deployment,
) -> None:
    client, run_id = await started(
        deployment,
        "subagent-process",
        'spawn a sub-agent to "start `sleep 303` in the background then say child done" '
        "then say parent done",
    )
    await succeeded(client, run_id)
    # Nobody could poll it once the sub-agent ended: it was stopped with it, and its record and
    # output were let go.
    assert not running_commands("sleep 303")
    assert not list(deployment.data_dir.glob("**/processes/proc-*"))


async def test_a_spawn_as_a_new_sessions_first_tool_call_works_in_its_default_workspace(
    deployment: Deployment,
) -> None:
    """No workspace named, and the spawn the first thing asked: the default workspace was made
    by the parent's first tool call only, and every child failed "workspace ... does not
    exist". The child's first tool call makes it now."""
    client = await AgentlaneClient.connect(settings_for(deployment))
    key = "first-spawn"
    receipt = await client.send_and_start(
        key, 'spawn a sub-agent to "write x.txt with hi then say written" then say top done'
    )
    assert receipt.run_id
    result = await asyncio.wait_for(client.wait_for_run(receipt.run_id), 120)
    assert result.status == ExecutionStatus.SUCCESS, result.error
    spawned = spawn_results(client.transcript(key))
    assert spawned and not spawned[0].is_error, spawned[0].text
    status = await client.status(key)
    folder = deployment.data_dir / status.workspace
    assert (folder / "x.txt").read_text() == "hi"


async def test_a_running_sub_agents_events_are_followed_by_its_key(
    deployment: Deployment,
) -> None:
    """README: a sub-agent's events are on its own stream, read by its key like a session's.
    It has no session workflow of its own: the gateway and `agentlane watch` follow it anyway
    (they answered "does not exist")."""
    client, run_id = await started(
        deployment, "subagent-follow", "spawn a sub-agent to `run sleep 8` then say done"
    )
    (child,) = await child_run_ids(client, run_id, 1)
    child_key = child.removeprefix("session:").rsplit(":run:", 1)[0]
    watch = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "clients.cli",
        "watch",
        child_key,
        "--from",
        "0",
        "--json",
        cwd=REPO,
        env=deployment.env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert watch.stdout is not None
        kinds: list[str] = []
        while "tool_execution_start" not in kinds:
            line = await asyncio.wait_for(watch.stdout.readline(), 30)
            assert line, (await watch.stderr.read()).decode() if watch.stderr else ""
            kinds.append(json.loads(line)["kind"])
        assert kinds[0] == "agent_start", kinds
    finally:
        watch.kill()
        await watch.wait()
    with GatewayServer(settings_for(deployment)) as gw:
        async with (
            gw.http(gw.token(name="t")) as http,
            http.stream("GET", f"/v1/sessions/{child_key}/events?from=0") as events,
        ):
            assert events.status_code == 200
            seen = ""
            async for chunk in events.aiter_text():
                seen += chunk
                if "tool_execution_start" in seen:
                    break
    await succeeded(client, run_id)


async def test_a_spawn_past_the_children_limit_is_a_limit_reached_not_forbidden(
    deployment: Deployment,
) -> None:
    """Review P L3: the seventh of seven spawns at once (limit 6) was shown `✗ forbidden`."""
    client, run_id = await started(
        deployment, "subagent-limit", "spawn 7 sub-agents to `say hi` then say done"
    )
    await succeeded(client, run_id)
    ended = [
        item.event
        async for item in client.read_events("subagent-limit", 0)
        if item.event.kind == EventKind.TOOL_EXECUTION_END
        and item.event.tool_name == "sessions_spawn"
    ]
    refused = [e for e in ended if not e.success]
    assert [e.summary for e in refused] == ["limit reached"], [e.summary for e in ended]
    assert "max active children for this session (6/6)" in (refused[0].text or "")
