"""A payload over the threshold crosses workflow boundaries through the SDK's ExternalStorage
(a driver over the store), not inside the history."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from agentlane.ids import session_workflow_id
from agentlane.messages import MAX_MESSAGE_CHARS
from agentlane.run import ExecutionStatus
from agentlane.transcript import Role
from clients.api import AgentlaneClient
from tests.harness import Deployment


async def test_large_message_is_offloaded(
    client: AgentlaneClient, shared: Deployment, session_key: str, workspace: Path
) -> None:
    # Two bytes per character in UTF-8: about 200 KB, over the 128 KiB offload threshold.
    text = "say " + "é" * (MAX_MESSAGE_CHARS - 4)
    receipt = await client.send_and_start(session_key, text, workspace=str(workspace))
    assert receipt.run_id
    result = await client.wait_for_run(receipt.run_id)
    assert result.status == ExecutionStatus.SUCCESS
    assert result.reply == "é" * (MAX_MESSAGE_CHARS - 4)
    users = [e for e in client.transcript(session_key) if e.role == Role.USER]
    assert users[0].text == text
    # In the deployment's embedded store (store/embedded.py).
    with sqlite3.connect(shared.data_dir / "agentlane.db") as db:
        (largest,) = db.execute("SELECT MAX(LENGTH(data)) FROM payloads").fetchone()
    assert largest is not None and largest > 150_000
    for workflow_id in (session_workflow_id(session_key), receipt.run_id):
        history = await client.client.get_workflow_handle(workflow_id).fetch_history()
        raw = history.to_json()
        assert "é" * 1000 not in raw and "\\u00e9" * 1000 not in raw
        assert len(raw) < 120_000, f"{workflow_id} history holds {len(raw)} bytes"
