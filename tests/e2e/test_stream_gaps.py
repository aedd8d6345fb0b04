"""A worker killed with events still in its publish batch: a watcher never misses an event
silently (issues 11, 19). What the transcript holds is published again before the run's next
events; a `stream_gap`, published before `agent_end`, would name only what cannot be rebuilt."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

from activities.queue_peers import CHECK_SECONDS
from activities.stream_gaps import expected_event_ids, gap_ids
from agentlane.events import AgentEvent, EventKind
from agentlane.run import ExecutionStatus
from clients.api import AgentlaneClient, MessageView
from tests.conftest import make_deployment, settings_for
from tests.e2e.gateway_support import GatewayServer, agent_end_of, read_sse
from tests.harness import REPO, Deployment


@pytest.fixture
def dep(server: object, tmp_path: Path) -> Iterator[Deployment]:
    deployment = make_deployment(server, tmp_path)
    yield deployment
    deployment.stop_workers()


async def test_events_lost_with_a_killed_worker_are_published_again(dep: Deployment) -> None:
    # The first worker sends its batch only every 30 s: whatever its steps publish without
    # waiting is still in its memory when it dies.
    dep.extra_env["AGENTLANE_STREAM_BATCH_MS"] = "30000"
    victim = dep.start_worker()
    dep.extra_env.pop("AGENTLANE_STREAM_BATCH_MS")
    ws = dep.data_dir / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("alpha\nbeta\n")
    client = await AgentlaneClient.connect(settings_for(dep))
    key = "gap"
    receipt = await client.send_and_start(
        key, "read notes.txt then run `sleep 2` then say done", workspace=str(ws)
    )
    assert receipt.run_id
    # A client follows the run through the gateway's SSE stream all along, kill included.
    gateway = GatewayServer(settings_for(dep))
    with gateway:
        http = gateway.http(gateway.token(name="gap"))
        follower = asyncio.create_task(
            read_sse(
                http, f"/v1/sessions/{key}/events?from=0", agent_end_of(receipt.run_id), timeout=120
            )
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if any(e.role.value == "tool" for e in client.transcript(key)):
                break
            await asyncio.sleep(0.05)
        victim.kill9()
        dep.start_worker()
        result = await client.wait_for_run(receipt.run_id)
        assert result.status == ExecutionStatus.SUCCESS, result.error
        followed = await follower
        await http.aclose()
    sse = [ev for ev in followed.events if ev.id is not None]
    offsets = [int(ev.id or -1) for ev in sse]
    assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), "offsets skip or repeat"
    sse_ids = [ev.json()["event_id"] for ev in sse]
    assert len(sse_ids) == len(set(sse_ids)), "an event reached the follower twice"
    assert not [ev for ev in followed.events if ev.event in ("gap", "stream_gap")]
    events: list[AgentEvent] = []
    async for item in client.watch(key, 0, until_run=receipt.run_id):
        events.append(item.event)
    ids = [e.event_id for e in events]
    assert len(ids) == len(set(ids)), "an event reached the stream twice"
    assert sse_ids == ids  # the follower saw exactly the stream
    transcript = client.transcript(key)
    expected = expected_event_ids(transcript, receipt.run_id)
    # A model call made again (the kill can land in one) starts its message under an id of
    # its own (issue 24): that is the message's start all the same (`gap_ids`).
    covered = {eid for e in events for eid in gap_ids(e)}
    missing = [eid for eid in expected if eid not in covered]
    assert not missing, f"events the transcript holds never reached the stream: {missing}"
    # The kill did lose events here (the read's call and result), and they came back from the
    # transcript, before the events of the step that ran after the crash.
    again = [i for i, e in enumerate(events) if e.data.get("republished")]
    assert again, "the killed worker's batch was expected to hold this run's first events"
    first_lost_turn = min(events[i].turn_index or 0 for i in again)
    later = [
        i
        for i, e in enumerate(events)
        if not e.data.get("republished") and (e.turn_index or 0) > first_lost_turn
    ]
    assert later and max(again) < min(later), [
        (e.kind.value, e.turn_index, bool(e.data.get("republished"))) for e in events
    ]
    kinds = {events[i].kind for i in again}
    assert {EventKind.TOOL_EXECUTION_START, EventKind.TOOL_EXECUTION_END} <= kinds
    read_end = next(
        e for e in events if e.kind == EventKind.TOOL_EXECUTION_END and e.tool_name == "read"
    )
    assert read_end.data.get("republished") and "alpha" in (read_end.text or "")
    assert read_end.success and read_end.duration_ms is not None
    assert read_end.message_id and read_end.turn_index == 0
    # The run's lifecycle too, once each and in its place.
    assert events[0].kind == EventKind.AGENT_START
    assert [e.kind for e in events].count(EventKind.AGENT_START) == 1
    turns = [
        (e.kind, e.turn_index)
        for e in events
        if e.kind in (EventKind.TURN_START, EventKind.TURN_END)
    ]
    assert turns == sorted(set(turns), key=turns.index)  # no repeats
    assert (EventKind.TURN_START, 0) in turns and (EventKind.TURN_END, 0) in turns
    # Everything was rebuilt: no gap is left to announce.
    assert EventKind.STREAM_GAP not in {e.kind for e in events}
    assert events[-1].kind == EventKind.AGENT_END
    # What a watcher shows is the transcript's text.
    view = MessageView()
    shown: dict[str, str] = {}
    for event in events:
        view.apply(event)
    for entry in transcript:
        if entry.role.value == "assistant" and entry.run_id == receipt.run_id:
            shown[entry.id] = view.texts.get(entry.id, "")
            assert shown[entry.id] == entry.text.strip(), (entry.id, shown, entry.text)


async def test_a_run_whose_events_all_arrived_announces_no_gap(dep: Deployment) -> None:
    """And its end reads nothing back from the stream: every event the check expects went out
    from this worker in a signal the server took, and nothing it announces was handed out
    before (activities/stream_delivered.py, activities/run_finish.py)."""
    reads = dep.data_dir / "stream-reads"
    dep.extra_env.update(
        PYTHONPATH=f"{REPO / 'tests' / 'worker_hooks'}:{REPO}", TEST_HOOK_STREAM_READS=str(reads)
    )
    dep.start_worker()
    ws = dep.data_dir / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("alpha\n")
    client = await AgentlaneClient.connect(settings_for(dep))
    receipt = await client.send_and_start(
        "nogap", "read notes.txt then say done", workspace=str(ws)
    )
    assert receipt.run_id
    await client.wait_for_run(receipt.run_id)
    kinds = [i.event.kind async for i in client.watch("nogap", 0, until_run=receipt.run_id)]
    assert EventKind.STREAM_GAP not in kinds
    for kind in (EventKind.AGENT_START, EventKind.TURN_END, EventKind.AGENT_END):
        assert kinds.count(kind) == (2 if kind == EventKind.TURN_END else 1), kinds
    assert not reads.exists(), reads.read_text()


async def test_the_end_of_a_run_does_not_wait_for_events_this_worker_still_holds(
    dep: Deployment,
) -> None:
    # Steps publish without waiting, and this worker sends its batch only every 30 s: the
    # aborted loop's last steps are still in its memory when the run ends. The run's end sends
    # them itself before it checks the stream; before it did, the check took them for lost
    # and waited for them to settle (one batch interval and more) before `agent_end`.
    dep.extra_env["AGENTLANE_STREAM_BATCH_MS"] = "30000"
    dep.start_worker()
    ws = dep.data_dir / "ws"
    ws.mkdir()
    client = await AgentlaneClient.connect(settings_for(dep))
    loop = " then ".join(f"write f{i}.txt with {i}" for i in range(200)) + " then say done"
    receipt = await client.send_and_start("held", loop, workspace=str(ws))
    assert receipt.run_id
    for _ in range(1200):  # a few steps in, well before the loop's end
        if len(list(ws.glob("f*.txt"))) >= 3:
            break
        await asyncio.sleep(0.05)
    got = await client.abort("held", "test")
    assert got.run_id == receipt.run_id
    aborted = time.monotonic()
    events: list[AgentEvent] = []

    async def watch() -> None:
        async for item in client.watch("held", 0, until_run=receipt.run_id):
            events.append(item.event)

    await asyncio.wait_for(watch(), 60)
    took = time.monotonic() - aborted
    assert took < 10, f"agent_end {took:.1f} s after the abort"
    assert events[-1].kind == EventKind.AGENT_END
    assert EventKind.STREAM_GAP not in [e.kind for e in events]
    result = await client.wait_for_run(receipt.run_id)
    assert result.status == ExecutionStatus.ABORTED
    transcript = client.transcript("held")
    expected = expected_event_ids(transcript, receipt.run_id)
    assert expected and set(expected) <= {e.event_id for e in events}


async def test_the_end_of_a_run_does_not_wait_out_another_workers_batch(dep: Deployment) -> None:
    # Two worker processes on one task queue: a run's steps land on either, and each sends
    # what its steps published one batch interval later. When the run's end runs on the other
    # worker than its last step, those events are still on their way: the end reads the
    # stream again until they land. Before, it waited out the whole settle time (1.7 s) before
    # `agent_end` and before the session could start its next run.
    dep.start_worker()
    dep.start_worker()
    ws = dep.data_dir / "ws"
    ws.mkdir()
    client = await AgentlaneClient.connect(settings_for(dep))
    ends: list[float] = []  # finish_run, scheduled to completed
    crossed = 0  # runs whose end ran elsewhere than their last model call
    for burst in range(4):
        keys = [f"two-{burst}-{n}" for n in range(4)]
        for key in keys:
            (ws / key).mkdir()
        receipts = await asyncio.gather(
            *(
                client.send_and_start(
                    k, "write a.txt with 1 then write b.txt with 2", workspace=str(ws / k)
                )
                for k in keys
            )
        )
        results = await asyncio.gather(*(client.wait_for_run(r.run_id or "") for r in receipts))
        assert all(r.status == ExecutionStatus.SUCCESS for r in results), results
        for receipt in receipts:
            history = await client.client.get_workflow_handle(receipt.run_id or "").fetch_history()
            scheduled: dict[int, tuple[str, float]] = {}
            started_by: dict[int, str] = {}
            last_model_worker = finish_worker = ""
            for e in history.events:
                at = e.event_time.ToDatetime().timestamp()
                if e.HasField("activity_task_scheduled_event_attributes"):
                    name = e.activity_task_scheduled_event_attributes.activity_type.name
                    scheduled[e.event_id] = (name, at)
                elif e.HasField("activity_task_started_event_attributes"):
                    a = e.activity_task_started_event_attributes
                    started_by[a.scheduled_event_id] = a.identity
                elif e.HasField("activity_task_completed_event_attributes"):
                    sched = e.activity_task_completed_event_attributes.scheduled_event_id
                    name, when = scheduled[sched]
                    if name == "call_model":
                        last_model_worker = started_by[sched]
                    elif name == "finish_run":
                        finish_worker = started_by[sched]
                        ends.append(at - when)
            crossed += finish_worker != last_model_worker
        events = [
            item.event async for item in client.watch(keys[0], 0, until_run=receipts[0].run_id)
        ]
        assert events[-1].kind == EventKind.AGENT_END
        assert EventKind.STREAM_GAP not in [e.kind for e in events]
    assert len(ends) == 16
    assert crossed, "no run ended on the other worker: the case was not exercised"
    assert max(ends) < 1.0, sorted(ends)
    # A file tool's first step of a run on a worker checks the run's earlier events; being a
    # local activity it sends no heartbeat (the SDK warned of each one, every such step).
    for worker in dep.workers:
        assert "Activity heartbeat failed" not in worker.log.read_text(errors="replace")


async def pollers(client: AgentlaneClient, queue: str) -> set[str]:
    request = DescribeTaskQueueRequest(
        namespace=client.client.namespace,
        task_queue=TaskQueue(name=queue),
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
    )
    described = await client.client.workflow_service.describe_task_queue(request)
    return {p.identity for p in described.pollers}


def out_of_order(events: list[AgentEvent], run_id: str) -> list[str]:
    """What a consumer reading the stream in order would see out of order in one run: the run
    opens with `agent_start`, its turns follow one another, and it closes with `agent_end`."""
    mine = [e for e in events if e.run_id == run_id]
    wrong = []
    if mine[0].kind != EventKind.AGENT_START:
        wrong.append(f"opens with {mine[0].kind.value}")
    if mine[-1].kind != EventKind.AGENT_END:
        wrong.append(f"closes with {mine[-1].kind.value}")
    turn = 0
    for event in mine:
        if event.turn_index is not None:
            if event.turn_index < turn:
                wrong.append(f"{event.event_id} after turn {turn}")
            turn = max(turn, event.turn_index)
    return wrong


async def test_with_several_workers_a_run_streams_in_the_order_it_ran(dep: Deployment) -> None:
    # Each worker process sends what its activities published with its next batch. A run's
    # steps land on either worker: with a batch held back, the next step's events (from the
    # other process) reached the stream first; the answer came before the tool calls that
    # led to it, before `agent_start` even. With another worker on the queue, an activity's
    # events are in before it reports. A long batch interval makes the old race certain.
    dep.extra_env["AGENTLANE_STREAM_BATCH_MS"] = "1000"
    dep.start_worker()
    dep.start_worker()
    client = await AgentlaneClient.connect(settings_for(dep))
    deadline = time.monotonic() + 30
    while len(await pollers(client, dep.task_queue)) < 2:
        assert time.monotonic() < deadline, "the two workers do not both poll the queue"
        await asyncio.sleep(0.2)
    # Both polling now: each sees the other at its next check.
    await asyncio.sleep(CHECK_SECONDS + 1)
    ws = dep.data_dir / "ws"
    keys = [f"order-{n}" for n in range(4)]
    for key in keys:
        (ws / key).mkdir(parents=True)
    instruction = "write a.txt with 1 then read a.txt then write b.txt with 2 then say done"
    receipts = await asyncio.gather(
        *(client.send_and_start(k, instruction, workspace=str(ws / k)) for k in keys)
    )
    results = await asyncio.gather(*(client.wait_for_run(r.run_id or "") for r in receipts))
    assert all(r.status == ExecutionStatus.SUCCESS for r in results), results
    ran_on: set[str] = set()
    for key, receipt in zip(keys, receipts, strict=True):
        run_id = receipt.run_id or ""
        history = await client.client.get_workflow_handle(run_id).fetch_history()
        ran_on |= {
            e.activity_task_started_event_attributes.identity
            for e in history.events
            if e.HasField("activity_task_started_event_attributes")
        }
        events = [item.event async for item in client.watch(key, 0, until_run=run_id)]
        assert not out_of_order(events, run_id), (key, out_of_order(events, run_id))
    assert len(ran_on) == 2, "one worker ran everything: the case was not exercised"
