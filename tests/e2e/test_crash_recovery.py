"""kill -9 of a worker mid-model-call and mid-tool, and a dev-server restart mid-run: the run
finishes, the transcript stays valid, the user sees no duplicate text."""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from activities.stream_gaps import expected_event_ids
from agentlane.events import EventKind
from agentlane.messages import FateState
from agentlane.run import ExecutionStatus
from agentlane.transcript import Role
from clients.api import AgentlaneClient, MessageView
from tests.conftest import make_deployment, settings_for
from tests.e2e.support import assert_transcript_valid
from tests.harness import REPO, Deployment, WorkerProcess, devserver


@pytest.fixture
def pair(server: object, tmp_path: Path) -> Iterator[Deployment]:
    """Two worker processes on their own task queue."""
    dep = make_deployment(server, tmp_path)
    dep.start_worker()
    dep.start_worker()
    yield dep
    dep.stop_workers()


async def worker_running_activity(
    client: AgentlaneClient, dep: Deployment, run_id: str, activity: str, timeout: float = 20
) -> WorkerProcess:
    handle = client.client.get_workflow_handle(run_id)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        desc = await handle.describe()
        for pending in desc.raw_description.pending_activities:
            identity = pending.last_worker_identity
            if pending.activity_type.name == activity and identity:
                pid = int(identity.split("@")[0])
                for worker in dep.workers:
                    if worker.pid == pid:
                        return worker
        await asyncio.sleep(0.1)
    raise AssertionError(f"no worker found running {activity}")


async def test_kill_worker_while_model_streams(pair: Deployment) -> None:
    client = await AgentlaneClient.connect(settings_for(pair))
    workspace = pair.data_dir / "ws"
    workspace.mkdir()
    key = "crash-model"
    expected = " ".join(str(i) for i in range(1, 121))
    receipt = await client.send_and_start(key, "count slowly to 120", workspace=str(workspace))
    assert receipt.run_id
    view = MessageView()
    visible: list[str] = []
    killed_at: float | None = None
    resumed_after: float | None = None

    async def watch() -> None:
        nonlocal killed_at, resumed_after
        async for item in client.watch(key, 0, until_run=receipt.run_id):
            fresh = view.apply(item.event)
            if fresh:
                visible.append(fresh)
                if killed_at is not None and resumed_after is None:
                    resumed_after = time.monotonic() - killed_at
            if item.event.kind == EventKind.TEXT_DELTA and killed_at is None and len(visible) >= 2:
                victim = await worker_running_activity(client, pair, receipt.run_id, "call_model")
                victim.kill9()
                killed_at = time.monotonic()

    await asyncio.wait_for(watch(), 90)
    result = await client.wait_for_run(receipt.run_id)
    assert result.status == ExecutionStatus.SUCCESS
    assert result.reply == expected
    assert "".join(visible) == expected, "the user saw duplicated or missing text"
    assert resumed_after is not None and resumed_after < 10, f"resumed after {resumed_after}s"
    entries = client.transcript(key)
    assert_transcript_valid(entries)
    assert [e.role for e in entries] == [Role.USER, Role.ASSISTANT]


async def test_kill_worker_while_tool_runs(pair: Deployment) -> None:
    client = await AgentlaneClient.connect(settings_for(pair))
    workspace = pair.data_dir / "ws"
    workspace.mkdir()
    key = "crash-tool"
    receipt = await client.send_and_start(
        key,
        "run `sleep 3; echo ran >> count.txt` then write after.txt with done",
        workspace=str(workspace),
    )
    assert receipt.run_id
    victim = await worker_running_activity(client, pair, receipt.run_id, "tool_exec")
    await asyncio.sleep(0.5)
    victim.kill9()
    result = await asyncio.wait_for(client.wait_for_run(receipt.run_id), 60)
    assert result.status == ExecutionStatus.SUCCESS
    entries = client.transcript(key)
    assert_transcript_valid(entries)
    exec_result = next(e for e in entries if e.role == Role.TOOL and e.tool_name == "exec")
    # exec is not silently re-run after a crash; the model is told.
    assert exec_result.is_error and "interrupted" in exec_result.text
    # The command died with its worker and was not run again.
    await asyncio.sleep(3)
    assert not (workspace / "count.txt").exists()
    assert (workspace / "after.txt").read_text() == "done"
    # A watcher from the start sees every event the transcript implies, each once, no gap.
    events = [item.event async for item in client.watch(key, 0, until_run=receipt.run_id)]
    ids = [e.event_id for e in events]
    assert len(ids) == len(set(ids)), [i for i in ids if ids.count(i) > 1]
    expected = expected_event_ids(entries, receipt.run_id)
    assert not [eid for eid in expected if eid not in set(ids)]
    assert EventKind.STREAM_GAP not in {e.kind for e in events}


