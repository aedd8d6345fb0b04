"""Steer, interrupt, abort and queued messages while a run is busy (real server, real worker)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from temporalio.client import WorkflowHistory

from agentlane import search_attributes as sa
from agentlane.events import EventKind
from agentlane.ids import session_workflow_id
from agentlane.messages import (
    FateState,
    InboundMessage,
    QueueMode,
    SendDisposition,
)
from agentlane.queue_settings import QueueOptions
from agentlane.run import ExecutionStatus, TerminationReason
from agentlane.transcript import Role
from clients.api import AgentlaneClient
from tests.e2e.support import assert_transcript_valid, collect, wait_idle
from workflows.session import SessionWorkflow


async def wait_for_event(client: AgentlaneClient, key: str, run_id: str, kind: EventKind) -> None:
    async def go() -> None:
        async for item in client.watch(key, 0):
            if item.event.run_id == run_id and item.event.kind == kind:
                return

    await asyncio.wait_for(go(), 30)


async def busy_run(client: AgentlaneClient, key: str, workspace: Path) -> str:
    """A run that counts for a while, then runs a command: streaming when this returns (its
    id)."""
    first = await client.send_and_start(
        key,
        "count slowly to 60 then run `sleep 1` then say not steered",
        workspace=str(workspace),
    )
    assert first.run_id
    await wait_for_event(client, key, first.run_id, EventKind.TEXT_DELTA)
    return first.run_id


async def test_steer_reaches_the_running_run(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    first = await busy_run(client, session_key, workspace)
    steer = await client.send_and_start(session_key, "say steered ok", mode="steer")
    assert steer.disposition == SendDisposition.STEERED
    assert steer.run_id == first
    result = await client.wait_for_run(first)
    assert result.status == ExecutionStatus.SUCCESS
    assert result.reply == "steered ok"
    entries = client.transcript(session_key)
    assert_transcript_valid(entries)
    users = [e for e in entries if e.role == Role.USER]
    assert [u.run_id for u in users] == [first, first]
    skipped = [e for e in entries if e.role == Role.TOOL]
    assert len(skipped) == 1 and skipped[0].is_error and "Skipped" in skipped[0].text
    assert not (await client.status(session_key)).queue_length


async def test_steer_backlog_steers_the_run_and_then_runs_again_with_the_message_as_prompt(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    first = await busy_run(client, session_key, workspace)
    steer = await client.send(session_key, "say backlog ok", mode="steer-backlog")
    assert steer.disposition == SendDisposition.STEERED
    assert (await client.wait_for_run(first)).reply == "backlog ok"
    await wait_idle(client, session_key, runs=2)
    second = f"session:{session_key}:run:2"
    assert (await client.wait_for_run(second)).reply == "backlog ok"
    entries = client.transcript(session_key)
    assert_transcript_valid(entries)
    # The follow-up run starts from the message (a prompt of its own), not from the model's
    # last answer, which a provider would continue as a prefill or refuse.
    ran = [e for e in entries if e.run_id == second]
    assert ran[0].role == Role.USER and ran[0].text == "say backlog ok"
    users = [e for e in entries if e.role == Role.USER]
    assert [u.run_id for u in users] == [first, first, second]


async def test_interrupt_stops_the_run_and_starts_a_new_one(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    first = await client.send_and_start(
        session_key, "count slowly to 400", workspace=str(workspace)
    )
    assert first.run_id
    await wait_for_event(client, session_key, first.run_id, EventKind.TEXT_DELTA)
    started = time.monotonic()
    second = await client.send_and_start(session_key, "say interrupted you", mode="interrupt")
    assert second.disposition == SendDisposition.INTERRUPTED
    assert second.run_id == f"session:{session_key}:run:2"
    assert time.monotonic() - started < 10
    aborted = await client.wait_for_run(first.run_id)
    assert aborted.status == ExecutionStatus.ABORTED
    assert aborted.termination_reason == TerminationReason.ABORT_SIGNAL
    result = await client.wait_for_run(second.run_id)
    assert result.reply == "interrupted you"
    entries = client.transcript(session_key)
    assert_transcript_valid(entries)
    partial = [e for e in entries if e.role == Role.ASSISTANT and e.run_id == first.run_id]
    assert partial and partial[0].stop_reason == "aborted" and partial[0].text.startswith("1 2")


async def test_abort_kills_a_running_tool_and_the_session_stays_usable(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    first = await client.send_and_start(
        session_key, "run `sleep 30; touch late.txt`", workspace=str(workspace)
    )
    assert first.run_id
    await wait_for_event(client, session_key, first.run_id, EventKind.TOOL_EXECUTION_START)
    asked = time.monotonic()
    await client.abort(session_key, "changed my mind")
    result = await client.wait_for_run(first.run_id)
    assert time.monotonic() - asked < 8
    assert result.status == ExecutionStatus.ABORTED
    assert result.error is not None and result.error.message == "changed my mind"
    got = await collect(client, session_key, first.run_id)
    end = [e for e in got.events if e.kind == EventKind.AGENT_END]
    assert end and end[0].termination_reason == "abort_signal"
    # Its search attribute counts the turn it stopped in, as its result and its end do.
    described = await client.client.get_workflow_handle(first.run_id).describe()
    assert described.typed_search_attributes.get(sa.TURNS_KEY) == result.turns == 1
    await asyncio.sleep(1)
    assert not (workspace / "late.txt").exists()
    entries = client.transcript(session_key)
    assert_transcript_valid(entries)
    tool = [e for e in entries if e.role == Role.TOOL][0]
    assert tool.is_error and "cancelled" in tool.text

    again = await client.send_and_start(session_key, "say still here")
    assert again.run_id
    assert (await client.wait_for_run(again.run_id)).reply == "still here"


async def test_messages_sent_while_busy_are_queued_and_run_after(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    first = await client.send_and_start(session_key, "count slowly to 40", workspace=str(workspace))
    assert first.run_id
    queued = [
        await client.send_and_start(session_key, "say first follow-up"),
        await client.send_and_start(session_key, "say second follow-up"),
        await client.send_and_start(session_key, "say a plain follow-up", mode="followup"),
    ]
    assert all(r.disposition == SendDisposition.QUEUED for r in queued)
    assert queued[0].mode == QueueMode.COLLECT
    status = await client.status(session_key)
    assert status.queue_length == 3
    await client.wait_for_run(first.run_id)
    await wait_idle(client, session_key, runs=3)
    collected = await client.wait_for_run(f"session:{session_key}:run:2")
    followup = await client.wait_for_run(f"session:{session_key}:run:3")
    users = [e.text for e in client.transcript(session_key) if e.role == Role.USER]
    # Collect mode merges what queued up into one prompt; the follow-up runs on its own.
    assert users[1].startswith("[Queued messages while agent was busy]")
    assert "Queued #1\nsay first follow-up" in users[1]
    assert "Queued #2\nsay second follow-up" in users[1]
    assert users[2] == "say a plain follow-up"
    assert collected.status == followup.status == ExecutionStatus.SUCCESS
    assert followup.reply == "a plain follow-up"


async def test_duplicate_message_id_is_not_run_twice(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    first = await client.send_and_start(
        session_key, "say once", message_id="m-1", workspace=str(workspace)
    )
    assert first.run_id
    await client.wait_for_run(first.run_id)
    again = await client.send_and_start(session_key, "say once", message_id="m-1")
    assert again.disposition == SendDisposition.DUPLICATE
    assert (await client.status(session_key)).runs == 1


async def test_a_session_keeps_recent_fates_and_answers_for_older_ones_at_once(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    """150 messages queued behind a busy run settle when the next run takes them: the session
    keeps the newest 100 settled fates (and those a redelivery may still name), and
    `wait_started` for one it let go answers `forgotten` at once instead of waiting. The 150
    come without a message id, as from an adapter that has none (the client gives each message
    one, which keeps its fate for the dedupe window)."""
    key = session_key
    first = await client.send_and_start(key, "run `sleep 300`", workspace=str(workspace))
    assert first.run_id
    wide = QueueOptions(cap=200, debounce_ms=0)
    with_id = await client.send(key, "note with an id", message_id="m-kept", queue=wide)
    session = client.client.get_workflow_handle(session_workflow_id(key))
    plain = [
        await session.execute_update(
            SessionWorkflow.send, InboundMessage(text=f"note {n}", queue=wide)
        )
        for n in range(150)
    ]
    assert {r.disposition for r in [with_id, *plain]} == {SendDisposition.QUEUED}
    await client.abort(key, "let the queue run")
    await wait_idle(client, key, runs=2)

    newest = await asyncio.wait_for(client.wait_started(key, plain[-1].message_seq), 10)
    assert newest.state == FateState.STARTED and newest.run_id == f"session:{key}:run:2"
    asked = time.monotonic()
    oldest = await asyncio.wait_for(client.wait_started(key, plain[0].message_seq), 10)
    assert oldest.state == FateState.FORGOTTEN, oldest
    assert time.monotonic() - asked < 2
    # The first message has the client's id: a retry of its send may still come.
    assert (await client.wait_started(key, first.message_seq)).run_id == first.run_id
    # Older than the newest 100, but a redelivery inside the dedupe window still names it.
    again = await client.send(key, "note with an id", message_id="m-kept")
    assert again.disposition == SendDisposition.DUPLICATE
    assert again.duplicate_of == with_id.message_seq
    assert again.original is not None and again.original.state == FateState.STARTED


def _asks(history: WorkflowHistory, name: str) -> int:
    """The updates named `name` a session's history accepted."""
    return sum(
        1
        for e in history.events
        if e.HasField("workflow_execution_update_accepted_event_attributes")
        and e.workflow_execution_update_accepted_event_attributes.accepted_request.input.name
        == name
    )


