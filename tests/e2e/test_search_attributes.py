"""Sessions and runs found by their search attributes (issue 12), through the Temporal client's
list query (what the UI's search box runs) and `agentlane sessions`: a finished session by each
attribute, a run waiting on a rate-limited profile, a session whose run failed with
`rate_limit`; the history events the upserts cost (not one per step); continue-as-new keeps
them; `agentlane setup-namespace` on a namespace that has none. Real dev server and worker."""

from __future__ import annotations

import asyncio
import json
import secrets
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from google.protobuf.duration_pb2 import Duration
from temporalio.api.enums.v1 import EventType, IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.api.workflowservice.v1 import RegisterNamespaceRequest
from temporalio.client import Client

from agentlane import search_attributes as sa
from agentlane.ids import events_workflow_id, run_workflow_id, session_workflow_id
from agentlane.messages import Routing
from agentlane.run import ExecutionStatus
from agentlane.session_query import SessionFilter
from clients.api import AgentlaneClient
from clients.namespace_setup import AttributeTypeConflict, register
from tests.conftest import make_deployment, settings_for
from tests.fakes.provider_server import FakeProviderServer
from tests.fakes.scripts import Fault, Reply
from tests.harness import REPO, Deployment, devserver
from tests.store_support import clear_profile_state

KEY = "sk-ant-api03-" + secrets.token_hex(24)
CLAUDE = "anthropic/fake-claude"


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProviderServer]:
    with FakeProviderServer(anthropic_keys=[KEY], openai_keys=[]) as srv:
        yield srv


