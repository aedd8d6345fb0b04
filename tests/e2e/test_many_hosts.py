"""Three hosts, one deployment: one dev server, one PostgreSQL, three worker processes with
separate data dirs and host ids on one task queue, the state outside Temporal in PostgreSQL
(`AGENTLANE_DATABASE_URL`), workspaces on a folder every host sees (`AGENTLANE_WORKSPACES=shared`).

Workers are killed with SIGKILL and started again while runs are under way, and the database
server is restarted under them: every run ends well, every transcript is whole and the same
read from every host, every tool call has exactly one result."""

from __future__ import annotations

import asyncio
import json
import secrets
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from activities.auth_store import AuthStore
from agentlane.events import EventKind
from agentlane.ids import session_workflow_id
from agentlane.messages import Routing
from agentlane.run import ExecutionStatus
from agentlane.transcript import Role
from agentlane.webhooks import DELIVER_WEBHOOKS, HEADER_ID
from clients.api import AgentlaneClient
from clients.gateway.auth import TokenStore
from store import migrations
from store.open import open_store
from tests.conftest import settings_for
from tests.e2e.gateway_support import GatewayServer
from tests.e2e.support import assert_transcript_valid, terminate_in_temporal
from tests.fakes.provider_server import FakeProviderServer, RecordedRequest
from tests.fakes.scripts import Fault, Reply
from tests.harness import REPO, Deployment
from tests.postgres_cluster import PostgresCluster
from tests.process_groups import running_commands

pytestmark = pytest.mark.e2e

SESSIONS = 30
MESSAGES = 3
HOSTS = ("a", "b", "c")


@pytest.fixture(scope="module")
def hosts(
    server: object, postgres: PostgresCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[Deployment]]:
    url = postgres.create_database(f"hosts_{uuid.uuid4().hex[:8]}")
    root = tmp_path_factory.mktemp("many-hosts")
    queue = f"tq-{uuid.uuid4().hex[:8]}"
    deployments = []
    for host in HOSTS:
        data = root / f"host-{host}"
        data.mkdir()
        # Webhooks to the test's loopback receiver.
        (data / "config.toml").write_text("[webhooks]\nallow_private = true\n")
        deployments.append(
            Deployment(
                data_dir=data,
                server=server,
                task_queue=queue,
                extra_env={
                    "AGENTLANE_DATABASE_URL": url,
                    "AGENTLANE_HOST_ID": host,
                    "AGENTLANE_WORKSPACES": "shared",
                },
            )
        )
    # The schema, by the command an operator runs before starting hosts.
    done = cli(deployments[0], "db", "migrate")
    assert done.returncode == 0, done.stderr
    try:
        # All three at once, as hosts of a deployment start.
        with ThreadPoolExecutor(len(deployments)) as pool:
            list(pool.map(lambda dep: dep.start_worker(60), deployments))
        yield deployments
    finally:
        for dep in deployments:
            dep.stop_workers()


def cli(dep: Deployment, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "clients.cli", *args],
        cwd=REPO,
        env=dep.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def restart_one(dep: Deployment) -> None:
    """kill -9 the host's worker and start a new one (as a supervisor would)."""
    for worker in dep.workers:
        if worker.proc.poll() is None:
            worker.kill9()
    dep.start_worker()