async def test_waiting_for_a_queued_message_is_one_ask_until_its_run_starts(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    """`wait_started` for a message queued behind a busy run waits in the session until the
    message's run starts: one update however long the wait (it used to answer `pending` at once,
    and the caller asked again every 50 ms, five history events each). A message that starts a
    run at once is one ask too. Past four callers waiting at once, the rest are answered
    `pending` and ask again later, and still learn the run."""
    key = session_key
    first = await client.send_and_start(key, "run `sleep 3`", workspace=str(workspace))
    assert first.run_id
    queued = await client.send(key, "say after", mode="followup")
    assert queued.disposition == SendDisposition.QUEUED
    began = time.monotonic()
    fates = await asyncio.wait_for(
        asyncio.gather(*(client.wait_started(key, queued.message_seq) for _ in range(6))), 60
    )
    waited = time.monotonic() - began
    assert {(f.state, f.run_id) for f in fates} == {(FateState.STARTED, f"session:{key}:run:2")}
    assert waited >= 1.5, waited  # it waited for the first run's `sleep 3`
    await client.wait_for_run(f"session:{key}:run:2")
    session = client.client.get_workflow_handle(session_workflow_id(key))
    asks = _asks(await session.fetch_history(), "wait_started")
    # The first message's one ask, four held asks, and two callers over the cap asking again at
    # growing intervals (at most ~7 asks each over the 3 s wait).
    assert 1 + 6 <= asks <= 1 + 4 + 2 * 8, asks

    alone = await client.send_and_start(key, "say alone")
    assert alone.run_id == f"session:{key}:run:3"
    assert _asks(await session.fetch_history(), "wait_started") == asks + 1


async def test_steering_a_stopped_run_never_took_runs_under_its_own_number(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    # The run is aborted during its command, before its next model call could take the
    # steering: the message runs in the next run, and `wait_started` for the number its sender
    # was given names that run (an adapter following it gets the reply).
    first = await client.send_and_start(
        session_key, "run `sleep 5` then say done", workspace=str(workspace)
    )
    assert first.run_id
    await wait_for_event(client, session_key, first.run_id, EventKind.TOOL_EXECUTION_START)
    steer = await client.send(session_key, "say STEERED", mode="steer")
    assert steer.disposition == SendDisposition.STEERED and steer.run_id == first.run_id
    await client.abort(session_key, "stop")
    fate = await asyncio.wait_for(client.wait_started(session_key, steer.message_seq), 30)
    deadline = time.monotonic() + 30
    while fate.run_id == first.run_id:  # still steered into the stopping run
        assert time.monotonic() < deadline, f"its fate stayed {fate}"
        await asyncio.sleep(0.2)
        fate = await client.wait_started(session_key, steer.message_seq)
    assert fate.run_id == f"session:{session_key}:run:2"
    assert (await client.wait_for_run(fate.run_id)).reply == "STEERED"
    assert_transcript_valid(client.transcript(session_key))


async def test_interrupts_sent_while_the_run_stops_run_in_the_order_sent(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    first = await client.send_and_start(
        session_key, "count slowly to 400", workspace=str(workspace)
    )
    assert first.run_id
    await wait_for_event(client, session_key, first.run_id, EventKind.TEXT_DELTA)
    receipts = [
        await client.send(session_key, f"say INT-{name}", mode="interrupt") for name in "ABC"
    ]
    await wait_idle(client, session_key, runs=4, timeout=60)
    replies = [
        (await client.wait_for_run(f"session:{session_key}:run:{n}")).reply for n in (2, 3, 4)
    ]
    assert replies == ["INT-A", "INT-B", "INT-C"]
    # Only the first stopped the run; the others say what they run after.
    later = [r.note for r in receipts[1:]]
    assert all("an interrupt sent before it" in note for note in later), later


async def test_prompt_dedupe_drops_an_identical_text_sent_again_on_the_same_route(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    first = await busy_run(client, session_key, workspace)
    options = QueueOptions(dedupe="prompt")
    sent = [
        await client.send(session_key, "say same", mode="followup", queue=options) for _ in range(3)
    ]
    assert [r.disposition for r in sent] == [
        SendDisposition.QUEUED,
        SendDisposition.DUPLICATE,
        SendDisposition.DUPLICATE,
    ]
    await client.wait_for_run(first)
    await wait_idle(client, session_key, runs=2)
    users = [e.text for e in client.transcript(session_key) if e.role == Role.USER]
    assert users.count("say same") == 1
