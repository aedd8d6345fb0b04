"""End to end on a real dev server and a real worker process: a multi-step run with tools."""

from __future__ import annotations

from pathlib import Path

from agentlane.events import EventKind
from agentlane.messages import SendDisposition
from agentlane.run import ExecutionStatus, TerminationReason
from agentlane.session import SessionPhase
from agentlane.transcript import Role
from clients.api import AgentlaneClient
from tests.e2e.support import assert_transcript_valid, collect, lifecycle_ok, wait_idle


async def test_multi_step_run_with_tools(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    receipt = await client.send_and_start(
        session_key,
        "read notes.txt then summarize notes.txt into summary.txt then "
        "edit summary.txt replacing alpha with ALPHA then run `wc -l notes.txt` then say all done",
        workspace=str(workspace),
    )
    assert receipt.disposition == SendDisposition.STARTED
    assert receipt.run_id == f"session:{session_key}:run:1"
    got = await collect(client, session_key, receipt.run_id)
    result = await client.wait_for_run(receipt.run_id)

    assert result.status == ExecutionStatus.SUCCESS
    assert result.termination_reason == TerminationReason.NO_TOOL_CALLS
    assert result.tool_calls == 5 and result.turns == 6
    assert result.reply.startswith("all done")
    assert "- edit: ok: Edited summary.txt" in result.reply
    summary = (workspace / "summary.txt").read_text()
    assert summary.startswith("Summary of notes.txt: 3 non-empty lines, 5 words.")
    assert "First line: ALPHA line" in summary

    lifecycle_ok(got.events, receipt.run_id)
    tool_ends = [e for e in got.events if e.kind == EventKind.TOOL_EXECUTION_END]
    assert [e.tool_name for e in tool_ends] == ["read", "read", "write", "edit", "exec"]
    assert all(e.success for e in tool_ends)
    assert got.visible == result.reply  # streamed text is exactly the final reply

    entries = client.transcript(session_key)
    assert_transcript_valid(entries)
    assert entries[0].role == Role.USER and entries[0].text.startswith("read notes.txt")
    assert entries[-1].role == Role.ASSISTANT and entries[-1].text == result.reply

    status = await client.status(session_key)
    assert status.phase == SessionPhase.IDLE
    assert status.turns == 6 and status.runs == 1
    assert status.usage.output > 0


async def test_second_message_continues_the_same_session(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    first = await client.send_and_start(
        session_key, "write a.txt with one", workspace=str(workspace)
    )
    assert first.run_id
    await client.wait_for_run(first.run_id)
    second = await client.send_and_start(session_key, "read a.txt")
    # Started at once, or queued if the session had not yet seen the first run end.
    assert second.disposition in (SendDisposition.STARTED, SendDisposition.QUEUED)
    await wait_idle(client, session_key, runs=2)
    result = await client.wait_for_run(f"session:{session_key}:run:2")
    assert "read: ok: one" in result.reply
    entries = client.transcript(session_key)
    assert_transcript_valid(entries)
    assert [e.text for e in entries if e.role == Role.USER] == [
        "write a.txt with one",
        "read a.txt",
    ]


async def test_close_ends_session_and_stream_and_a_new_message_reopens(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    import asyncio

    from temporalio.client import WorkflowExecutionStatus

    first = await client.send_and_start(session_key, "say one", workspace=str(workspace))
    assert first.run_id
    first_usage = (await client.wait_for_run(first.run_id)).usage.accumulated.total
    await client.close(session_key)
    for workflow_id in (f"session:{session_key}", f"session:{session_key}:events"):
        handle = client.client.get_workflow_handle(workflow_id)
        await asyncio.wait_for(handle.result(), 20)
        assert (await handle.describe()).status == WorkflowExecutionStatus.COMPLETED
    closed_run = (
        await client.client.get_workflow_handle(f"session:{session_key}").describe()
    ).run_id
    again = await client.send_and_start(session_key, "say two", workspace=str(workspace))
    reopened = await client.client.get_workflow_handle(f"session:{session_key}").describe()
    assert reopened.run_id != closed_run  # a new session workflow
    # Run numbers go on across close and reopen: a run id is never reused.
    assert again.run_id == f"session:{session_key}:run:2"
    second = await client.wait_for_run(again.run_id)
    assert second.reply == "two"
    texts = [e.text for e in client.transcript(session_key) if e.role == Role.USER]
    assert texts == ["say one", "say two"]
    # Its totals go on from before the close, as its run numbers do.
    status = await client.status(session_key)
    assert status.turns == 2
    assert status.usage.total == first_usage + second.usage.accumulated.total
    # The old stream's events are gone with it: a watcher from offset 0 is told so first.
    from agentlane.events import EventKind

    items = [i async for i in client.watch(session_key, 0, until_run=again.run_id)]
    gap = items[0].event
    assert gap.kind == EventKind.STREAM_GAP and gap.data["requested"] == 0
    assert gap.data["first_available"] == items[1].offset > 0
    assert f"agentlane transcript {session_key}" in (gap.text or "")


async def test_a_message_sent_while_a_closed_session_drains_joins_its_queue(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    # `close` ends the session once its queue is empty: a message sent meanwhile is one more
    # for that queue (an adapter's user does not know the session is closing), not a refusal.
    import asyncio

    first = await client.send_and_start(
        session_key, "run `sleep 2` then say one", workspace=str(workspace)
    )
    assert first.run_id
    await client.send(session_key, "say two", mode="followup")
    await client.close(session_key)
    late = await client.send(session_key, "say three", mode="followup")
    assert late.disposition.value == "queued", late
    handle = client.client.get_workflow_handle(f"session:{session_key}")
    await asyncio.wait_for(handle.result(), 60)
    users = [(e.text, e.run_id) for e in client.transcript(session_key) if e.role == Role.USER]
    assert users == [
        ("run `sleep 2` then say one", f"session:{session_key}:run:1"),
        ("say two", f"session:{session_key}:run:2"),
        ("say three", f"session:{session_key}:run:3"),
    ]
    # After the end, a message opens the session anew.
    again = await client.send_and_start(session_key, "say four")
    assert again.run_id == f"session:{session_key}:run:4"
