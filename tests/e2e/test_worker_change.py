"""State a session rebuilds by replay equals the state it had: after each kind of run end
(aborted, interrupted, failed, terminated), the worker is replaced and the next message must get
the same answer it would have got from the old worker."""

from __future__ import annotations

import asyncio

import pytest

from agentlane.messages import SendDisposition
from agentlane.run import ExecutionStatus
from clients.api import AgentlaneClient
from tests.conftest import settings_for
from tests.e2e.support import assert_transcript_valid, terminate_in_temporal, wait_idle
from tests.harness import Deployment


def replace_worker(dep: Deployment) -> None:
    dep.workers[0].kill9()
    dep.workers.clear()
    dep.start_worker()


async def end_with(client: AgentlaneClient, dep: Deployment, key: str, how: str) -> None:
    if how == "fail":
        ws = dep.data_dir / "ws"
        ws.rename(dep.data_dir / "ws-away")
        failed = await client.send_and_start(key, "say into the void")
        assert failed.run_id
        assert (await client.wait_for_run(failed.run_id)).status == ExecutionStatus.ERROR
        (dep.data_dir / "ws-away").rename(ws)
        await wait_idle(client, key, runs=1, timeout=60)
        return
    first = await client.send_and_start(key, "count slowly to 400 then say never")
    assert first.run_id
    await asyncio.sleep(0.8)
    if how == "abort":
        await client.abort(key, "stop")
        assert (await client.wait_for_run(first.run_id)).status == ExecutionStatus.ABORTED
    elif how == "interrupt":
        second = await client.send_and_start(key, "say switched", mode="interrupt")
        assert second.run_id
        await client.wait_for_run(second.run_id)
    elif how == "terminate":
        await terminate_in_temporal(dep.address, first.run_id)
        # Its message runs again; stop that run too.
        await asyncio.sleep(1.5)
        await client.abort(key, "stop the retry")
    await wait_idle(client, key, runs=1, timeout=60)


@pytest.mark.parametrize("how", ["abort", "interrupt", "terminate", "fail"])
async def test_next_message_after_a_worker_change(solo: Deployment, how: str) -> None:
    client = await AgentlaneClient.connect(settings_for(solo))
    key = f"wc-{how}"
    ws = solo.data_dir / "ws"
    ws.mkdir(exist_ok=True)
    await client.send_and_start(key, "say hello", workspace=str(ws))
    await wait_idle(client, key, runs=1)
    await end_with(client, solo, key, how)
    before = await client.status(key)
    replace_worker(solo)
    after = await client.status(key)
    assert after.model_dump(exclude={"usage"}) == before.model_dump(exclude={"usage"})
    nxt = await client.send_and_start(key, "say next")
    assert nxt.disposition == SendDisposition.STARTED, nxt
    assert nxt.run_id
    assert (await client.wait_for_run(nxt.run_id)).reply == "next"
    assert_transcript_valid(client.transcript(key))
