"""What the Temporal UI reads about a run's end (issue 25), read the way the UI reads it, through
the Temporal client: describe, list with queries, the history's events, the run's current
details. A run whose model server is down (port 9 refuses) is *Failed*, its failure typed with
the error and worded as the user reads it, with no stack trace anywhere in its history, and the
session answers the next message; an aborted run is *Failed* as `aborted`, says who asked, and
counts the turn it made; `ExecutionStatus = 'Failed'` finds exactly those runs; the session's
event stream is found by its session key. A browser test opens the dev server's own UI on the
failed run and finds the status and the reason.

Its own dev server (with the UI on a free port), a real worker, a fake provider server."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio.api.enums.v1 import EventType
from temporalio.api.failure.v1 import Failure
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client, WorkflowExecutionStatus

from agentlane import search_attributes as sa
from agentlane.events import EventKind
from agentlane.ids import events_workflow_id, session_workflow_id
from agentlane.run import ExecutionResult, ExecutionStatus
from clients.api import AgentlaneClient
from tests.conftest import make_deployment, settings_for
from tests.e2e.support import wait_idle
from tests.e2e.test_web_chat import CHROMIUM_ARGS, _missing
from tests.fakes.provider_server import FakeProviderServer
from tests.fakes.scripts import Reply
from tests.harness import Deployment, devserver

DOWN = "local/down"
CONFIG = """
[[models]]
provider = "local"
id = "down"
api = "openai-compatible"
base_url = "{base_url}"
"""


@pytest.fixture(scope="module")
def ui_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A dev server of this module's own, with its web UI (the session's is headless)."""
    data = tmp_path_factory.mktemp("temporal-ui")
    srv = devserver.DevServer(
        data_dir=data, port=devserver.free_port(), ui_port=devserver.free_port()
    )
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProviderServer]:
    with FakeProviderServer(anthropic_keys=[], openai_keys=[]) as srv:
        yield srv


