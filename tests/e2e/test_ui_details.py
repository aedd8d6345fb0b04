"""What the Temporal UI shows of a run while it runs and of what its tools did (issue 25), read
the way the UI reads it, through the Temporal client: the built-in metadata query (current
details), describe (static details, pending activities with their heartbeat details) and the
history (tool results with their previews, local activities' markers included)."""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import WorkflowHandle

from agentlane.ids import session_workflow_id
from agentlane.redaction import REDACTED
from agentlane.run import ExecutionStatus
from agentlane.tool_preview import PREVIEW_BYTES
from clients.api import AgentlaneClient
from tests.conftest import make_deployment, settings_for
from tests.e2e.support import wait_idle

# Not shaped like any provider's key: only the `*_KEY=` rule can catch it.
SECRET = "zq" + secrets.token_hex(12)
# Long enough that the session is still running it after the heartbeats were read and a
# follow-up is sent, on a loaded machine (3 s was not).
LINES = 40
COMMAND = (
    f"MY_SERVICE_KEY={SECRET} sh -c "
    f"'for i in $(seq 1 {LINES}); do echo line $i; sleep 0.4; done; echo done'"
)


async def current_details(handle: WorkflowHandle[Any, Any]) -> str:
    meta = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    return str(meta.current_details)


async def decode(client: AgentlaneClient, payloads: list[Payload]) -> list[Any]:
    return await client.client.data_converter.decode(payloads)


async def pending_heartbeats(
    client: AgentlaneClient, handle: WorkflowHandle[Any, Any], activity_type: str
) -> Any:
    """The heartbeat details of the run's pending activity of that type, once it has some."""
    desc = await handle.describe()
    for pending in desc.raw_description.pending_activities:
        if pending.activity_type.name == activity_type and pending.heartbeat_details.payloads:
            (details,) = await decode(client, list(pending.heartbeat_details.payloads))
            return details
    return None


async def outcome_previews(client: AgentlaneClient, handle: WorkflowHandle[Any, Any]) -> dict:
    """Tool name -> the outcome its history holds: a regular activity's result, or a local
    activity's marker result."""
    found: dict[str, dict[str, Any]] = {}
    scheduled: dict[int, str] = {}
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = event.activity_task_scheduled_event_attributes
            scheduled[event.event_id] = attrs.activity_type.name
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            attrs2 = event.activity_task_completed_event_attributes
            name = scheduled.get(attrs2.scheduled_event_id, "")
            if name.startswith("tool_"):
                (found[name],) = await decode(client, list(attrs2.result.payloads))
        elif event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
            marker = event.marker_recorded_event_attributes
            if marker.marker_name != "core_local_activity":
                continue
            (data,) = await decode(client, list(marker.details["data"].payloads))
            if str(data.get("activity_type", "")).startswith("tool_"):
                (found[data["activity_type"]],) = await decode(
                    client, list(marker.details["result"].payloads)
                )
    return found


