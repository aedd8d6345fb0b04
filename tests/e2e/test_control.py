"""Control that always holds (real server, real worker): abort and interrupt at every kind of safe
point, fast loops included; accepted messages survive abnormal run ends; bursts are absorbed."""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path

from agentlane.events import EventKind
from agentlane.messages import FateState, SendDisposition
from agentlane.run import ExecutionStatus, TerminationReason
from agentlane.transcript import Role
from clients.api import AgentlaneClient
from tests.e2e.support import assert_transcript_valid, terminate_in_temporal, wait_idle
from tests.harness import Deployment


def fast_loop(steps: int) -> str:
    return " then ".join(f"write f{i}.txt with {i}" for i in range(steps)) + " then say done"


async def wait_turn(client: AgentlaneClient, key: str, run_id: str, turn: int) -> None:
    async def go() -> None:
        async for item in client.watch(key, 0):
            event = item.event
            if (
                event.run_id == run_id
                and event.kind == EventKind.TURN_START
                and (event.turn_index or 0) >= turn
            ):
                return

    await asyncio.wait_for(go(), 60)


async def end_seen(client: AgentlaneClient, key: str, run_id: str) -> float:
    """When a watching client sees the run's agent_end (monotonic clock)."""
    async for item in client.watch(key, 0, until_run=run_id):
        if item.event.kind == EventKind.AGENT_END:
            return time.monotonic()
    raise AssertionError("stream ended without agent_end")