@pytest.fixture(scope="module")
def deployment(ui_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("outcome")
    # Port 9 (discard) has no listener: the connection is refused.
    (root / "config.toml").write_text(CONFIG.format(base_url="http://127.0.0.1:9/v1"))
    dep = make_deployment(ui_server, root)
    dep.start_worker()
    yield dep
    dep.stop_workers()


@pytest_asyncio.fixture(scope="module")
async def client(deployment: Deployment) -> AsyncIterator[AgentlaneClient]:
    # An identity of its own: the abort below must carry it into the run.
    yield await AgentlaneClient.connect(settings_for(deployment), identity="ops-console")


@pytest.fixture
def ws(deployment: Deployment) -> Path:
    path = deployment.data_dir / "ws" / uuid.uuid4().hex[:8]
    path.mkdir(parents=True)
    return path


async def closing_failure(t: Client, workflow_id: str) -> Failure:
    """The failure of the run's WorkflowExecutionFailed event (what the UI shows as its end)."""
    history = await t.get_workflow_handle(workflow_id).fetch_history()
    last = history.events[-1]
    assert last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED, last
    return last.workflow_execution_failed_event_attributes.failure


def stack_traces(failure: Failure) -> list[str]:
    found = []
    while True:
        if failure.stack_trace:
            found.append(failure.stack_trace)
        if not failure.HasField("cause"):
            return found
        failure = failure.cause


async def current_details(t: Client, workflow_id: str) -> str:
    """What the UI shows as the workflow's current details (the SDK's metadata query)."""
    metadata = await t.get_workflow_handle(workflow_id).query(
        "__temporal_workflow_metadata", result_type=WorkflowMetadata
    )
    return metadata.current_details


async def listed(t: Client, query: str, expected: set[str], timeout: float = 15) -> set[str]:
    """The ids a visibility query finds, once it finds `expected` (visibility lags a little)."""
    found: set[str] = set()
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        found = {wf.id async for wf in t.list_workflows(query)}
        if found == expected:
            return found
        await asyncio.sleep(0.3)
    return found


async def failed_run(
    client: AgentlaneClient, fake: FakeProviderServer, deployment: Deployment, ws: Path
) -> tuple[str, str, ExecutionResult]:
    key = f"down-{uuid.uuid4().hex[:8]}"
    # A refused connection is retried within the wait budget: a short one here.
    receipt = await client.send_and_start(
        key,
        "hello",
        workspace=str(ws),
        model=DOWN,
        session_overrides={"max_wait_seconds": 2},
    )
    assert receipt.run_id
    result = await asyncio.wait_for(client.wait_for_run(receipt.run_id), 60)
    return key, receipt.run_id, result


async def test_a_failed_run_fails_and_an_aborted_one_says_who(
    client: AgentlaneClient, fake: FakeProviderServer, deployment: Deployment, ws: Path
) -> None:
    t = client.client
    key, run_id, result = await failed_run(client, fake, deployment, ws)
    # The client's result is the run's, read from the failure.
    assert result.status == ExecutionStatus.ERROR and result.error is not None
    assert "Could not connect to the model provider at http://127.0.0.1:9/v1" in (
        result.error.message
    )
    described = await t.get_workflow_handle(run_id).describe()
    assert described.status == WorkflowExecutionStatus.FAILED
    failure = await closing_failure(t, run_id)
    info = failure.application_failure_info
    # Typed with what AgentLastError says, worded as the user reads it, not to be retried.
    # A refused connection, not `timeout`: nothing listens there (a slow model is another thing).
    assert info.type == "connection_refused"
    assert described.typed_search_attributes.get(sa.LAST_ERROR_KEY) == "connection_refused"
    assert failure.message == result.error.message
    assert info.non_retryable
    assert stack_traces(failure) == []
    # The model call's own failures: headline first, no Python traceback either.
    history = await t.get_workflow_handle(run_id).fetch_history()
    activity_failures = [
        e.activity_task_failed_event_attributes.failure
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED
    ]
    assert activity_failures
    for failed in activity_failures:
        # "connection_refused (ECONNREFUSED) from local/down: Could not connect ..."
        assert failed.message.startswith("connection_refused ("), failed.message
        assert f") from {DOWN}: Could not connect" in failed.message, failed.message
        assert stack_traces(failed) == []
    # Its page says how it ended and why.
    details = await current_details(t, run_id)
    assert "error (error)" in details and "Could not connect" in details, details

    # The session did not fail with it, and answers the next message once the model is back.
    session = await t.get_workflow_handle(session_workflow_id(key)).describe()
    assert session.status == WorkflowExecutionStatus.RUNNING
    await wait_idle(client, key, runs=1, timeout=30)
    session_details = await current_details(t, session_workflow_id(key))
    assert f"**{run_id}**: error (connection_refused): " in session_details, session_details
    assert "Could not connect" in session_details, session_details
    fake_model = CONFIG.format(base_url=fake.openai_base_url)
    (deployment.data_dir / "config.toml").write_text(fake_model)
    fake.script(Reply(text="back again"))
    again = await client.send_and_start(key, "hello again")
    assert again.run_id
    answered = await asyncio.wait_for(client.wait_for_run(again.run_id), 60)
    assert answered.status == ExecutionStatus.SUCCESS, answered.error
    assert answered.reply == "back again"
    assert (await t.get_workflow_handle(again.run_id).describe()).status == (
        WorkflowExecutionStatus.COMPLETED
    )

    # An aborted run (offline model, after its first model call) is told apart, says who asked.
    busy_key = f"busy-{uuid.uuid4().hex[:8]}"
    loop = " then ".join(f"write f{i}.txt with {i}" for i in range(200)) + " then say done"
    busy = await client.send_and_start(busy_key, loop, workspace=str(ws))
    assert busy.run_id
    await wait_tool_end(client, busy_key, busy.run_id)
    receipt = await client.abort(busy_key, "enough")
    assert receipt.run_id == busy.run_id
    aborted = await asyncio.wait_for(client.wait_for_run(busy.run_id), 60)
    assert aborted.status == ExecutionStatus.ABORTED and aborted.error is not None
    assert aborted.error.message == "enough"
    assert aborted.error.by == "ops-console"
    # A model call answered: the turn counts, tokens or not.
    assert aborted.turns >= 1
    abort_failure = await closing_failure(t, busy.run_id)
    assert abort_failure.application_failure_info.type == "aborted"
    assert abort_failure.message == "aborted by ops-console: enough"
    assert stack_traces(abort_failure) == []
    assert "aborted by ops-console" in await current_details(t, busy.run_id)
    signals = [
        e.workflow_execution_signaled_event_attributes
        for e in (await t.get_workflow_handle(busy.run_id).fetch_history()).events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
    ]
    abort = [s for s in signals if s.signal_name == "abort"]
    assert abort and b"ops-console" in abort[0].input.payloads[-1].data
    await wait_idle(client, busy_key, runs=1, timeout=30)

    # ExecutionStatus = 'Failed' finds exactly the failed and the aborted run of these sessions
    # (sessions and event streams never fail); the succeeded run is Completed.
    both = f"AgentSessionKey IN ('{key}', '{busy_key}')"
    failed = await listed(t, f"{both} AND ExecutionStatus = 'Failed'", {run_id, busy.run_id})
    assert failed == {run_id, busy.run_id}
    # Errors only, as the README says.
    errors = f"{both} AND ExecutionStatus = 'Failed' AND AgentLastError != 'aborted'"
    assert await listed(t, errors, {run_id}) == {run_id}
    completed = await listed(
        t,
        f"{both} AND WorkflowType = 'AgentRunWorkflow' AND ExecutionStatus = 'Completed'",
        {again.run_id},
    )
    assert completed == {again.run_id}
    # The session's event stream is found with its session.
    everything = await listed(
        t,
        f"AgentSessionKey = '{key}' AND WorkflowType != 'AgentRunWorkflow'",
        {session_workflow_id(key), events_workflow_id(key)},
    )
    assert everything == {session_workflow_id(key), events_workflow_id(key)}


async def test_a_run_cancelled_from_the_ui_is_told_apart_too(
    client: AgentlaneClient, ws: Path
) -> None:
    """The UI's "Request Cancellation" on a run: it ends as an abort does (Failed, `aborted`),
    and the session goes on."""
    t = client.client
    key = f"cancel-{uuid.uuid4().hex[:8]}"
    loop = " then ".join(f"write c{i}.txt with {i}" for i in range(200)) + " then say done"
    busy = await client.send_and_start(key, loop, workspace=str(ws))
    assert busy.run_id
    await wait_tool_end(client, key, busy.run_id)
    await t.get_workflow_handle(busy.run_id).cancel()
    result = await asyncio.wait_for(client.wait_for_run(busy.run_id), 60)
    assert result.status == ExecutionStatus.ABORTED
    assert (await t.get_workflow_handle(busy.run_id).describe()).status == (
        WorkflowExecutionStatus.FAILED
    )
    failure = await closing_failure(t, busy.run_id)
    assert failure.application_failure_info.type == "aborted"
    assert stack_traces(failure) == []
    await wait_idle(client, key, runs=1, timeout=30)
    again = await client.send_and_start(key, "say still here")
    assert again.run_id
    assert (await asyncio.wait_for(client.wait_for_run(again.run_id), 60)).reply == "still here"


async def wait_tool_end(client: AgentlaneClient, key: str, run_id: str) -> None:
    """Until the run's first tool call has ended (a model call has answered before it)."""

    async def go() -> None:
        async for item in client.watch(key, 0):
            event = item.event
            if event.run_id == run_id and event.kind == EventKind.TOOL_EXECUTION_END:
                return

    await asyncio.wait_for(go(), 60)


@pytest.mark.skipif(_missing() is not None, reason=_missing() or "")
async def test_the_ui_shows_a_failed_run_and_its_reason(
    client: AgentlaneClient,
    fake: FakeProviderServer,
    deployment: Deployment,
    ui_server: Any,
    ws: Path,
) -> None:
    (deployment.data_dir / "config.toml").write_text(
        CONFIG.format(base_url="http://127.0.0.1:9/v1")
    )
    key, run_id, result = await failed_run(client, fake, deployment, ws)
    assert result.status == ExecutionStatus.ERROR
    namespace = settings_for(deployment).namespace
    url = (
        f"http://127.0.0.1:{ui_server.ui_port}/namespaces/{namespace}/workflows/"
        f"{run_id.replace(':', '%3A')}"
    )
    await asyncio.to_thread(_look, url, deployment.data_dir / "failed-run.png")


def _look(url: str, shot: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    from tests.e2e.test_web_chat import CHROMIUM

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(url)
            body = page.locator("body")
            try:
                # The status badge (a word of its own, not part of an event's name).
                expect(page.get_by_text("Failed", exact=True).first).to_be_visible(timeout=30_000)
                expect(body).to_contain_text(
                    "Could not connect to the model provider", timeout=30_000
                )
            finally:
                page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