async def test_a_running_exec_shows_its_command_progress_and_preview(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    receipt = await client.send_and_start(
        session_key,
        f"run `{COMMAND}` then write notes2.txt with hello there",
        workspace=str(workspace),
        sender="alice",
    )
    assert receipt.run_id
    run = client.client.get_workflow_handle(receipt.run_id)
    session = client.client.get_workflow_handle(session_workflow_id(session_key))

    # While the command runs: the run's page names the turn and the command; Pending
    # Activities shows heartbeats that grow.
    seen: list[dict[str, Any]] = []
    details = ""
    running = ""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        beat = await pending_heartbeats(client, run, "tool_exec")
        if beat is not None:
            if not seen:
                # The session's page while the exec surely runs (read at once, not after the
                # heartbeats have grown: on a loaded machine the command may be over by then).
                running = await current_details(session)
                queued = await client.send(session_key, "say next", mode="followup")
                queued_page = await current_details(session)
            seen.append(beat)
            details = await current_details(run)
            grown = seen[-1].get("output_bytes", 0) > seen[0].get("output_bytes", 0)
            if len(seen) >= 2 and grown and seen[0].get("output_bytes"):
                break
        await asyncio.sleep(0.5)
    assert len(seen) >= 2, "no heartbeat details on the running tool_exec"
    first, last = seen[0], seen[-1]
    assert last["tool"] == "exec"
    assert last["elapsed_s"] > first["elapsed_s"]
    assert last["output_bytes"] > first.get("output_bytes", 0)
    assert last["last_line"].startswith("line ")
    assert SECRET not in json.dumps(seen)
    assert "turn 1: exec `" in details, details
    assert "for i in $(seq 1" in details and " since " in details, details
    assert SECRET not in details
    assert "running run 1" in running and "queued" not in running, running
    assert queued.disposition.value == "queued", queued
    assert "running run 1" in queued_page and "; 1 message queued" in queued_page, queued_page

    result = await client.wait_for_run(receipt.run_id)
    assert result.status == ExecutionStatus.SUCCESS, result.error

    # What the tools did, in the history: bounded previews, the secret redacted.
    outcomes = await outcome_previews(client, run)
    exec_preview = outcomes["tool_exec"]["preview"]
    assert len(exec_preview.encode()) <= PREVIEW_BYTES
    assert SECRET not in exec_preview
    assert f"MY_SERVICE_KEY={REDACTED}" in exec_preview
    assert f"line {LINES}" in exec_preview and "done" in exec_preview
    # write runs as a local activity: its preview is in the marker.
    write_preview = outcomes["tool_write"]["preview"]
    assert write_preview.startswith('path=notes2.txt content="hello there"\n'), write_preview
    assert "Wrote 11 characters" in write_preview
    # The history holds the secret nowhere but in the user's own message (the run's input and
    # the model call that appends it to the transcript): not in the call's summary, its
    # activity's summary, its result.
    async for event in run.fetch_history_events():
        carries_message = event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED or (
            event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
            and "append_user" in str(event)
        )
        if not carries_message:
            assert SECRET not in str(event), event

    # Static details: the session's and the run's pages say what they are about.
    session_page = await (await session.describe()).static_details()
    assert session_page is not None
    assert str(workspace) in session_page and "offline/planner" in session_page
    assert "**agent:** main" in session_page and "**created by:**" in session_page
    run_page = await (await run.describe()).static_details()
    assert run_page is not None
    assert "**model:** offline/planner" in run_page and "**source:** chat" in run_page
    assert "**sender:** alice" in run_page
    assert "> run `MY_SERVICE_KEY=" in run_page and SECRET not in run_page
    # The summary, each row of the UI's workflow list, is redacted as the details are.
    run_summary = await (await run.describe()).static_summary()
    assert run_summary is not None and "MY_SERVICE_KEY=" in run_summary, run_summary
    assert SECRET not in run_summary

    # At the end, the run's page says how it ended; the session's that it is idle.
    assert "success (no_tool_calls)" in await current_details(run)
    await wait_idle(client, session_key, runs=2)
    assert "idle since" in await current_details(session)


async def test_a_streaming_model_call_shows_its_progress(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    receipt = await client.send_and_start(
        session_key, "count slowly to 80", workspace=str(workspace)
    )
    assert receipt.run_id
    run = client.client.get_workflow_handle(receipt.run_id)
    seen: list[dict[str, Any]] = []
    details = ""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(seen) < 3:
        beat = await pending_heartbeats(client, run, "call_model")
        if beat is not None and beat.get("deltas"):
            seen.append(beat)
            details = await current_details(run)
        await asyncio.sleep(0.4)
    assert len(seen) >= 2, "no heartbeat details on the streaming call_model"
    assert seen[-1]["model"] == "offline/planner"
    assert seen[-1]["deltas"] > seen[0]["deltas"]
    assert seen[-1]["approx_tokens"] > seen[0]["approx_tokens"]
    assert 0 <= seen[-1]["since_last_delta_s"] < 2
    assert details.startswith("turn 1: calling offline/planner"), details
    result = await client.wait_for_run(receipt.run_id)
    assert result.status == ExecutionStatus.SUCCESS


async def test_a_wait_says_until_when_and_the_end_says_why(
    server: object, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A run waiting for a person's approval says for what and until when; aborted, its page
    says so with the reason."""
    dep = make_deployment(server, tmp_path_factory.mktemp("ui-approval"))
    (dep.data_dir / "config.toml").write_text(
        '[tools.approval]\nrequire = ["exec"]\ntimeout_seconds = 600\n'
    )
    dep.start_worker()
    try:
        client = await AgentlaneClient.connect(settings_for(dep))
        ws = dep.data_dir / "ws" / "approval"
        ws.mkdir(parents=True)
        key = f"ui-{secrets.token_hex(5)}"
        receipt = await client.send_and_start(key, "run `echo hi`", workspace=str(ws))
        assert receipt.run_id
        run = client.client.get_workflow_handle(receipt.run_id)
        details = ""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and "waiting for approval" not in details:
            details = await current_details(run)
            await asyncio.sleep(0.3)
        first_line = details.partition("\n")[0]
        assert first_line.startswith("turn 1: waiting for approval **"), details
        assert " of exec: " in first_line and "(until " in first_line, details
        await client.abort(key)
        result = await client.wait_for_run(receipt.run_id)
        assert result.status == ExecutionStatus.ABORTED
        ended = await current_details(run)
        assert "aborted (abort_signal)" in ended and result.error is not None
        assert result.error.message in ended, ended
    finally:
        dep.stop_workers()