async def test_abort_while_the_worker_running_exec_dies_ends_as_an_abort(pair: Deployment) -> None:
    """The cancel cannot reach a dead worker: it ends as the exec's heartbeat timeout. The run
    still ends as the abort the user asked for, and the model is told the command may have run
    (it did: "a" is in the file), not that it was not executed."""
    client = await AgentlaneClient.connect(settings_for(pair))
    workspace = pair.data_dir / "ws"
    workspace.mkdir()
    key = "crash-abort"
    receipt = await client.send_and_start(
        key,
        "run `echo a >> c.txt; sleep 30; echo b >> c.txt` then say never",
        workspace=str(workspace),
    )
    assert receipt.run_id
    victim = await worker_running_activity(client, pair, receipt.run_id, "tool_exec")
    for _ in range(100):  # the command has started: its first line is written
        if (workspace / "c.txt").exists():
            break
        await asyncio.sleep(0.1)
    async for item in client.watch(key, 0):  # and watchers saw it start
        if item.event.kind == EventKind.TOOL_EXECUTION_START:
            break
    victim.kill9()
    await client.abort(key)
    result = await asyncio.wait_for(client.wait_for_run(receipt.run_id), 60)
    assert result.status == ExecutionStatus.ABORTED, result.error
    entries = client.transcript(key)
    assert_transcript_valid(entries)
    exec_result = next(e for e in entries if e.role == Role.TOOL and e.tool_name == "exec")
    assert "may have partly or fully completed" in exec_result.text, exec_result.text
    # Watchers saw the exec start: they see it end too (a chat UI closes the tool's card).
    ends = [
        item.event
        async for item in client.read_events(key, 0)
        if item.event.kind == EventKind.TOOL_EXECUTION_END
        and item.event.tool_call_id == exec_result.tool_call_id
    ]
    assert len(ends) == 1 and ends[0].success is False, ends
    assert (workspace / "c.txt").read_text().startswith("a")
    again = await client.send_and_start(key, "say after")
    assert again.run_id
    assert (await client.wait_for_run(again.run_id)).status == ExecutionStatus.SUCCESS


class OwnServer:
    """A dev server of the test's own (a restart must not touch the shared one) and one worker
    on it, with a workspace."""

    def __init__(self, root: Path) -> None:
        self.server = devserver.DevServer(
            data_dir=root / "temporal", port=devserver.free_port(), ui_port=None
        )
        self.server.start()
        self.dep = make_deployment(self.server, root / "data")
        self.dep.data_dir.mkdir()
        self.workspace = self.dep.data_dir / "ws"
        self.workspace.mkdir()

    def restart(self, down_for: float) -> None:
        self.server.stop()
        time.sleep(down_for)
        self.server.start()

    def stop(self) -> None:
        self.dep.stop_workers()
        self.server.stop()


@pytest.fixture
def own(tmp_path: Path) -> Iterator[OwnServer]:
    made = OwnServer(tmp_path)
    try:
        made.dep.start_worker()
        yield made
    finally:
        made.stop()


