"""Tools when a worker dies (two real worker processes, kill -9 or an exit mid-call): a
background process dies with its worker and is then reported lost, never silently absent; an
apply_patch interrupted half-way is finished by the retried attempt, not applied twice."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from agentlane.run import ExecutionStatus
from agentlane.transcript import Role
from clients.api import AgentlaneClient
from tests.conftest import make_deployment, settings_for
from tests.e2e.support import assert_transcript_valid
from tests.harness import REPO, Deployment
from tests.process_groups import group_runs


@pytest.fixture(scope="module")
def deployment(server: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    # Whichever worker writes a file of an apply_patch first dies right after that write (a
    # hook loaded from the test tree, tests/worker_hooks/; only the patch test sends a patch).
    root = tmp_path_factory.mktemp("tools-crash")
    dep = make_deployment(
        server,
        root,
        PYTHONPATH=f"{REPO / 'tests' / 'worker_hooks'}:{REPO}",
        TEST_HOOK_CRASH_IN_APPLY_PATCH=str(root / "apply-patch-crashed"),
    )
    # Three at once (each test kills one and needs two): cheaper than a replacement later.
    with ThreadPoolExecutor(3) as starting:
        list(starting.map(lambda _: dep.start_worker(wait_ready=60), range(3)))
    yield dep
    dep.stop_workers()


@pytest.fixture
def two_workers(deployment: Deployment) -> Deployment:
    """At least two live workers (a test before may have killed one)."""
    deployment.workers = [w for w in deployment.workers if w.proc.poll() is None]
    while len(deployment.workers) < 2:
        deployment.start_worker()
    return deployment


async def test_a_background_process_dies_with_its_worker_and_is_reported_lost(
    two_workers: Deployment,
) -> None:
    dep = two_workers
    client = await AgentlaneClient.connect(settings_for(dep))
    ws = dep.data_dir / "ws-lost"
    ws.mkdir()
    key = "proc-lost"
    first = await client.send_and_start(
        key, "start `echo serving; sleep 300` in the background", workspace=str(ws)
    )
    assert first.run_id
    assert (await client.wait_for_run(first.run_id)).status == ExecutionStatus.SUCCESS
    (record_path,) = dep.data_dir.glob("**/processes/proc-1.json")
    record = json.loads(record_path.read_text())
    assert group_runs(record["process_pid"])
    owner = next(w for w in dep.workers if w.pid == record["pid"])
    owner.kill9()
    # The process died with its worker (it would otherwise run on, unowned, for 5 minutes).
    deadline = time.monotonic() + 5
    while group_runs(record["process_pid"]):
        assert time.monotonic() < deadline, "the background process outlived its worker"
        await asyncio.sleep(0.05)

    asked = time.monotonic()
    second = await client.send_and_start(key, "poll proc-1 then list processes", workspace=str(ws))
    assert second.run_id
    result = await asyncio.wait_for(client.wait_for_run(second.run_id), 60)
    assert result.status == ExecutionStatus.SUCCESS
    # Its worker is known gone on this host: the poll is answered at once, not after the 10 s
    # a call routed to its queue would wait.
    assert time.monotonic() - asked < 8
    entries = client.transcript(key)
    assert_transcript_valid(entries)
    polled, listed = [e for e in entries if e.role == Role.TOOL and e.run_id == second.run_id]
    assert polled.is_error
    assert polled.text.startswith("proc-1 is lost: the worker that ran it")
    assert "serving" in polled.text  # what it printed before its worker died
    assert listed.text.startswith("proc-1  lost (its worker stopped)")


PATCH = """*** Begin Patch
*** Update File: a.txt
 n = 1
+n = 2
*** Update File: b.txt
-m = 1
+m = 2
*** End Patch"""


async def test_an_apply_patch_cut_short_by_a_dying_worker_is_finished_once(
    two_workers: Deployment,
) -> None:
    dep = two_workers
    client = await AgentlaneClient.connect(settings_for(dep))
    ws = dep.data_dir / "ws-patch"
    ws.mkdir()
    (ws / "a.txt").write_text("n = 1\n")
    (ws / "b.txt").write_text("m = 1\n")
    receipt = await client.send_and_start(
        "patch-crash", f"apply this patch:\n{PATCH}", workspace=str(ws)
    )
    assert receipt.run_id
    result = await asyncio.wait_for(client.wait_for_run(receipt.run_id), 90)
    assert result.status == ExecutionStatus.SUCCESS, result.error
    died = [w for w in dep.workers if w.proc.poll() is not None]
    assert [w.proc.returncode for w in died] == [137], "exactly one worker died mid-patch"
    # Applied once: the first hunk would still match, yet a.txt has one "n = 2".
    assert (ws / "a.txt").read_text() == "n = 1\nn = 2\n"
    assert (ws / "b.txt").read_text() == "m = 2\n"
    entries = client.transcript("patch-crash")
    assert_transcript_valid(entries)
    (tool,) = [e for e in entries if e.role == Role.TOOL]
    assert tool.text == (
        "Applied the patch (finished after an interrupted attempt):\nM a.txt\nM b.txt"
    )


async def test_what_a_killed_workers_commands_started_is_stopped_by_a_worker_of_the_host(
    two_workers: Deployment,
) -> None:
    # `sleep 397; echo hi` is a shell and its child: the shell dies with its worker (the parent
    # death signal), the child is left to init; a worker still on the host stops it.
    from activities.tools import orphans
    from tests.process_groups import running_commands

    dep = two_workers
    client = await AgentlaneClient.connect(settings_for(dep))
    ws = dep.data_dir / "ws-orphans"
    ws.mkdir()
    receipt = await client.send_and_start(
        "orphans", "run `sleep 397; echo hi` then say done", workspace=str(ws)
    )
    assert receipt.run_id
    deadline = time.monotonic() + 30
    while not running_commands("sleep 397"):
        assert time.monotonic() < deadline, "the command never started"
        await asyncio.sleep(0.1)
    pids = {w.pid for w in dep.workers}
    owners = {orphans._marks_of(pid)[0] for pid in running_commands("sleep 397")}
    [owner] = {int(str(o).split(":")[0]) for o in owners}
    assert owner in pids
    next(w for w in dep.workers if w.pid == owner).kill9()
    deadline = time.monotonic() + 20
    while running_commands("sleep 397"):
        assert time.monotonic() < deadline, "a killed worker's command ran on"
        await asyncio.sleep(0.2)