async def test_thirty_sessions_on_three_hosts_survive_kills_and_a_database_restart(
    hosts: list[Deployment], postgres: PostgresCluster
) -> None:
    clients = [await AgentlaneClient.connect(settings_for(dep)) for dep in hosts]
    shared = hosts[0].data_dir.parent / "workspaces"
    tag = uuid.uuid4().hex[:6]
    keys = [f"mh-{tag}-{n}" for n in range(SESSIONS)]
    workspaces = {}
    for key in keys:
        ws = shared / key
        ws.mkdir(parents=True)
        (ws / "notes.txt").write_text(f"notes of {key}\n")
        workspaces[key] = ws

    started = time.monotonic()
    for round_no in range(MESSAGES):
        text = (
            f"read notes.txt then write r{round_no}.txt with round {round_no} "
            f"then run `cat r{round_no}.txt notes.txt`"
        )
        # Every front door works from any host: each session's message goes in through one.
        receipts = await asyncio.gather(
            *(
                clients[(n + round_no) % len(clients)].send_and_start(
                    key, text, **({"workspace": str(workspaces[key])} if round_no == 0 else {})
                )
                for n, key in enumerate(keys)
            )
        )
        run_ids = [r.run_id for r in receipts]
        assert all(run_ids), receipts
        await asyncio.sleep(1.0)
        # Mid-round: one host's worker dies and comes back; in the middle round the database
        # server restarts too.
        await asyncio.to_thread(restart_one, hosts[round_no % len(hosts)])
        if round_no == 1:
            await asyncio.to_thread(postgres.restart, 1.0)
        results = await asyncio.wait_for(
            asyncio.gather(
                *(clients[n % len(clients)].wait_for_run(r) for n, r in enumerate(run_ids) if r)
            ),
            240,
        )
        failed = [(r.session_key, r.status, r.error) for r in results]
        assert all(r.status == ExecutionStatus.SUCCESS for r in results), failed
    elapsed = time.monotonic() - started
    print(f"\n{SESSIONS}x{MESSAGES} runs on {len(hosts)} hosts in {elapsed:.1f}s")

    for key in keys:
        # The same transcript read from every host's settings, whole and well formed.
        seen = [client.transcript(key) for client in clients]
        assert seen[0] == seen[1] == seen[2], key
        entries = seen[0]
        assert_transcript_valid(entries)
        assert [e.role for e in entries].count(Role.USER) == MESSAGES
        results = [e for e in entries if e.role == Role.TOOL]
        assert len(results) == 3 * MESSAGES, (key, [(e.tool_name, e.text[:60]) for e in results])
        for round_no in range(MESSAGES):
            assert (workspaces[key] / f"r{round_no}.txt").read_text() == f"round {round_no}"

    # `agentlane transcript` on each host prints the same (one session: each is a process).
    for key in keys[:1]:
        printed = [cli(dep, "transcript", key) for dep in hosts]
        assert all(p.returncode == 0 for p in printed), [p.stderr for p in printed]
        assert printed[0].stdout == printed[1].stdout == printed[2].stdout
        assert "round 2" in printed[0].stdout
    status = cli(hosts[2], "db", "status")
    assert status.returncode == 0, status.stderr
    latest = migrations.latest("postgres")
    assert "backend: postgresql" in status.stdout
    assert f"schema version: {latest} (latest {latest})" in status.stdout
    assert "location: postgresql://127.0.0.1:" in status.stdout  # never the user or password


async def test_a_command_that_finished_while_the_database_was_down_keeps_its_result(
    hosts: list[Deployment], postgres: PostgresCluster
) -> None:
    # The command ends while PostgreSQL is down: recording its result waits for the database
    # longer than exec's heartbeat timeout. The activity heartbeats while it waits, so its
    # attempt is not timed out and the result is not thrown away for "interrupted".
    client = await AgentlaneClient.connect(settings_for(hosts[0]))
    key = f"pgdown-{uuid.uuid4().hex[:6]}"
    ws = hosts[0].data_dir.parent / "workspaces" / key
    ws.mkdir(parents=True)
    receipt = await client.send_and_start(
        key, "run `sleep 1; echo finished-anyway` then say done", workspace=str(ws)
    )
    assert receipt.run_id

    async def exec_started() -> None:
        async for item in client.watch(key, 0):
            if item.event.kind == EventKind.TOOL_EXECUTION_START:
                return

    await asyncio.wait_for(exec_started(), 60)
    await asyncio.to_thread(postgres.restart, 18.0, "immediate")
    result = await asyncio.wait_for(client.wait_for_run(receipt.run_id), 120)
    assert result.status == ExecutionStatus.SUCCESS, result.error
    (answer,) = [e for e in client.transcript(key) if e.role == Role.TOOL]
    assert not answer.is_error and "finished-anyway" in answer.text, answer.text
    # Each event once in the stream: nothing announced again by a retried attempt.
    ids = [item.event.event_id async for item in client.watch(key, 0, until_run=receipt.run_id)]
    assert len(ids) == len(set(ids)), sorted(i for i in set(ids) if ids.count(i) > 1)


