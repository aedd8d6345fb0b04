"""A payload over the threshold crosses workflow boundaries through the SDK's ExternalStorage
(local files), not inside the history."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from agentlane.data_converter import LocalFileStorageDriver
from agentlane.ids import session_workflow_id
from agentlane.messages import MAX_MESSAGE_CHARS
from agentlane.payload_gc import collect
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
    stored = list((shared.data_dir / "payloads").rglob("*"))
    assert any(p.is_file() and p.stat().st_size > 150_000 for p in stored)
    for workflow_id in (session_workflow_id(session_key), receipt.run_id):
        history = await client.client.get_workflow_handle(workflow_id).fetch_history()
        raw = history.to_json()
        assert "é" * 1000 not in raw and "\\u00e9" * 1000 not in raw
        assert len(raw) < 120_000, f"{workflow_id} history holds {len(raw)} bytes"


async def test_offloaded_payloads_have_an_owner_and_go_when_it_closes(
    client: AgentlaneClient, shared: Deployment, session_key: str, workspace: Path
) -> None:
    text = "say " + "é" * (MAX_MESSAGE_CHARS - 4)
    receipt = await client.send_and_start(session_key, text, workspace=str(workspace))
    assert receipt.run_id
    result = await client.wait_for_run(receipt.run_id)
    assert result.status == ExecutionStatus.SUCCESS
    driver = LocalFileStorageDriver(shared.data_dir / "payloads")
    owners = {o.workflow_id: o for o in driver.owners()}
    # The run's input (the message) is filed under the run, a workflow that has closed now.
    run_owner = owners[receipt.run_id]
    assert any(p.stat().st_size > 150_000 for p in run_owner.folder.iterdir())
    open_ids = {session_workflow_id(session_key)} & owners.keys()
    report = await collect(client.client, driver, grace=timedelta(0), retention=timedelta(days=365))
    assert report.owners_removed >= 1 and report.files >= 1
    assert not run_owner.folder.exists()
    left = {o.workflow_id for o in driver.owners()}
    assert open_ids <= left, "a running workflow's payloads are kept"
    # Nothing the session still needs was removed: it goes on.
    again = await client.send_and_start(session_key, "say still here")
    assert again.run_id
    assert (await client.wait_for_run(again.run_id)).reply == "still here"
