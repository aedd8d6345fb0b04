"""A poll that reaches a workflow while its closing task (continue-as-new) is in flight moves to
the next run at once, instead of after the SDK core's one-second backoff for the server's
refusal (clients/stream_handover.py): what a watcher of the event stream met at its hand-over."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from temporalio import workflow
from temporalio.client import Client, WorkflowHandle, WorkflowUpdateHandle, WorkflowUpdateStage
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from clients.stream_handover import HandOverAwareHandle

HOLD_SECONDS = 0.4


@workflow.defn(sandboxed=False)
class ClosesSlowly:
    """Continues as new on `close`, its closing task held as a busy stream's hand-over is."""

    def __init__(self) -> None:
        self.closing = False
        self.stalls = 0

    @workflow.signal
    def close(self) -> None:
        self.closing = True

    @workflow.signal
    def stall(self) -> None:
        # A busy worker: this task is held, the run goes on.
        if not workflow.unsafe.is_replaying():
            time.sleep(HOLD_SECONDS)  # noqa: ASYNC251
        self.stalls += 1

    @workflow.update
    def poll(self) -> str:
        return workflow.info().run_id

    @workflow.run
    async def run(self, generation: int) -> None:
        await workflow.wait_condition(lambda: self.closing)
        if not workflow.unsafe.is_replaying():
            # Blocks on purpose: the closing task in flight, on the SDK's workflow thread.
            time.sleep(HOLD_SECONDS)  # noqa: ASYNC251
        workflow.continue_as_new(generation + 1)


@asynccontextmanager
async def polled_once(
    client: Client,
) -> AsyncIterator[tuple[WorkflowHandle[ClosesSlowly, None], HandOverAwareHandle]]:
    """A `ClosesSlowly` run on a worker of its own, and a handle whose first poll it answered
    (so the handle knows the run its polls reach)."""
    queue = f"handover-{uuid.uuid4().hex[:8]}"
    async with Worker(
        client,
        task_queue=queue,
        workflows=[ClosesSlowly],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):
        first = await client.start_workflow(
            ClosesSlowly.run, 0, id=f"closes-{uuid.uuid4().hex[:8]}", task_queue=queue
        )
        handle = HandOverAwareHandle(client, first.id)
        assert await (await poll(handle)).result() == first.first_execution_run_id
        yield first, handle


async def poll(handle: HandOverAwareHandle) -> WorkflowUpdateHandle[str]:
    return await handle.start_update(ClosesSlowly.poll, wait_for_stage=WorkflowUpdateStage.ACCEPTED)


async def test_a_poll_refused_at_the_hand_over_moves_to_the_next_run_at_once(
    server: object,
) -> None:
    client = await Client.connect(str(server.address))  # type: ignore[attr-defined]
    async with polled_once(client) as (first, handle):
        wid = first.id
        await first.signal(ClosesSlowly.close)
        await asyncio.sleep(0.1)  # the closing task is being held now
        watch = asyncio.create_task(_next_run_seen(client, wid, first.first_execution_run_id))
        sent = time.monotonic()
        polled = await poll(handle)
        accepted = time.monotonic()
        landed = await polled.result()
        next_run_at = await watch
    assert landed != first.first_execution_run_id  # the next run answered
    assert handle.handed_over == 1
    # Refused when the held task closed the run; sent again to the next run within one check
    # after that (the core alone waits another 0.8-1.2 s).
    assert next_run_at > sent
    late = accepted - next_run_at
    assert late < 0.5, (late, accepted - sent)


async def _next_run_seen(client: Client, wid: str, first_run: str | None) -> float:
    """When the workflow's latest run first showed as another than `first_run`."""
    # The server's state, polled: nothing here could be awaited instead.
    while (await client.get_workflow_handle(wid).describe()).run_id == first_run:  # noqa: ASYNC110
        await asyncio.sleep(0.02)
    return time.monotonic()


async def test_a_poll_only_slow_to_be_accepted_is_not_sent_again(server: object) -> None:
    """A held task on a run that goes on (a busy worker): the poll waits for it, on the same
    run, and nothing is sent twice."""
    client = await Client.connect(str(server.address))  # type: ignore[attr-defined]
    async with polled_once(client) as (first, handle):
        await first.signal(ClosesSlowly.stall)
        await asyncio.sleep(0.1)  # the stalled task is being held now
        sent = time.monotonic()
        polled = await poll(handle)
        took = time.monotonic() - sent
        landed = await polled.result()
        await first.signal(ClosesSlowly.close)
    assert landed == first.first_execution_run_id
    assert handle.handed_over == 0
    assert took > 0.2, took  # it did wait past the first check (the stall held it)