def hosts_per_workspace(
    server: object, postgres: PostgresCluster, tmp_path: Path, *names: str
) -> list[Deployment]:
    """Hosts of one deployment (one database, one task queue), each its own data dir and host
    id, workspaces per host (the default)."""
    url = postgres.create_database(f"hosts_{uuid.uuid4().hex[:8]}")
    queue = f"tq-{uuid.uuid4().hex[:8]}"
    deps = []
    for host in names:
        data = tmp_path / f"data-{host}"
        data.mkdir()
        env = {"AGENTLANE_DATABASE_URL": url, "AGENTLANE_HOST_ID": host}
        deps.append(Deployment(data_dir=data, server=server, task_queue=queue, extra_env=env))
    return deps


@pytest.fixture
def p_q_laptop(
    server: object, postgres: PostgresCluster, tmp_path: Path
) -> Iterator[list[Deployment]]:
    """Hosts p and q (no worker started yet) and a client host `laptop`, the store migrated;
    the workers a test starts are stopped after it."""
    hosts = hosts_per_workspace(server, postgres, tmp_path, "p", "q", "laptop")
    assert cli(hosts[0], "db", "migrate").returncode == 0
    yield hosts
    for host in hosts:
        host.stop_workers()


async def test_a_default_workspace_is_made_in_the_data_dir_of_the_host_that_runs_its_tools(
    p_q_laptop: list[Deployment],
) -> None:
    # Workspaces per host, each host its own data dir, the client (a laptop's CLI, a gateway)
    # a third: a session given no workspace gets one under the data dir of the host its tools
    # pinned to, not a copy of the client's path made on that host's disk.
    worker_p, worker_q, laptop = p_q_laptop
    worker_p.start_worker()
    worker_q.start_worker()
    client = await AgentlaneClient.connect(settings_for(laptop))
    key = f"wsdef-{uuid.uuid4().hex[:6]}"
    receipt = await client.send_and_start(key, "write x.txt with hi then read x.txt")
    assert receipt.run_id
    result = await client.wait_for_run(receipt.run_id)
    assert result.status == ExecutionStatus.SUCCESS, result.error
    status = await client.status(key)
    assert status.workspace == f"workspaces/{key}"
    owner = {"p": worker_p, "q": worker_q}[status.workspace_host or ""]
    assert (owner.data_dir / "workspaces" / key / "x.txt").read_text() == "hi"
    assert not (laptop.data_dir / "workspaces").exists()
    # Nor an empty one on the other host, which ran model calls at most.
    other = worker_q if owner is worker_p else worker_p
    assert not (other.data_dir / "workspaces" / key).exists()
    assert [e.text for e in client.transcript(key) if e.role == Role.TOOL][-1] == "hi"
    # A folder this client names is taken to be on its own host's disk, and no worker runs
    # there: the receipt warns at once, saying what to set (the run would wait 10 minutes
    # for host `laptop`, then fail).
    named = laptop.data_dir / "mine"
    named.mkdir()
    warned = await client.send(f"{key}-named", "say hi", workspace=str(named))
    assert "warning: no worker of host 'laptop'" in warned.note, warned.note
    assert "AGENTLANE_HOST_ID" in warned.note
    await client.abort(f"{key}-named")


async def test_a_branch_of_a_pinned_session_works_on_its_parents_host(
    p_q_laptop: list[Deployment],
) -> None:
    """Review S F1: the pin a running session learns is in its state, not yet in its record; a
    branch took its settings from the record and pinned itself wherever its first tool ran:
    the same workspace name with different files on two hosts."""
    worker_p, worker_q, laptop = p_q_laptop
    worker_p.start_worker()
    worker_q.start_worker()
    client = await AgentlaneClient.connect(settings_for(laptop))
    key = f"brpin-{uuid.uuid4().hex[:6]}"
    receipt = await client.send_and_start(key, "write notes.txt with from the parent")
    assert receipt.run_id
    assert (await client.wait_for_run(receipt.run_id)).status == ExecutionStatus.SUCCESS
    host = (await client.status(key)).workspace_host
    assert host in ("p", "q")
    point = [e for e in client.transcript(key) if e.role == Role.TOOL][-1].id
    branch = f"{key}-b"
    await client.branch(key, point, branch)
    for _ in range(3):  # whichever worker takes the branch's tool calls
        again = await client.send_and_start(branch, "read notes.txt then write b.txt with x")
        assert again.run_id
        done = await client.wait_for_run(again.run_id)
        assert done.status == ExecutionStatus.SUCCESS, done.error
    assert (await client.status(branch)).workspace_host == host
    reads = [e.text for e in client.transcript(branch) if e.role == Role.TOOL]
    assert reads.count("from the parent") == 3, reads
    other = worker_q if host == "p" else worker_p
    assert not (other.data_dir / "workspaces").exists()


