"""A payload over the threshold crosses workflow boundaries through the SDK's ExternalStorage
into the store (not the history), owned by its workflow and collected once that has closed: on
the embedded store and on PostgreSQL."""

from __future__ import annotations

import asyncio
import hashlib
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import pytest_asyncio

from agentlane.data_converter import LocalFileStorageDriver
from agentlane.ids import session_workflow_id
from agentlane.messages import MAX_MESSAGE_CHARS
from agentlane.payload_gc import collect
from agentlane.run import ExecutionStatus
from agentlane.transcript import Role
from clients.api import AgentlaneClient
from store.interface import Store
from store.models import PayloadOwnerRef
from store.open import open_store
from tests.conftest import make_deployment, settings_for
from tests.harness import REPO, Deployment
from tests.postgres_cluster import shared_cluster, unavailable_reason

pytestmark = pytest.mark.e2e

BIG = "say " + "é" * (MAX_MESSAGE_CHARS - 4)  # about 200 KB in UTF-8, over the 128 KiB threshold


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def deployment(
    request: pytest.FixtureRequest, server: object, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    env = {}
    if request.param == "postgresql":
        reason = unavailable_reason()
        if reason:
            pytest.skip(reason)
        env["AGENTLANE_DATABASE_URL"] = shared_cluster().create_database(
            f"offload_{uuid.uuid4().hex[:8]}"
        )
    yield from started(
        make_deployment(server, tmp_path_factory.mktemp(f"offload-{request.param}"), **env)
    )


def started(dep: Deployment) -> Iterator[Deployment]:
    dep.start_worker()
    yield dep
    dep.stop_workers()


@pytest_asyncio.fixture
async def client(deployment: Deployment) -> AsyncIterator[AgentlaneClient]:
    yield await AgentlaneClient.connect(settings_for(deployment))


@pytest_asyncio.fixture
async def store(deployment: Deployment) -> AsyncIterator[Store]:
    opened = await open_store(settings_for(deployment))
    yield opened
    await opened.close()


@pytest.fixture
def ws(deployment: Deployment) -> Path:
    path = deployment.data_dir / "ws" / uuid.uuid4().hex[:8]
    path.mkdir(parents=True)
    return path


def key() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


async def owners_of(store: Store) -> dict[str, PayloadOwnerRef]:
    return {o.workflow_id: o for o in await store.payload_owners()}


async def test_large_message_is_offloaded_to_the_store(
    client: AgentlaneClient, deployment: Deployment, store: Store, ws: Path
) -> None:
    session_key = key()
    receipt = await client.send_and_start(session_key, BIG, workspace=str(ws))
    assert receipt.run_id
    result = await client.wait_for_run(receipt.run_id)
    assert result.status == ExecutionStatus.SUCCESS
    assert result.reply == "é" * (MAX_MESSAGE_CHARS - 4)
    users = [e for e in client.transcript(session_key) if e.role == Role.USER]
    assert users[0].text == BIG
    # In the store, owned by the run it is the input of; no payload files any more.
    run_owner = (await owners_of(store))[receipt.run_id]
    assert run_owner.run_id
    assert not list((deployment.data_dir / "payloads").rglob("*"))
    for workflow_id in (session_workflow_id(session_key), receipt.run_id):
        history = await client.client.get_workflow_handle(workflow_id).fetch_history()
        raw = history.to_json()
        assert "é" * 1000 not in raw and "\\u00e9" * 1000 not in raw
        assert len(raw) < 120_000, f"{workflow_id} history holds {len(raw)} bytes"


async def test_offloaded_payloads_go_when_their_owner_closes(
    client: AgentlaneClient, deployment: Deployment, store: Store, ws: Path
) -> None:
    session_key = key()
    receipt = await client.send_and_start(session_key, BIG, workspace=str(ws))
    assert receipt.run_id
    assert (await client.wait_for_run(receipt.run_id)).status == ExecutionStatus.SUCCESS
    owners = await owners_of(store)
    run_owner = owners[receipt.run_id]
    open_ids = {session_workflow_id(session_key)} & owners.keys()
    before = (await store.status()).counts["payloads"]
    # An old payload file of the earlier layout, owned by the same closed run: it goes too.
    files = LocalFileStorageDriver(deployment.data_dir / "payloads")
    folder = deployment.data_dir / "payloads" / "wf" / receipt.run_id / run_owner.run_id
    folder.mkdir(parents=True)
    (folder / ".owner").write_text(
        f'{{"workflow_id": "{receipt.run_id}", "run_id": "{run_owner.run_id}"}}'
    )
    (folder / hashlib.sha256(b"old").hexdigest()).write_bytes(b"old")

    report = await collect(
        client.client, store, files, grace=timedelta(0), retention=timedelta(days=365)
    )
    assert report.owners_removed >= 1 and report.payloads >= 1 and report.files == 1
    assert report.bytes > 150_000
    left = await owners_of(store)
    assert receipt.run_id not in left
    assert open_ids <= left.keys(), "a running workflow's payloads are kept"
    assert (await store.status()).counts["payloads"] < before
    assert not folder.exists()
    # Nothing the session still needs was removed: it goes on.
    again = await client.send_and_start(session_key, "say still here")
    assert again.run_id
    assert (await client.wait_for_run(again.run_id)).reply == "still here"


async def test_agentlane_gc_counts_then_removes(
    client: AgentlaneClient, deployment: Deployment, store: Store, ws: Path
) -> None:
    receipt = await client.send_and_start(key(), BIG, workspace=str(ws))
    assert receipt.run_id
    assert (await client.wait_for_run(receipt.run_id)).status == ExecutionStatus.SUCCESS
    assert receipt.run_id in await owners_of(store)
    env = {**deployment.env(), "AGENTLANE_PAYLOAD_GRACE_S": "0"}

    def gc(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "clients.cli", "gc", *args],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert gc("--dry-run").startswith("would have removed")
    assert receipt.run_id in await owners_of(store), "a dry run removes nothing"
    out = gc()
    assert out.startswith("removed ") and " 0 payloads " not in out, out
    assert receipt.run_id not in await owners_of(store)


async def session_runs(client: AgentlaneClient, workflow_id: str, at_least: int) -> list[str]:
    """The run ids of a workflow id, oldest first, up to its latest run (visibility lags: wait
    for `at_least` and for the run the server describes as the latest)."""
    latest = (await client.client.get_workflow_handle(workflow_id).describe()).run_id
    for _ in range(100):
        found = [
            (w.start_time, w.run_id)
            async for w in client.client.list_workflows(f"WorkflowId = '{workflow_id}'")
        ]
        runs = [run for _, run in sorted(found)]
        if len(runs) >= at_least and runs[-1] == latest:
            return runs
        await asyncio.sleep(0.2)
    raise AssertionError(f"{workflow_id}: fewer than {at_least} runs listed, or not {latest}")


async def owned_runs(store: Store, workflow_id: str) -> set[str | None]:
    return {o.run_id for o in await store.payload_owners() if o.workflow_id == workflow_id}


async def goes_on_after_a_replay(
    dep: Deployment, client: AgentlaneClient, session_key: str
) -> None:
    """A new worker (no cache: it replays the running session from its history, reading every
    payload it references) takes the session's next message."""
    dep.stop_workers()
    dep.start_worker()
    again = await client.send_and_start(session_key, "say still here")
    done = await asyncio.wait_for(client.wait_for_run(again.run_id or ""), 90)
    assert done.reply == "still here"


class TestEveryPayloadOffloaded:
    """A deployment that offloads every payload over 512 bytes: a session's continue-as-new
    input is offloaded too, owned by the run that hands it on (the embedded store)."""

    @pytest.fixture(scope="class")
    @classmethod
    def deployment(
        cls, server: object, tmp_path_factory: pytest.TempPathFactory
    ) -> Iterator[Deployment]:
        root = tmp_path_factory.mktemp("offload-small")
        yield from started(make_deployment(server, root, AGENTLANE_PAYLOAD_OFFLOAD_BYTES="512"))

    async def test_a_session_releases_what_each_run_handed_on_once_the_next_closed(
        self, deployment: Deployment, client: AgentlaneClient, store: Store
    ) -> None:
        session_key = key()
        wid = session_workflow_id(session_key)
        overrides: dict[str, object] = {"continue_as_new_after_events": 20}
        for n in range(6):
            receipt = await client.send_and_start(
                session_key, f"say hello {n}", session_overrides=overrides if n == 0 else None
            )
            assert (await client.wait_for_run(receipt.run_id or "")).reply == f"hello {n}"
        runs = await session_runs(client, wid, 3)
        assert runs[0] in await owned_runs(store, wid), "the first run handed its state on"

        report = await collect(
            client.client, store, grace=timedelta(0), retention=timedelta(days=365)
        )
        assert report.payloads >= 1
        left = await owned_runs(store, wid)
        # What a run handed on goes once the run after it closed (it continued as new too); the
        # running run's input, owned by the run before it, stays.
        assert runs[0] not in left
        assert runs[-2] in left
        await goes_on_after_a_replay(deployment, client, session_key)

    async def test_a_result_a_continued_run_owns_stays_while_its_parent_reads_it(
        self, deployment: Deployment, client: AgentlaneClient, store: Store, tmp_path: Path
    ) -> None:
        session_key = key()
        steps = " then ".join(f"write f{i}.txt with {i}" for i in range(8))
        long_reply = "word " * 200  # its result is over the 512-byte threshold
        receipt = await client.send_and_start(
            session_key,
            f"{steps} then say {long_reply}",
            workspace=str(tmp_path),
            session_overrides={"run_continue_as_new_after_events": 25},
        )
        assert receipt.run_id
        result = await client.wait_for_run(receipt.run_id)
        assert result.status == ExecutionStatus.SUCCESS and result.tool_calls == 8
        runs = await session_runs(client, receipt.run_id, 2)
        assert runs[-1] in await owned_runs(store, receipt.run_id), "it owns its result"

        await collect(client.client, store, grace=timedelta(0), retention=timedelta(days=365))
        assert runs[-1] in await owned_runs(store, receipt.run_id), (
            "kept while the session's run that awaited it is open"
        )
        await goes_on_after_a_replay(deployment, client, session_key)

    async def test_a_session_lets_go_of_messages_its_closed_runs_read(
        self, deployment: Deployment, client: AgentlaneClient, store: Store
    ) -> None:
        session_key = key()
        wid = session_workflow_id(session_key)
        overrides: dict[str, object] = {"continue_as_new_after_events": 20}
        long_text = "say " + "word " * 150  # over the 512-byte threshold: offloaded
        for n in range(6):
            receipt = await client.send_and_start(
                session_key,
                long_text if n == 0 else f"say hello {n}",
                session_overrides=overrides if n == 0 else None,
            )
            assert (await client.wait_for_run(receipt.run_id or "")).status == (
                ExecutionStatus.SUCCESS
            )
        await session_runs(client, wid, 3)
        # A client's message names the session, not one of its runs.
        (before,) = [
            o for o in await store.payload_owners() if o.workflow_id == wid and not o.run_id
        ]

        await collect(client.client, store, grace=timedelta(0), retention=timedelta(days=365))
        after = [o for o in await store.payload_owners() if o.workflow_id == wid and not o.run_id]
        # The first message went with the run that read it; the newest stay.
        assert not after or after[0].oldest > before.oldest
        await goes_on_after_a_replay(deployment, client, session_key)