async def test_abort_in_a_zero_latency_loop_stops_within_a_step(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    first = await client.send_and_start(session_key, fast_loop(150), workspace=str(workspace))
    assert first.run_id
    await wait_turn(client, session_key, first.run_id, 10)
    watcher = asyncio.create_task(end_seen(client, session_key, first.run_id))
    asked = time.monotonic()
    receipt = await client.abort(session_key, "enough")
    # Counted once the abort is accepted, as bench_control counts: steps that start while the
    # request is on its way (several, on a loaded machine, in a loop of 20 ms steps) are not
    # the engine's to stop.
    steps_before = len(list(workspace.glob("f*.txt")))
    assert receipt.run_id == first.run_id
    seen = await asyncio.wait_for(watcher, 30)
    assert seen - asked < 2.0, f"abort took {seen - asked:.2f}s to reach the client"
    result = await client.wait_for_run(first.run_id)
    assert result.status == ExecutionStatus.ABORTED
    assert result.termination_reason == TerminationReason.ABORT_SIGNAL
    # At most one step started after the abort was accepted (plus the one in flight).
    assert len(list(workspace.glob("f*.txt"))) <= steps_before + 2
    assert result.tool_calls < 150
    entries = client.transcript(session_key)
    assert_transcript_valid(entries)
    again = await client.send_and_start(session_key, "say still here")
    assert again.run_id
    assert (await client.wait_for_run(again.run_id)).reply == "still here"


async def test_abort_within_200ms_of_send(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    receipt = await client.send(session_key, fast_loop(150), workspace=str(workspace))
    sent = time.monotonic()
    assert receipt.disposition == SendDisposition.STARTED
    abort = await client.abort(session_key, "too fast")
    assert time.monotonic() - sent < 0.2 * 5  # generous on a loaded 2-core machine
    written = len(list(workspace.glob("f*.txt")))
    assert abort.run_id is not None, abort.note
    result = await client.wait_for_run(abort.run_id)
    assert result.status == ExecutionStatus.ABORTED
    # The step in flight when the abort was accepted may finish; no other starts.
    assert result.tool_calls <= written + 2
    assert result.tool_calls < 150
    entries = client.transcript(session_key)
    assert_transcript_valid(entries)
    assert [e.text for e in entries if e.role == Role.USER] == [fast_loop(150)]


async def test_abort_of_an_idle_session_says_there_is_nothing_to_abort(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    first = await client.send_and_start(session_key, "say hi", workspace=str(workspace))
    assert first.run_id
    await client.wait_for_run(first.run_id)
    receipt = await client.abort(session_key)
    assert receipt.run_id is None
    assert "nothing to abort" in receipt.note


async def test_abort_during_a_long_exec_kills_it(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    marker = f"agentlane-sleep-{session_key}"
    first = await client.send_and_start(
        session_key, f"run `sleep 60 # {marker}`", workspace=str(workspace)
    )
    assert first.run_id

    async def tool_started() -> None:
        async for item in client.watch(session_key, 0):
            if item.event.kind == EventKind.TOOL_EXECUTION_START:
                return

    await asyncio.wait_for(tool_started(), 30)
    await asyncio.sleep(0.3)
    asked = time.monotonic()
    await client.abort(session_key)
    result = await client.wait_for_run(first.run_id)
    assert time.monotonic() - asked < 3
    assert result.status == ExecutionStatus.ABORTED
    await asyncio.sleep(0.5)
    ps = (
        await asyncio.to_thread(
            subprocess.run, ["ps", "-eo", "args"], capture_output=True, text=True
        )
    ).stdout
    assert marker not in ps, "the exec's process outlived the abort"


async def test_interrupt_during_a_fast_loop_starts_the_new_run_at_once(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    first = await client.send_and_start(session_key, fast_loop(150), workspace=str(workspace))
    assert first.run_id
    await wait_turn(client, session_key, first.run_id, 5)
    asked = time.monotonic()
    second = await client.send_and_start(session_key, "say switched", mode="interrupt")
    assert second.disposition == SendDisposition.INTERRUPTED
    assert second.run_id and second.run_id != first.run_id
    assert time.monotonic() - asked < 3
    old = await client.wait_for_run(first.run_id)
    assert old.status == ExecutionStatus.ABORTED
    assert (await client.wait_for_run(second.run_id)).reply == "switched"
    assert_transcript_valid(client.transcript(session_key))


async def test_a_terminated_run_gives_its_message_back(
    client: AgentlaneClient, shared: Deployment, session_key: str, workspace: Path
) -> None:
    first = await client.send_and_start(
        session_key, "run `sleep 30` then say finally", workspace=str(workspace)
    )
    assert first.run_id
    await wait_turn(client, session_key, first.run_id, 0)
    await asyncio.sleep(0.5)
    await terminate_in_temporal(shared.address, first.run_id)
    fate = await asyncio.wait_for(client.wait_started(session_key, first.message_seq), 30)
    # The message runs again, in a new run.
    while fate.run_id == first.run_id:
        await asyncio.sleep(0.2)
        fate = await client.wait_started(session_key, first.message_seq)
    # Its watchers were told it ended (it could not say so itself), before the next run began.
    lifecycle = (EventKind.AGENT_START, EventKind.ERROR, EventKind.AGENT_END)

    async def ends() -> list[EventKind]:
        return [
            item.event.kind
            async for item in client.watch(session_key, 0, until_run=first.run_id)
            if item.event.run_id == first.run_id and item.event.kind in lifecycle
        ]

    assert await asyncio.wait_for(ends(), 30) == list(lifecycle)
    assert fate.state == FateState.STARTED and fate.run_id
    result = await client.wait_for_run(fate.run_id)
    # The new run sees the interrupted exec answered (never re-run) and carries on.
    assert result.status == ExecutionStatus.SUCCESS
    assert result.reply.startswith("finally")
    entries = client.transcript(session_key)
    assert_transcript_valid(entries)
    users = [e for e in entries if e.role == Role.USER]
    assert [u.text for u in users] == ["run `sleep 30` then say finally"]
    # The terminated run's model call counts in the session's totals (it was billed): the
    # session's tokens are both runs' calls, as the transcript records them.
    billed = sum(e.usage.total for e in entries if e.role == Role.ASSISTANT and e.usage)
    status = await client.status(session_key)
    assert status.usage.total == billed > result.usage.accumulated.total


async def test_a_burst_from_concurrent_senders_is_handled_once_each(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    await client.send_and_start(
        session_key,
        "say ready",
        workspace=str(workspace),
        session_overrides={"queue": {"cap": 1000}},
    )
    senders, per_sender = 40, 5
    texts = [f"say m{s}-{i}" for s in range(senders) for i in range(per_sender)]

    async def sender(s: int) -> list[int]:
        seqs = []
        for i in range(per_sender):
            r = await client.send(session_key, f"say m{s}-{i}", mode="followup")
            assert r.disposition in (SendDisposition.STARTED, SendDisposition.QUEUED)
            seqs.append(r.message_seq)
        return seqs

    seqs = [
        s for group in await asyncio.gather(*(sender(s) for s in range(senders))) for s in group
    ]
    assert len(set(seqs)) == len(texts)
    await wait_idle(client, session_key, runs=1 + len(texts), timeout=240)
    users = [e.text for e in client.transcript(session_key) if e.role == Role.USER]
    assert sorted(users[1:]) == sorted(texts)


async def test_a_tool_loop_is_detected_warned_and_stopped(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    """Identical calls with identical results: warnings at 10 and 20, the global circuit breaker
    blocks from 30 on, and a model that keeps going is stopped instead of looping for 48 h."""
    loop = " then ".join(["read notes.txt"] * 45) + " then say done"
    first = await client.send_and_start(session_key, loop, workspace=str(workspace))
    assert first.run_id
    result = await client.wait_for_run(first.run_id)
    assert result.status == ExecutionStatus.ERROR
    assert result.error is not None and "loop detection" in result.error.message
    # The model made 33 calls: 30 ran, the circuit breaker blocked 3 and then stopped it.
    assert result.tool_calls == 33
    events = []
    async for item in client.watch(session_key, 0, until_run=first.run_id):
        if item.event.kind == EventKind.TOOL_LOOP:
            events.append(item.event)
    warnings = [e for e in events if e.data["level"] == "warning"]
    blocks = [e for e in events if e.data["blocked"]]
    assert [e.data["count"] for e in warnings] == [10, 20]
    assert len(blocks) == 3 and blocks[0].data["detector"] == "global_circuit_breaker"
    entries = client.transcript(session_key)
    assert_transcript_valid(entries)
    blocked = [e for e in entries if e.role == Role.TOOL and e.text.startswith("CRITICAL")]
    assert len(blocked) == 3
    again = await client.send_and_start(session_key, "say recovered")
    assert again.run_id
    assert (await client.wait_for_run(again.run_id)).reply == "recovered"


async def test_close_then_send_keeps_settings_and_watch_completes(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    first = await client.send_and_start(
        session_key, "write kept.txt with 1 then say first", workspace=str(workspace)
    )
    assert first.run_id
    await client.wait_for_run(first.run_id)
    await client.configure_queue(session_key, "mode:followup debounce:0 cap:7")
    old_offset = await client.events_offset(session_key)
    await client.close(session_key)

    await asyncio.wait_for(client.client.get_workflow_handle(f"session:{session_key}").result(), 30)
    # Reopened by a message that names neither workspace nor model.
    again = await client.send_and_start(session_key, "read kept.txt then say second")
    assert again.run_id
    status = await client.status(session_key)
    assert status.workspace == str(workspace)
    assert status.queue_settings is not None
    assert (status.queue_settings.mode.value, status.queue_settings.cap) == ("followup", 7)
    # A watcher at the old incarnation's offset sees the new run through to its end.
    seen = [
        item.offset async for item in client.watch(session_key, old_offset, until_run=again.run_id)
    ]
    assert seen and seen[0] >= old_offset
    result = await client.wait_for_run(again.run_id)
    assert result.reply.startswith("second")
    tools = [e for e in client.transcript(session_key) if e.role == Role.TOOL]
    assert tools[-1].text.strip() == "1"


async def test_abort_lands_across_continue_as_new_hand_overs(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    """The run continues as new every few steps; aborts at different moments all land."""
    overrides: dict[str, object] = {"run_continue_as_new_after_events": 12}
    ends = []
    for delay in (0.05, 0.15, 0.3, 0.5):
        receipt = await client.send_and_start(
            session_key, fast_loop(80), workspace=str(workspace), session_overrides=overrides
        )
        assert receipt.run_id
        await asyncio.sleep(delay)
        abort = await client.abort(session_key, f"stop at {delay}")
        assert abort.run_id == receipt.run_id
        result = await asyncio.wait_for(client.wait_for_run(receipt.run_id), 20)
        ends.append(result.status)
        assert result.tool_calls < 80
        segments = [
            wf async for wf in client.client.list_workflows(f"WorkflowId = '{receipt.run_id}'")
        ]
        assert len(segments) > 1 or result.tool_calls < 3, "the run never continued as new"
    assert ends == [ExecutionStatus.ABORTED] * 4
    assert_transcript_valid(client.transcript(session_key))


async def test_abort_during_a_streaming_model_call(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    first = await client.send_and_start(
        session_key, "count slowly to 400", workspace=str(workspace)
    )
    assert first.run_id

    async def streaming() -> None:
        async for item in client.watch(session_key, 0):
            if item.event.kind == EventKind.TEXT_DELTA:
                return

    await asyncio.wait_for(streaming(), 30)
    watcher = asyncio.create_task(end_seen(client, session_key, first.run_id))
    asked = time.monotonic()
    await client.abort(session_key)
    seen = await asyncio.wait_for(watcher, 30)
    assert seen - asked < 2.0, f"{seen - asked:.2f}s"
    result = await client.wait_for_run(first.run_id)
    assert result.status == ExecutionStatus.ABORTED
    entries = client.transcript(session_key)
    assert_transcript_valid(entries)
    partial = [e for e in entries if e.role == Role.ASSISTANT]
    assert partial and partial[-1].stop_reason == "aborted"
    assert partial[-1].text.startswith("1 2 3")


async def test_a_steer_the_run_never_took_is_answered_with_the_run_that_did(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    """Handed to a run is not taken: aborted before its next model call, the run leaves the
    steering to a later run. `wait_started` used to answer "steered into run 1" at once, and an
    adapter following run 1 never saw the reply."""
    first = await client.send_and_start(
        session_key, "run `sleep 8` then say first", workspace=str(workspace)
    )
    assert first.run_id
    await wait_turn(client, session_key, first.run_id, 0)
    await asyncio.sleep(1.0)
    steer = await client.send(session_key, "say steered", mode="steer")
    assert steer.disposition == SendDisposition.STEERED
    await client.abort(session_key, "changed my mind")
    fate = await asyncio.wait_for(client.wait_started(session_key, steer.message_seq), 60)
    assert fate.state == FateState.STARTED and fate.run_id not in (None, first.run_id), fate
    assert fate.run_id is not None
    assert (await client.wait_for_run(fate.run_id)).reply == "steered"


async def test_a_redelivery_after_the_session_closed_is_still_a_duplicate(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    """A chat platform's retry can land right after an idle close: the reopened session knows
    the message ids its last incarnation took (it ran the message again)."""
    first = await client.send_and_start(
        session_key, "say once", workspace=str(workspace), message_id="plat-1"
    )
    assert first.run_id
    await client.wait_for_run(first.run_id)
    await client.close(session_key)
    await asyncio.wait_for(client.client.get_workflow_handle(f"session:{session_key}").result(), 30)
    again = await client.send(session_key, "say once", message_id="plat-1")
    assert again.disposition == SendDisposition.DUPLICATE, again
    users = [e for e in client.transcript(session_key) if e.role == Role.USER]
    assert [u.text for u in users] == ["say once"]


async def test_a_queued_receipt_names_the_interrupt_it_runs_after(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    first = await client.send_and_start(
        session_key, "run `sleep 20` then say first", workspace=str(workspace)
    )
    assert first.run_id
    await wait_turn(client, session_key, first.run_id, 0)
    one = await client.send(session_key, "say i1", mode="interrupt")
    two = await client.send(session_key, "say i2", mode="interrupt")
    queued = await client.send(session_key, "say after", mode="followup")
    assert queued.disposition == SendDisposition.QUEUED
    assert queued.note == (
        f"runs after message #{two.message_seq} (an interrupt sent before it)"
    ), queued.note
    assert one.message_seq < two.message_seq
    await wait_idle(client, session_key, runs=4, timeout=90)