async def test_a_schedules_workspace_stays_on_its_creators_host(
    p_q_laptop: list[Deployment],
) -> None:
    """Review S F4: a schedule's `--workspace` pinned each firing's session to whichever worker
    ran the firing; the folder was checked on the creator's disk, and it pins there."""
    worker_p, worker_q, laptop = p_q_laptop
    # Only q runs: every firing is delivered by q's worker, and the folder is p's.
    worker_q.start_worker()
    on_p = await AgentlaneClient.connect(settings_for(worker_p))
    folder = worker_p.data_dir / "project"
    folder.mkdir()
    keys = [f"sched-host-{n}-{uuid.uuid4().hex[:4]}" for n in range(4)]
    for key in keys:
        await on_p.create_schedule(
            key,
            key,
            "write at.txt with here",
            every="1h",
            paused=True,
            workspace=str(folder),
        )
        await on_p.trigger_schedule(key)
    for key in keys:
        for _ in range(150):
            if await on_p.session_exists(key):
                break
            await asyncio.sleep(0.2)
        assert (await on_p.status(key)).workspace_host == "p", key
    for key in keys:
        await on_p.delete_schedule(key)
        await on_p.abort(key)


async def test_a_session_ended_uncleanly_comes_back_on_its_host(
    p_q_laptop: list[Deployment],
) -> None:
    """Review S F7: the pin a session learns is not in its record until a clean close; one
    terminated in Temporal came back unpinned and moved to another host, away from its files."""
    worker_p, worker_q, laptop = p_q_laptop
    worker_q.start_worker()
    client = await AgentlaneClient.connect(settings_for(laptop))
    key = f"unclean-{uuid.uuid4().hex[:6]}"
    first = await client.send_and_start(key, "write a.txt with on q")
    assert first.run_id
    assert (await client.wait_for_run(first.run_id)).status == ExecutionStatus.SUCCESS
    assert (await client.status(key)).workspace_host == "q"
    await terminate_in_temporal(
        laptop.settings_env()["AGENTLANE_TEMPORAL_ADDRESS"], session_workflow_id(key)
    )
    worker_q.stop_workers()
    worker_p.start_worker()
    again = await client.send(key, "read a.txt")
    assert again.message_seq >= 1
    for _ in range(100):
        if await client.session_exists(key):
            break
        await asyncio.sleep(0.1)
    assert (await client.status(key)).workspace_host == "q"
    await client.abort(key)
    assert not (worker_p.data_dir / "workspaces").exists()


async def test_a_reset_stops_background_processes_on_the_host_that_runs_them(
    server: object, postgres: PostgresCluster, tmp_path: Path
) -> None:
    # Workspaces per host: a session's workflow runs on host p, its tools (and so its background
    # processes and their records) on host q, whose disk has its workspace. A reset stops them
    # there; listed on the workflow's own host, they were not found and ran on.
    deps = hosts_per_workspace(server, postgres, tmp_path, "p", "q")
    worker_p, worker_q = deps
    assert cli(worker_p, "db", "migrate").returncode == 0
    tag = uuid.uuid4().hex[:6]
    try:
        worker_p.start_worker()  # alone: the sessions' workflows are cached here
        client = await AgentlaneClient.connect(settings_for(worker_q))  # a client on host q
        ws = worker_q.data_dir / "ws"
        ws.mkdir()
        keys = [f"procs-{tag}-{n}" for n in range(2)]
        receipts = [
            await client.send_and_start(
                key, f"start `sleep 41{n}` in the background then say started", workspace=str(ws)
            )
            for n, key in enumerate(keys)
        ]
        worker_q.start_worker()  # the tool calls waiting for host q run now
        for receipt in receipts:
            assert receipt.run_id
            assert (await client.wait_for_run(receipt.run_id)).status == ExecutionStatus.SUCCESS
        assert len(running_commands("sleep 41")) == len(keys)
        assert not list(worker_p.data_dir.glob("sessions/**/processes/*"))
        for key in keys:
            await client.reset(key)
        deadline = time.monotonic() + 20
        while running_commands("sleep 41") or list(worker_q.data_dir.glob("sessions/**/proc-*")):
            assert time.monotonic() < deadline, running_commands("sleep 41")
            await asyncio.sleep(0.2)
    finally:
        for dep in deps:
            dep.stop_workers()