@pytest.fixture(scope="module")
def deployment(
    server: object, fake: FakeProviderServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("attrs")
    (root / "config.toml").write_text(
        f"""
[[models]]
provider = "anthropic"
id = "fake-claude"
api = "anthropic"
base_url = "{fake.anthropic_base_url}"
prices = {{ input = 3, output = 15 }}
"""
    )
    dep = make_deployment(server, root, ANTHROPIC_API_KEY=KEY)
    dep.start_worker()
    yield dep
    dep.stop_workers()


@pytest.fixture(autouse=True)
def _healthy(deployment: Deployment, fake: FakeProviderServer) -> None:
    clear_profile_state(deployment.data_dir)
    fake.reset()


@pytest.fixture
def ws(deployment: Deployment) -> Path:
    path = deployment.data_dir / "ws" / uuid.uuid4().hex[:8]
    path.mkdir(parents=True)
    (path / "notes.txt").write_text("alpha line\nbeta line\n")
    return path


async def connect(deployment: Deployment) -> AgentlaneClient:
    return await AgentlaneClient.connect(settings_for(deployment))


async def ids(client: Client, query: str) -> list[str]:
    return [wf.id async for wf in client.list_workflows(query)]


async def found(client: Client, query: str, expect: str, timeout: float = 20) -> None:
    """Visibility is eventually consistent: ask until the workflow is listed."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        got = await ids(client, query)
        if expect in got:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{expect} not found by {query!r}: {got}")
        await asyncio.sleep(0.2)


def cli(dep: Deployment, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "clients.cli", *args],
        cwd=REPO,
        env=dep.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


async def cli_until(dep: Deployment, expect: str, *args: str) -> str:
    for _ in range(50):
        proc = await asyncio.to_thread(cli, dep, *args)
        assert proc.returncode == 0, proc.stderr
        if expect in proc.stdout:
            return proc.stdout
        await asyncio.sleep(0.3)
    raise AssertionError(f"{expect} not listed by sessions {args}: {proc.stdout}")


async def upserts(client: Client, workflow_id: str) -> list[list[str]]:
    """The attributes each upsert event of the workflow's history set."""
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    kind = EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES
    return [
        sorted(
            e.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
        )
        for e in history.events
        if e.event_type == kind
    ]


async def test_a_session_and_its_run_are_found_by_each_attribute(
    deployment: Deployment, ws: Path
) -> None:
    client = await connect(deployment)
    key = f"sa-{uuid.uuid4().hex[:8]}"
    receipt = await client.send_and_start(
        key, "read notes.txt then say done", workspace=str(ws), routing=Routing(channel="tg")
    )
    assert receipt.run_id
    result = await client.wait_for_run(receipt.run_id)
    assert result.status == ExecutionStatus.SUCCESS, result.error
    model = (await client.status(key)).model
    t = client.client
    wid = session_workflow_id(key)
    mine = f"AgentSessionKey = '{key}'"
    session = f"WorkflowType = 'SessionWorkflow' AND {mine}"
    await found(t, f"{session} AND AgentPhase = 'idle'", wid)
    for term in (
        "AgentId = 'main'",
        f"AgentModel = '{model}'",
        "AgentChannel = 'tg'",
        f"AgentTurns = {result.turns}",
        "AgentTokens > 0",
        "AgentLastError IS NULL",
    ):
        assert await ids(t, f"{session} AND {term}") == [wid], term
    # The offline model has no prices: the cost is left unset, never 0.
    desc = await t.get_workflow_handle(wid).describe()
    assert desc.typed_search_attributes.get(sa.COST_KEY) is None
    run = f"WorkflowType = 'AgentRunWorkflow' AND {mine}"
    for term in (
        "AgentPhase = 'ended'",
        "AgentSource = 'chat'",
        f"AgentModel = '{model}'",
        "AgentChannel = 'tg'",
        f"AgentTurns = {result.turns}",
    ):
        assert await ids(t, f"{run} AND {term}") == [receipt.run_id], term
    # The CLI's filters, and the query it ran (what to paste into the UI).
    out = await cli_until(
        deployment, key, "sessions", "--phase", "idle", "--channel", "tg", "--query"
    )
    assert "# WorkflowType = 'SessionWorkflow'" in out and "AgentChannel = 'tg'" in out
    line = next(ln for ln in out.splitlines() if ln.startswith(key))
    assert line.split("\t")[2:5] == ["idle", model, str(result.turns)]
    assert "unpriced" in line
    # A value is data, never more query.
    assert await ids(t, f"{session} AND AgentModel = 'it\\'s'") == []


async def test_a_waiting_run_and_a_rate_limited_session_are_found(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    client = await connect(deployment)
    t = client.client
    # The only profile answers 429: every profile cools down, and the run waits.
    fake.script(Reply.error(Fault.http(429)))
    key = f"sw-{uuid.uuid4().hex[:8]}"
    receipt = await client.send_and_start(key, "hello", workspace=str(ws), model=CLAUDE)
    assert receipt.run_id
    waiting = f"AgentSessionKey = '{key}' AND AgentPhase = 'waiting'"
    await found(t, f"WorkflowType = 'AgentRunWorkflow' AND {waiting}", receipt.run_id)
    run = f"WorkflowType = 'AgentRunWorkflow' AND AgentSessionKey = '{key}'"
    for term in ("AgentLastError = 'rate_limit'", "AgentAuthProfile = 'anthropic:env'"):
        assert await ids(t, f"{run} AND {term}") == [receipt.run_id], term
    out = await cli_until(deployment, key, "sessions", "--phase", "waiting", "--query")
    assert "# WorkflowType = 'AgentRunWorkflow' AND ExecutionStatus = 'Running' AND " in out
    assert "AgentPhase = 'waiting'" in out
    await client.abort(key, "not now")
    assert (await client.wait_for_run(receipt.run_id)).status == ExecutionStatus.ABORTED
    session = f"WorkflowType = 'SessionWorkflow' AND AgentSessionKey = '{key}'"
    await found(t, f"{session} AND AgentLastError = 'aborted'", session_workflow_id(key))

    # A run not allowed to wait ends with the provider's reason, which the session keeps.
    clear_profile_state(deployment.data_dir)
    fake.reset()
    fake.script(Reply.error(Fault.http(429)))
    failed = f"sf-{uuid.uuid4().hex[:8]}"
    receipt = await client.send_and_start(
        failed,
        "hello",
        workspace=str(ws),
        model=CLAUDE,
        session_overrides={"max_wait_seconds": 0},
    )
    assert receipt.run_id
    assert (await client.wait_for_run(receipt.run_id)).status == ExecutionStatus.ERROR
    limited = f"WorkflowType = 'SessionWorkflow' AND AgentSessionKey = '{failed}'"
    await found(t, f"{limited} AND AgentLastError = 'rate_limit'", session_workflow_id(failed))
    await cli_until(deployment, failed, "sessions", "--error", "rate_limit", "--model", CLAUDE)
    rows = await client.list_sessions(SessionFilter(error="rate_limit", model=CLAUDE))
    listed = [row["key"] for row in rows]
    assert failed in listed and key not in listed


async def test_a_compacting_run_is_found_while_it_compacts(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    client = await connect(deployment)
    t = client.client
    key = f"sk-{uuid.uuid4().hex[:8]}"
    filler = " ".join(f"word{i}" for i in range(250))
    for n in range(10):
        receipt = await client.send_and_start(
            key, f"message {n}: {filler}", workspace=str(ws), model=CLAUDE
        )
        assert receipt.run_id
        await client.wait_for_run(receipt.run_id)
    fake.reset()
    summary = "## Decisions\n- numbers were remembered\n## Open TODOs\nNone."
    fake.script(
        Reply.error(Fault.named("context_overflow")),
        # The summariser takes its time: long enough to be seen compacting.
        Reply(text=summary, purpose="summary", fault=Fault.stall(4, after_deltas=0)),
        Reply(text="Fits now."),
    )
    receipt = await client.send_and_start(key, "and now?")
    assert receipt.run_id
    await found(
        t,
        f"WorkflowType = 'AgentRunWorkflow' AND AgentSessionKey = '{key}' "
        "AND AgentPhase = 'compacting'",
        receipt.run_id,
    )
    out = await cli_until(deployment, key, "sessions", "--phase", "compacting")
    assert key in out
    result = await client.wait_for_run(receipt.run_id)
    assert result.status == ExecutionStatus.SUCCESS, result.error
    # A priced model: the session's dollars so far, as the session's status sums them.
    usd = (await client.status(key)).usage.cost.known
    assert usd is not None and usd > 0
    session = f"WorkflowType = 'SessionWorkflow' AND AgentSessionKey = '{key}'"
    await found(t, f"{session} AND AgentCostUsd > 0", session_workflow_id(key))
    desc = await t.get_workflow_handle(session_workflow_id(key)).describe()
    assert desc.typed_search_attributes.get(sa.COST_KEY) == round(usd, 6)
    phases = [
        keys for keys in await upserts(t, receipt.run_id) if keys and keys[0].startswith("Agent")
    ]
    # Compacting (with the overflow, the error met), back to running, ended (the error cleared,
    # the counters and the cost).
    assert phases == [
        ["AgentLastError", "AgentPhase"],
        ["AgentPhase"],
        ["AgentCostUsd", "AgentLastError", "AgentPhase", "AgentTokens", "AgentTurns"],
    ], phases


async def test_upserts_cost_the_same_events_whatever_the_number_of_steps(
    deployment: Deployment, ws: Path
) -> None:
    """A run of 2 steps and one of 7: one upsert at the run's end in the run workflow, two in
    the session (run start, run end); not one per step."""
    client = await connect(deployment)
    t = client.client
    counts: list[tuple[int, list[list[str]], list[list[str]]]] = []
    for reads in (1, 6):
        key = f"sc-{uuid.uuid4().hex[:8]}"
        text = " then ".join(["read notes.txt"] * reads) + " then say done"
        receipt = await client.send_and_start(key, text, workspace=str(ws))
        assert receipt.run_id
        result = await client.wait_for_run(receipt.run_id)
        assert result.status == ExecutionStatus.SUCCESS and result.turns == reads + 1
        await found(
            t,
            f"AgentSessionKey = '{key}' AND WorkflowType = 'SessionWorkflow' "
            "AND AgentPhase = 'idle'",
            session_workflow_id(key),
        )
        counts.append(
            (
                result.turns,
                await upserts(t, receipt.run_id),
                await upserts(t, session_workflow_id(key)),
            )
        )
    (_, run_few, session_few), (_, run_many, session_many) = counts
    # Not one more event for five more steps.
    assert (run_few, session_few) == (run_many, session_many), counts
    # Ours: the run's end in the run; its start and end in the session. A patch marker also
    # upserts TemporalChangeVersion (the SDK's): only the session writes one (a client started
    # it); its run and its event stream take their code level from their input.
    assert sum(_ours(keys) for keys in run_few) == 1, run_few
    assert sum(_ours(keys) for keys in session_few) == 2, session_few
    assert ["TemporalChangeVersion"] not in run_few, run_few
    assert session_few.count(["TemporalChangeVersion"]) == 1, session_few
    key = f"sc-{uuid.uuid4().hex[:8]}"
    await client.wait_for_run(
        (await client.send_and_start(key, "say done", workspace=str(ws))).run_id or ""
    )
    for workflow_id, markers in (
        (session_workflow_id(key), 1),
        (events_workflow_id(key), 0),
        (run_workflow_id(key, 1), 0),
    ):
        history = await t.get_workflow_handle(workflow_id).fetch_history()
        found_markers = [
            e
            for e in history.events
            if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
            and e.marker_recorded_event_attributes.marker_name == "core_patch"
        ]
        assert len(found_markers) == markers, (workflow_id, found_markers)


def _ours(keys: list[str]) -> bool:
    return any(k.startswith("Agent") for k in keys)


async def test_counters_are_upserted_at_most_once_per_interval_while_a_run_works(
    deployment: Deployment, ws: Path
) -> None:
    """Three model calls: at 0 s, after a 6 s tool call (counters due: one upsert, visible while
    the run works), and 3 s later (not due). The session's test hook shortens the minute to 5 s
    (the same rule; the minute itself is the policy's unit tests')."""
    client = await connect(deployment)
    t = client.client
    key = f"sm-{uuid.uuid4().hex[:8]}"
    receipt = await client.send_and_start(
        key,
        "run `sleep 6` then run `sleep 3` then say done",
        workspace=str(ws),
        session_overrides={"counters_upsert_seconds": 5},
    )
    assert receipt.run_id
    run = f"WorkflowType = 'AgentRunWorkflow' AND AgentSessionKey = '{key}'"
    await found(t, f"{run} AND AgentPhase = 'running' AND AgentTurns = 1", receipt.run_id, 90)
    result = await client.wait_for_run(receipt.run_id)
    assert result.status == ExecutionStatus.SUCCESS and result.turns == 3, result.error
    ours = [keys for keys in await upserts(t, receipt.run_id) if _ours(keys)]
    assert ours == [["AgentTokens", "AgentTurns"], ["AgentPhase", "AgentTokens", "AgentTurns"]]


async def test_continue_as_new_keeps_the_attributes(deployment: Deployment, ws: Path) -> None:
    client = await connect(deployment)
    t = client.client
    key = f"sn-{uuid.uuid4().hex[:8]}"
    overrides = {"continue_as_new_after_events": 20}
    first = await client.send_and_start(
        key, "say one", workspace=str(ws), session_overrides=overrides
    )
    assert first.run_id
    await client.wait_for_run(first.run_id)
    second = await client.send_and_start(key, "say two")
    assert second.run_id == run_workflow_id(key, 2)
    await client.wait_for_run(second.run_id)
    wid = session_workflow_id(key)
    await found(t, f"WorkflowId = '{wid}' AND ExecutionStatus = 'ContinuedAsNew'", wid)
    attrs = (await t.get_workflow_handle(wid).describe()).typed_search_attributes
    assert attrs.get(sa.SESSION_KEY_KEY) == key
    assert attrs.get(sa.TURNS_KEY) == 2
    await found(
        t,
        f"WorkflowType = 'SessionWorkflow' AND ExecutionStatus = 'Running' "
        f"AND AgentSessionKey = '{key}' AND AgentTurns = 2",
        wid,
    )


async def test_setup_namespace_registers_what_a_cluster_lacks(deployment: Deployment) -> None:
    client = await connect(deployment)
    t = client.client
    namespace = f"sa-{uuid.uuid4().hex[:8]}"
    await t.workflow_service.register_namespace(
        RegisterNamespaceRequest(
            namespace=namespace, workflow_execution_retention_period=Duration(seconds=86400)
        )
    )
    # The namespace cache takes a moment to know a new namespace.
    for _ in range(100):
        try:
            first = await register(t, namespace)
            break
        except Exception:
            await asyncio.sleep(0.2)
    else:
        raise AssertionError("namespace never usable")
    assert sorted(first.added) == sorted(a.name for a in sa.ALL) and first.present == []
    again = await register(t, namespace)
    assert again.added == [] and sorted(again.present) == sorted(a.name for a in sa.ALL)
    # Through the command, which says what it did and the equivalent temporal commands.
    proc = await asyncio.to_thread(
        cli,
        deployment,
        "setup-namespace",
        "--namespace",
        namespace,
        "--address",
        deployment.address,
    )
    assert proc.returncode == 0, proc.stderr
    assert "added none" in proc.stdout
    assert "temporal operator search-attribute create" in proc.stdout

    # One of ours registered with another type: a clear error, nothing added.
    other = f"sb-{uuid.uuid4().hex[:8]}"
    await t.workflow_service.register_namespace(
        RegisterNamespaceRequest(
            namespace=other, workflow_execution_retention_period=Duration(seconds=86400)
        )
    )
    for _ in range(100):
        try:
            await t.operator_service.add_search_attributes(
                AddSearchAttributesRequest(
                    namespace=other,
                    search_attributes={"AgentTurns": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD},
                )
            )
            break
        except Exception:
            await asyncio.sleep(0.2)
    with pytest.raises(AttributeTypeConflict, match="AgentTurns is registered as Keyword"):
        await register(t, other)


def test_a_dev_server_database_from_an_older_version_gets_the_attributes(tmp_path: Path) -> None:
    """`temporal server start-dev --search-attribute` registers only into a new database; the
    dev server script adds what an older database lacks, so upgraded sessions do not fail."""
    port = devserver.free_port()
    old = subprocess.Popen(
        [devserver.temporal_binary(), "server", "start-dev", "--headless", "--ip", "127.0.0.1"]
        + ["--port", str(port), "--db-filename", str(tmp_path / "temporal.db")]
        + ["--log-level", "error", "--search-attribute", "AgentSessionKey=Keyword"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    srv = devserver.DevServer(data_dir=tmp_path, port=port, ui_port=None)

    def listed() -> dict[str, str]:
        out = subprocess.run(
            [devserver.temporal_binary(), "operator", "search-attribute", "list", "-o", "json"]
            + ["--address", srv.address],
            capture_output=True,
            text=True,
            timeout=20,
        )
        return dict(json.loads(out.stdout)["customAttributes"]) if out.returncode == 0 else {}

    try:
        for _ in range(100):
            if "AgentSessionKey" in listed():
                break
            time.sleep(0.2)
        assert [k for k in listed() if k.startswith("Agent")] == ["AgentSessionKey"]
    finally:
        old.terminate()
        old.wait(timeout=20)
    srv.start()
    (tmp_path / "agentlane").mkdir()
    dep = make_deployment(srv, tmp_path / "agentlane")
    try:
        have = listed()
        for attr in sa.ALL:
            assert attr.name in have, attr.name
        # The server caches its attributes: the ones just added work at once, not after the
        # cache's refresh (a workflow setting one it does not know fails its task).
        dep.start_worker()
        asyncio.run(_a_session_sets_every_attribute_without_a_failed_task(dep))
    finally:
        dep.stop_workers()
        srv.stop()


async def _a_session_sets_every_attribute_without_a_failed_task(dep: Deployment) -> None:
    client = await AgentlaneClient.connect(settings_for(dep))
    receipt = await client.send_and_start("upgraded", "say hi")
    assert receipt.run_id
    result = await asyncio.wait_for(client.wait_for_run(receipt.run_id), 30)
    assert result.status == ExecutionStatus.SUCCESS, result.error
    for wid in (session_workflow_id("upgraded"), run_workflow_id("upgraded", 1)):
        history = await client.client.get_workflow_handle(wid).fetch_history()
        failed = [
            e for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
        ]
        assert not failed, (wid, failed)
    found = await client.client.count_workflows("AgentSessionKey = 'upgraded'")
    assert found.count >= 2