async def test_dev_server_restart_mid_run(own: OwnServer) -> None:
    client = await AgentlaneClient.connect(settings_for(own.dep))
    receipt = await client.send_and_start(
        "restart",
        "count slowly to 80 then run `echo hi` then say survived",
        workspace=str(own.workspace),
    )
    assert receipt.run_id

    # One watcher stays subscribed through the restart and resumes from its offset.
    view = MessageView()
    seen: list[str] = []
    offsets: list[int] = []
    first = asyncio.Event()

    async def watch_through() -> None:
        async for item in client.watch("restart", 0, until_run=receipt.run_id):
            offsets.append(item.offset)
            fresh = view.apply(item.event)
            if fresh:
                seen.append(fresh)
                first.set()

    watcher = asyncio.create_task(watch_through())
    await asyncio.wait_for(first.wait(), 30)
    # A message queued behind the run, and a client waiting for its start through the restart
    # (the Python client's `wait_started` raised on it).
    queued = await client.send("restart", "say after", mode="followup")
    waiting = asyncio.create_task(client.wait_started("restart", queued.message_seq))
    await asyncio.sleep(0.5)
    await asyncio.to_thread(own.restart, 8)
    fresh_client = await AgentlaneClient.connect(settings_for(own.dep))
    result = await asyncio.wait_for(fresh_client.wait_for_run(receipt.run_id), 120)
    await asyncio.wait_for(watcher, 60)
    assert result.status == ExecutionStatus.SUCCESS, result.error
    assert result.reply.startswith("survived")
    assert offsets == sorted(set(offsets)), "the watcher skipped back or repeated items"
    counted = " ".join(str(i) for i in range(1, 81))
    assert "".join(seen).startswith(counted + "survived")  # two messages
    entries = client.transcript("restart")
    assert_transcript_valid(entries)
    assert sum(1 for e in entries if e.role == Role.TOOL) == 1
    fate = await asyncio.wait_for(waiting, 120)
    assert fate.state == FateState.STARTED and fate.run_id != receipt.run_id, fate


async def test_agentlane_send_waits_for_its_run_through_a_server_restart_quietly(
    own: OwnServer,
) -> None:
    """Review Q F-h: a server restarting while `agentlane send` waited for its message's run
    wrote the SDK core's coloured `WARN … gRPC call … retried` lines into the terminal."""
    client = await AgentlaneClient.connect(settings_for(own.dep))
    busy = await client.send_and_start(
        "cli-restart", "count slowly to 60", workspace=str(own.workspace)
    )
    assert busy.run_id
    send = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "clients.cli",
        "send",
        "cli-restart",
        "say survived",
        "--mode",
        "followup",
        cwd=REPO,
        env=own.dep.env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert send.stderr is not None
    # Queued behind the busy run: it waits for its run's start (an update's long poll).
    line = await asyncio.wait_for(send.stderr.readline(), 30)
    assert b"queued" in line, line
    await asyncio.to_thread(own.restart, 8)
    rest, err = await asyncio.wait_for(send.communicate(), 180)
    said = (line + err).decode(errors="replace")
    assert send.returncode == 0, said
    assert "survived" in rest.decode(errors="replace")
    assert "WARN" not in said and "\x1b[" not in said, said


async def _stop_with_sigterm(worker: WorkerProcess, signals: int = 1) -> tuple[float, int]:
    """SIGTERM (to the worker only, as a supervisor sends it); seconds until it exited, status."""
    started = time.monotonic()
    for _ in range(signals):
        worker.proc.send_signal(signal.SIGTERM)
        await asyncio.sleep(0.5)
    status = await asyncio.to_thread(worker.proc.wait, 60)
    return time.monotonic() - started, status


async def test_sigterm_mid_exec_stops_the_worker_and_the_run_goes_on(pair: Deployment) -> None:
    client = await AgentlaneClient.connect(settings_for(pair))
    workspace = pair.data_dir / "ws"
    workspace.mkdir()
    key = "sigterm-tool"
    receipt = await client.send_and_start(
        key,
        "run `sleep 60; echo ran >> count.txt` then write after.txt with done",
        workspace=str(workspace),
    )
    assert receipt.run_id
    victim = await worker_running_activity(client, pair, receipt.run_id, "tool_exec")
    await asyncio.sleep(0.5)
    took, status = await _stop_with_sigterm(victim)
    assert took < 30, f"the worker took {took:.1f}s to stop"
    assert status == 0, victim.log.read_text()[-2000:]
    result = await asyncio.wait_for(client.wait_for_run(receipt.run_id), 90)
    assert result.status == ExecutionStatus.SUCCESS, result.error
    exec_result = next(
        e for e in client.transcript(key) if e.role == Role.TOOL and e.tool_name == "exec"
    )
    assert exec_result.is_error and "interrupted" in exec_result.text
    assert (workspace / "after.txt").read_text() == "done"
    # The command stopped with its worker (it was not left to finish on its own).
    assert not (workspace / "count.txt").exists()