class FailingOnce:
    """A webhook receiver on 127.0.0.1: 200 to every POST except the second distinct one,
    which gets a 500 the first time (then 200)."""

    def __init__(self) -> None:
        self.got: list[tuple[str, int]] = []
        self.failed = threading.Event()
        self.final = threading.Event()
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                delivery = self.headers[HEADER_ID]
                with receiver.lock:
                    distinct = list(dict.fromkeys(d for d, _ in receiver.got))
                    # The second delivery, the first time it comes.
                    fail = len(distinct) == 1 and delivery not in distinct
                    status = 500 if fail and not receiver.failed.is_set() else 200
                    receiver.got.append((delivery, status))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()
                if status == 500:
                    receiver.failed.set()
                elif delivery.endswith("/final_reply"):
                    receiver.final.set()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


async def test_a_webhook_delivery_retried_by_another_host_is_not_delivered_twice(
    hosts: list[Deployment],
) -> None:
    """A POST fails on one host; that host dies; the retry runs on another host, which
    resumes after the POSTs already answered (the delivery's progress is in the database)."""
    receiver = FailingOnce()
    client = await AgentlaneClient.connect(settings_for(hosts[0]))
    key = f"hook-{uuid.uuid4().hex[:6]}"
    ws = hosts[0].data_dir.parent / "workspaces" / key
    ws.mkdir(parents=True)
    try:
        receipt = await client.send_and_start(
            key,
            "count to 600",
            workspace=str(ws),
            routing=Routing(channel="test", to="room", callback_url=receiver.url),
        )
        assert receipt.run_id
        assert await asyncio.to_thread(receiver.failed.wait, 60), "no POST failed"
        # The host whose attempt got the 500 dies before the retry (1 s later) can run there.
        handle = client.client.get_workflow_handle(session_workflow_id(key))
        victim = None
        for pending in (await handle.describe()).raw_description.pending_activities:
            if pending.activity_type.name == DELIVER_WEBHOOKS:
                pid = int(pending.last_worker_identity.split("@")[0])
                victim = next(
                    (w, d) for d in hosts for w in d.workers if w.pid == pid and not w.proc.poll()
                )
        assert victim is not None, "no delivery in flight"
        victim[0].kill9()
        result = await asyncio.wait_for(client.wait_for_run(receipt.run_id), 120)
        assert result.status == ExecutionStatus.SUCCESS

        assert await asyncio.to_thread(receiver.final.wait, 120), receiver.got
        answered = [d for d, status in receiver.got if status == 200]
        assert len(answered) == len(set(answered)), receiver.got
        assert len(answered) >= 3 and answered[-1].endswith("/final_reply")
        assert [s for _, s in receiver.got].count(500) == 1
    finally:
        receiver.server.shutdown()
        for dep in hosts:
            if not any(w.proc.poll() is None for w in dep.workers):
                dep.start_worker()


# -- shared state between hosts ---------------------------------------------------------------

ENV_KEY = "sk-ant-api03-" + secrets.token_hex(24)
WORK_KEY = "sk-ant-api03-" + secrets.token_hex(24)
CLAUDE = "anthropic/fake-claude"


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProviderServer]:
    with FakeProviderServer(anthropic_keys=[ENV_KEY, WORK_KEY]) as srv:
        yield srv


