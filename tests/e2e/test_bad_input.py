"""Bad input gets a clear error and loses nothing; the session stays usable."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from temporalio.client import WorkflowUpdateFailedError

from agentlane.ids import InvalidSessionKey, session_workflow_id
from agentlane.messages import MAX_MESSAGE_CHARS
from agentlane.run import ExecutionStatus
from agentlane.transcript import Role
from clients.api import AgentlaneClient, SendRejected, UnknownMessage
from tests.e2e.support import assert_transcript_valid


async def test_validator_rejects_with_clear_messages(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    first = await client.send_and_start(session_key, "say hello", workspace=str(workspace))
    assert first.run_id
    await client.wait_for_run(first.run_id)
    cases = {
        "": "message text is empty",
        "   \n\t": "message text is empty",
        "x" * (MAX_MESSAGE_CHARS + 1): f"the limit is {MAX_MESSAGE_CHARS}",
    }
    for text, expected in cases.items():
        with pytest.raises(SendRejected, match=expected):
            await client.send_and_start(session_key, text)
    with pytest.raises(SendRejected, match="unknown queue mode 'sideways'; valid modes: steer"):
        await client.send_and_start(session_key, "hi", mode="sideways")
    # A raw update with a field the contract does not have is refused too.
    handle = client.client.get_workflow_handle(session_workflow_id(session_key))
    with pytest.raises(WorkflowUpdateFailedError) as raised:
        await handle.execute_update("send", {"text": "hi", "colour": "blue"})
    assert "Failed decoding arguments" in str(raised.value.cause)
    with pytest.raises(InvalidSessionKey):
        await client.send_and_start("../etc", "hi")
    # Two modes for one message: which is meant is not guessed.
    with pytest.raises(SendRejected, match="names two modes"):
        await client.send(session_key, "hi", mode="steer", queue="mode:followup")
    # Waiting for a message the session never gave says so in its own words.
    with pytest.raises(UnknownMessage, match="99999"):
        await client.wait_started(session_key, 99999)
    # Nothing was queued or run by the rejected messages, and the session still works.
    status = await client.status(session_key)
    assert status.runs == 1 and status.queue_length == 0
    again = await client.send_and_start(session_key, "say still fine")
    assert again.run_id
    assert (await client.wait_for_run(again.run_id)).reply == "still fine"


async def test_paths_outside_the_workspace_are_refused(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    outside = workspace.parent / f"outside-{session_key}.txt"
    outside.write_text("secret")
    (workspace / "link").symlink_to(workspace.parent)
    receipt = await client.send_and_start(
        session_key,
        f"read ../{outside.name} then read /etc/hostname then read link/{outside.name} then "
        f"write ../{outside.name} with overwritten then write link/escape.txt with x then "
        "edit ../../x replacing a with b",
        workspace=str(workspace),
    )
    assert receipt.run_id
    result = await client.wait_for_run(receipt.run_id)
    assert result.status == ExecutionStatus.SUCCESS
    entries = client.transcript(session_key)
    assert_transcript_valid(entries)
    tool_results = [e for e in entries if e.role == Role.TOOL]
    assert len(tool_results) == 6
    for entry in tool_results:
        assert entry.is_error and "outside the workspace" in entry.text, entry.text
    assert outside.read_text() == "secret"
    assert not (workspace.parent / "escape.txt").exists()


async def test_missing_workspace(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    with pytest.raises(SendRejected, match="does not exist"):
        await client.send_and_start(session_key, "say hi", workspace=str(workspace / "nope"))
    first = await client.send_and_start(session_key, "say one", workspace=str(workspace))
    assert first.run_id
    await client.wait_for_run(first.run_id)
    moved = workspace.with_name(workspace.name + "-moved")
    os.rename(workspace, moved)
    broken = await client.send_and_start(session_key, "say two")
    assert broken.run_id
    result = await client.wait_for_run(broken.run_id)
    assert result.status == ExecutionStatus.ERROR
    assert result.error is not None and result.error.kind.value == "validation_failed"
    assert "does not exist" in result.error.message
    shutil.move(str(moved), str(workspace))
    fixed = await client.send_and_start(session_key, "say three")
    assert fixed.run_id
    assert (await client.wait_for_run(fixed.run_id)).reply == "three"
