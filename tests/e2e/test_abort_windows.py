"""An abort reaches the run its message started, whenever it lands (real server, real worker):
before the run is made (held for it), while it is being made, while it runs; "nothing to abort"
is said only once the run has ended (workflows/policy/abort_hold.py)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agentlane.events import EventKind
from agentlane.ids import run_workflow_id
from agentlane.run import ExecutionStatus, TerminationReason
from agentlane.transcript import Role
from clients.api import AgentlaneClient, NoWorker
from tests.conftest import make_deployment, settings_for
from tests.e2e.support import assert_transcript_valid
from tests.e2e.test_control import fast_loop


async def lifecycle(client: AgentlaneClient, key: str, run_id: str) -> list[EventKind]:
    kinds: list[EventKind] = []
    async for item in client.watch(key, 0, until_run=run_id):
        if item.event.run_id == run_id and item.event.kind in (
            EventKind.AGENT_START,
            EventKind.AGENT_END,
        ):
            kinds.append(item.event.kind)
    return kinds


async def test_an_abort_sent_before_any_worker_ran_the_message_stops_its_run(
    server: object, tmp_path: Path
) -> None:
    """The message and the abort are both in history before a worker runs the session: the
    abort lands before the session has even numbered the message. It is held for that run."""
    dep = make_deployment(server, tmp_path)
    ws = tmp_path / "ws"
    ws.mkdir()
    key = f"hold-{uuid.uuid4().hex[:8]}"
    client = await AgentlaneClient.connect(settings_for(dep))
    with pytest.raises(NoWorker):
        await client.send(key, fast_loop(40), workspace=str(ws), worker_wait=1)
    with pytest.raises(NoWorker, match="abort recorded"):
        await client.abort(key, "changed my mind")
    dep.start_worker()
    try:
        fate = await asyncio.wait_for(client.wait_started(key, 1), 60)
        assert fate.run_id == run_workflow_id(key, 1)
        result = await client.wait_for_run(fate.run_id)
        assert result.status == ExecutionStatus.ABORTED, result
        assert result.termination_reason == TerminationReason.ABORT_SIGNAL
        # Delivered as the run started: at most the step in flight ran.
        assert result.tool_calls <= 1
        assert len(list(ws.glob("f*.txt"))) <= 1
        # The aborted run's lifecycle, as for any abort: one start, one end, the prompt kept.
        kinds = await asyncio.wait_for(lifecycle(client, key, fate.run_id), 30)
        assert kinds == [EventKind.AGENT_START, EventKind.AGENT_END]
        entries = client.transcript(key)
        assert_transcript_valid(entries)
        assert [e.text for e in entries if e.role == Role.USER] == [fast_loop(40)]
        # The abort was for that run only.
        idle = await client.abort(key)
        assert idle.run_id is None and "nothing to abort" in idle.note
        again = await client.send_and_start(key, "say still here")
        assert again.run_id == run_workflow_id(key, 2)
        assert (await client.wait_for_run(again.run_id)).reply == "still here"
    finally:
        dep.stop_workers()


async def test_a_held_abort_holds_even_when_the_runs_first_answer_is_quick(
    server: object, tmp_path: Path
) -> None:
    """Review T F-c: with no worker, two messages then an abort; once a worker ran, the abort
    (signalled after the run started) lost the race to a quick answer and the run it named
    succeeded, although its receipt said it "starts and ends as aborted". It now starts so."""
    dep = make_deployment(server, tmp_path)
    dep.start_worker()
    key = f"held-{uuid.uuid4().hex[:8]}"
    client = await AgentlaneClient.connect(settings_for(dep))
    first = await client.send_and_start(key, "say one", workspace=str(tmp_path))
    assert first.run_id
    await client.wait_for_run(first.run_id)
    dep.stop_workers()
    try:
        for text in ("say queued while no worker", "say two"):
            with pytest.raises(NoWorker):
                await client.send(key, text, worker_wait=1)
        with pytest.raises(NoWorker, match="abort recorded"):
            await client.abort(key, "changed my mind")
        dep.start_worker()
        held = run_workflow_id(key, 2)
        result = await asyncio.wait_for(client.wait_for_run(held), 60)
        assert result.status == ExecutionStatus.ABORTED, result
        assert result.turns == 0 and result.reply == ""
        entries = client.transcript(key)
        assert_transcript_valid(entries)
        said = [e.text for e in entries if e.role == Role.USER]
        assert said[:2] == ["say one", "say queued while no worker"], said
        assert not [e for e in entries if e.role == Role.ASSISTANT and e.run_id == held]
        after = await asyncio.wait_for(client.wait_for_run(run_workflow_id(key, 3)), 60)
        assert after.reply == "two"
    finally:
        dep.stop_workers()


async def test_a_queue_change_sent_with_no_worker_says_it_applies_later_and_does(
    server: object, tmp_path: Path
) -> None:
    """Review T F-d: `queue` with no worker said it failed, and the change was applied when a
    worker came, silently."""
    dep = make_deployment(server, tmp_path)
    dep.start_worker()
    key = f"qnw-{uuid.uuid4().hex[:8]}"
    client = await AgentlaneClient.connect(settings_for(dep))
    assert (await client.send_and_start(key, "say one", workspace=str(tmp_path))).run_id
    dep.stop_workers()
    try:
        with pytest.raises(NoWorker, match="not confirmed; the server holds it"):
            await client.configure_queue(key, "followup")
        dep.start_worker()
        for _ in range(50):
            status = await client.status(key)
            if status.queue_settings and status.queue_settings.mode.value == "followup":
                break
            await asyncio.sleep(0.2)
        assert status.queue_settings is not None
        assert status.queue_settings.mode.value == "followup", status.queue_settings
    finally:
        dep.stop_workers()


@pytest.mark.parametrize("delay", [0.0, 0.02, 0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.0])
async def test_an_abort_at_any_moment_after_send_reaches_the_run_or_finds_it_ended(
    client: AgentlaneClient, session_key: str, workspace: Path, delay: float
) -> None:
    """From the `started` receipt on, an abort names the message's run and that run ends
    aborted (or had just finished its last step); "nothing to abort" only after it ended."""
    receipt = await client.send(session_key, fast_loop(6), workspace=str(workspace))
    await asyncio.sleep(delay)
    abort = await client.abort(session_key, "stop")
    answered = datetime.now(UTC)
    if abort.run_id is not None:
        # The run a receipt names exists by then: it can be waited for at once.
        result = await client.wait_for_run(abort.run_id)
    fate = await asyncio.wait_for(client.wait_started(session_key, receipt.message_seq), 60)
    assert fate.run_id == run_workflow_id(session_key, 1)
    if abort.run_id is None:
        result = await client.wait_for_run(fate.run_id)
        assert "nothing to abort" in abort.note
        assert result.status == ExecutionStatus.SUCCESS, result
        assert result.ended_at <= answered, "told 'nothing to abort' while the run was going"
        return
    assert abort.run_id == fate.run_id, abort
    if "about to start" in abort.note:
        assert result.status == ExecutionStatus.ABORTED, result
        assert result.tool_calls <= 1
    else:
        # A run that was already running stops at its next safe point, or its last step
        # finished it first.
        assert result.status in (ExecutionStatus.ABORTED, ExecutionStatus.SUCCESS), result
    assert_transcript_valid(client.transcript(session_key))


async def test_a_run_named_before_temporal_made_it_is_waited_for(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    """An abort that meets a run while its session is still starting it names the run a moment
    before Temporal has made it; waiting for that run by its id must not fail as "not found".
    Here the wait even begins before the message is sent."""
    run_id = run_workflow_id(session_key, 1)
    waiting = asyncio.create_task(client.wait_for_run(run_id))
    await asyncio.sleep(0.5)
    assert not waiting.done(), waiting
    receipt = await client.send_and_start(session_key, "say made", workspace=str(workspace))
    assert receipt.run_id == run_id
    result = await asyncio.wait_for(waiting, 60)
    assert result.status == ExecutionStatus.SUCCESS and result.reply == "made", result


async def test_a_worker_that_just_stopped_is_not_waited_for_as_busy(
    server: object, tmp_path: Path
) -> None:
    # The server lists a stopped worker's poller, fresh-looking, for a minute: a worker of this
    # host whose process is gone is known gone, so a send says at once that none runs (it
    # waited ~65 s, then called the worker busy).
    import time

    dep = make_deployment(server, tmp_path)
    dep.start_worker()
    client = await AgentlaneClient.connect(settings_for(dep))
    assert (await client.send_and_start(f"stop-{uuid.uuid4().hex[:6]}", "say hi")).run_id
    dep.stop_workers()
    started = time.monotonic()
    with pytest.raises(NoWorker, match="no worker polls"):
        await client.send(f"gone-{uuid.uuid4().hex[:6]}", "say hi")
    assert time.monotonic() - started < 20