@pytest.fixture(scope="module")
def pair(
    server: object,
    postgres: PostgresCluster,
    fake: FakeProviderServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[list[Deployment]]:
    """Two hosts (no worker started yet) on a database of their own, with two profiles of a
    fake Anthropic: `anthropic:env` (each host's environment) and `anthropic:work` (stored
    once, in the database)."""
    url = postgres.create_database(f"pair_{uuid.uuid4().hex[:8]}")
    root = tmp_path_factory.mktemp("pair")
    queue = f"tq-{uuid.uuid4().hex[:8]}"
    config = (
        f'[[models]]\nprovider = "anthropic"\nid = "fake-claude"\napi = "anthropic"\n'
        f'base_url = "{fake.anthropic_base_url}"\n\n[agents.solo]\nmodel = "{CLAUDE}"\n'
    )
    deployments = []
    for host in ("a", "b"):
        data = root / f"host-{host}"
        data.mkdir()
        (data / "config.toml").write_text(config)
        deployments.append(
            Deployment(
                data_dir=data,
                server=server,
                task_queue=queue,
                extra_env={
                    "AGENTLANE_DATABASE_URL": url,
                    "AGENTLANE_HOST_ID": host,
                    "AGENTLANE_WORKSPACES": "shared",
                    "ANTHROPIC_API_KEY": ENV_KEY,
                },
            )
        )
    AuthStore(settings_for(deployments[0])).set_key("anthropic:work", "anthropic", WORK_KEY)
    try:
        yield deployments
    finally:
        for dep in deployments:
            dep.stop_workers()


def key_of(request: RecordedRequest) -> str:
    return request.key or ""


async def usage_of(dep: Deployment, profile: str) -> dict[str, object]:
    store = await open_store(settings_for(dep))
    try:
        row = await store.usage_row(profile)
    finally:
        await store.close()
    return {} if row is None else dict(json.loads(row.usage))


async def test_a_429_seen_on_one_host_cools_the_profile_for_the_other(
    pair: list[Deployment], fake: FakeProviderServer, tmp_path: Path
) -> None:
    host_a, host_b = pair
    # The work profile was just used, so a fresh session starts on the env profile.
    store = await open_store(settings_for(host_a))
    await store.set_usage("anthropic:work", None, json.dumps({"last_used": time.time()}))
    await store.close()
    fake.reset()
    fake.script(
        Reply.error(Fault.http(429), key=ENV_KEY), Reply(text="answered on work", key=WORK_KEY)
    )
    host_a.start_worker()
    solo: dict[str, object] = {"agent_id": "solo"}
    on_a = await AgentlaneClient.connect(settings_for(host_a))
    receipt = await on_a.send_and_start(
        f"cool-a-{uuid.uuid4().hex[:6]}",
        "hello",
        workspace=str(tmp_path),
        model=CLAUDE,
        session_overrides=solo,
    )
    assert receipt.run_id
    result = await asyncio.wait_for(on_a.wait_for_run(receipt.run_id), 60)
    assert result.status == ExecutionStatus.SUCCESS, result.error
    assert [key_of(r) for r in fake.requests("anthropic")] == [ENV_KEY, WORK_KEY]
    cooled = await usage_of(host_b, "anthropic:env")
    assert cooled.get("cooldown_reason") == "rate_limit", cooled
    assert float(str(cooled["cooldown_until"])) > time.time() + 5

    # Host a is gone; host b serves the next session and never sends on the cooling profile,
    # though it is the one a fresh session would start on (the least recently used).
    for worker in host_a.workers:
        worker.kill9()
    host_a.workers.clear()
    host_b.start_worker()
    fake.reset()
    fake.script(Reply(text="from host b"))
    on_b = await AgentlaneClient.connect(settings_for(host_b))
    receipt = await on_b.send_and_start(
        f"cool-b-{uuid.uuid4().hex[:6]}",
        "hello",
        workspace=str(tmp_path),
        model=CLAUDE,
        session_overrides=solo,
    )
    assert receipt.run_id
    result = await asyncio.wait_for(on_b.wait_for_run(receipt.run_id), 60)
    assert result.status == ExecutionStatus.SUCCESS, result.error
    assert result.reply == "from host b"
    assert [key_of(r) for r in fake.requests("anthropic")] == [WORK_KEY]
    assert float(str((await usage_of(host_b, "anthropic:env"))["cooldown_until"])) > time.time()


async def test_a_gateway_token_made_on_one_host_works_on_another(
    hosts: list[Deployment],
) -> None:
    made = TokenStore(settings_for(hosts[0])).create(name="adapter", prefixes=["gw:"])
    token = made[1]
    with GatewayServer(settings_for(hosts[1])) as gateway:
        async with gateway.http(token) as http:
            listed = await http.get("/v1/sessions")
            assert listed.status_code == 200, listed.text
        async with gateway.http(f"agl_{made[0].id}_" + "x" * 32) as http:
            assert (await http.get("/v1/sessions")).status_code == 401
        # Revoked on a third host: refused here at once.
        assert TokenStore(settings_for(hosts[2])).revoke(made[0].id)
        async with gateway.http(token) as http:
            assert (await http.get("/v1/sessions")).status_code == 401