async def test_second_sigterm_cuts_the_stop_short_and_names_what_it_cut(
    pair: Deployment,
) -> None:
    client = await AgentlaneClient.connect(settings_for(pair))
    workspace = pair.data_dir / "ws"
    workspace.mkdir()
    key = "sigterm-model"
    expected = " ".join(str(i) for i in range(1, 121))
    receipt = await client.send_and_start(key, "count slowly to 120", workspace=str(workspace))
    assert receipt.run_id
    victim = await worker_running_activity(client, pair, receipt.run_id, "call_model")
    await asyncio.sleep(0.5)
    took, status = await _stop_with_sigterm(victim, signals=2)
    log = victim.log.read_text()
    assert took < 5, f"the worker took {took:.1f}s to stop after a second signal"
    assert status == 3, log[-2000:]
    assert "stop cut short" in log and f"call_model of {receipt.run_id}" in log, log[-2000:]
    result = await asyncio.wait_for(client.wait_for_run(receipt.run_id), 90)
    assert result.status == ExecutionStatus.SUCCESS, result.error
    assert result.reply == expected
    assert_transcript_valid(client.transcript(key))


async def test_a_command_running_through_a_server_restart_keeps_its_result(
    own: OwnServer,
) -> None:
    # exec is never run again: a server restart's seconds without heartbeats timed its attempt
    # out (3 s), its live worker killed the command on the next heartbeat's answer, and the
    # model heard "interrupted (the worker running it stopped)". Its 15 s ride a restart out.
    client = await AgentlaneClient.connect(settings_for(own.dep))
    receipt = await client.send_and_start(
        "cmd", "run `sleep 5; echo kept-running` then say done", workspace=str(own.workspace)
    )
    assert receipt.run_id

    async def exec_started() -> None:
        async for item in client.watch("cmd", 0):
            if item.event.kind == EventKind.TOOL_EXECUTION_START:
                return

    await asyncio.wait_for(exec_started(), 30)
    await asyncio.to_thread(own.restart, 3)
    fresh_client = await AgentlaneClient.connect(settings_for(own.dep))
    result = await asyncio.wait_for(fresh_client.wait_for_run(receipt.run_id), 120)
    assert result.status == ExecutionStatus.SUCCESS, result.error
    (answer,) = [e for e in client.transcript("cmd") if e.role == Role.TOOL]
    assert not answer.is_error and "kept-running" in answer.text, answer.text


async def test_a_send_while_a_killed_worker_is_being_restarted_waits_for_the_new_one(
    solo: Deployment,
) -> None:
    """Review Q F-i: a send right after the worker was killed and started again said "no worker
    polls" (exit 5) while the new worker was still starting; the next message was then
    collected with it. The client waits a while for the new worker when one stopped lately."""
    client = await AgentlaneClient.connect(settings_for(solo))
    workspace = solo.data_dir / "ws"
    workspace.mkdir()
    first = await client.send_and_start("restarted", "say before", workspace=str(workspace))
    assert first.run_id
    await client.wait_for_run(first.run_id)
    solo.workers[0].kill9()
    await asyncio.sleep(0.5)
    booting = asyncio.create_task(asyncio.to_thread(solo.start_worker))
    receipt = await client.send_and_start("restarted", "say after")
    assert receipt.run_id, receipt
    result = await asyncio.wait_for(client.wait_for_run(receipt.run_id), 60)
    assert result.reply == "after"
    await booting
