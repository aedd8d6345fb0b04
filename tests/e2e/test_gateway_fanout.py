"""The gateway's fan-out against a real dev server and worker: 50 SSE followers of one session,
half at the live end and half resuming from offset 0 at staggered moments mid-run, each get
every event of the stream exactly once, while the session's events workflow records the long
polls of one subscriber only (its history's accepted updates stay within its publish signals)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest
from temporalio.api.enums.v1 import EventType

from agentlane.ids import events_workflow_id
from agentlane.seen_events import SeenEvents
from clients.api import AgentlaneClient
from tests.conftest import settings_for
from tests.e2e.gateway_support import GatewayServer, SseEvent, SseRead, read_sse
from tests.harness import Deployment

FOLLOWERS = 50


@pytest.fixture(scope="module")
def gateway(shared: Deployment) -> Iterator[GatewayServer]:
    with GatewayServer(settings_for(shared)) as gw:
        yield gw


async def history_counts(client: AgentlaneClient, key: str) -> tuple[int, int]:
    """(accepted updates, signals) in the events workflow's whole continue-as-new chain."""
    updates = signals = 0
    run_id: str | None = None
    while True:
        handle = client.client.get_workflow_handle(events_workflow_id(key), run_id=run_id)
        history = await handle.fetch_history()
        for e in history.events:
            updates += e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
            signals += e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
        started = history.events[0].workflow_execution_started_event_attributes
        run_id = started.continued_execution_run_id or None
        if run_id is None:
            return updates, signals


async def test_fifty_followers_get_every_event_once_through_one_subscription(
    gateway: GatewayServer, client: AgentlaneClient
) -> None:
    key = f"fan-{uuid.uuid4().hex[:8]}"
    token = gateway.token(name="fanout")
    async with gateway.http(token) as http:
        r = await http.post(f"/v1/sessions/{key}/messages", json={"text": "say ready"})
        assert r.status_code == 200, r.text
        run1 = (await client.wait_started(key, r.json()["message_seq"])).run_id or ""
        await client.wait_for_run(run1)
        await asyncio.sleep(1)
        updates_before, signals_before = await history_counts(client, key)
        live_end = await client.events_offset(key)

        def run2_end(ev: SseEvent) -> bool:
            return ev.event == "agent_end" and ev.json().get("run_id") != run1

        reads = [SseRead() for _ in range(FOLLOWERS)]
        # A token per follower: 50 connections at once are over one token's burst (30).
        auth = [
            {"Authorization": f"Bearer {gateway.token(name=f'f{i}')}"} for i in range(FOLLOWERS)
        ]
        live = [
            asyncio.create_task(
                read_sse(
                    http, f"/v1/sessions/{key}/events", run2_end, headers=auth[i], out=reads[i]
                )
            )
            for i in range(FOLLOWERS // 2)
        ]
        # The live followers are connected (their response started: their start is fixed).
        for _ in range(600):
            if all(read.status == 200 for read in reads[: FOLLOWERS // 2]):
                break
            await asyncio.sleep(0.05)
        r = await http.post(
            f"/v1/sessions/{key}/messages", json={"text": "count slowly to 100 then say done"}
        )
        assert r.status_code == 200, r.text
        late = []
        for i in range(FOLLOWERS // 2, FOLLOWERS):
            # Resuming from the start while the run streams: catch up by query, then join.
            await asyncio.sleep(0.1)
            late.append(
                asyncio.create_task(
                    read_sse(http, f"/v1/sessions/{key}/events?from=0", run2_end, out=reads[i])
                )
            )
        await asyncio.wait_for(asyncio.gather(*live, *late), 120)

    whole = [item async for item in client.read_events(key, 0)]
    want = [
        (str(i.offset), i.event.kind.value, i.event.model_dump_json(exclude_none=True))
        for i in whole
    ]
    end = next(n for n, w in enumerate(want) if w[1] == "agent_end" and run1 not in w[2]) + 1
    for n, read in enumerate(reads):
        got = [(ev.id, ev.event, ev.data) for ev in read.events if ev.id is not None]
        assert not [ev for ev in read.events if ev.event in ("gap", "lagging")], n
        first = 0 if n >= FOLLOWERS // 2 else live_end
        assert got == want[first:end], f"follower {n}"
    assert end - live_end > 20, "the run should have streamed many events"

    updates, signals = await history_counts(client, key)
    updates -= updates_before
    signals -= signals_before
    # One subscriber's long polls: at most one per publish batch, plus a few idle re-polls. 50
    # independent subscribers would be about 50 times that.
    print(f"events workflow: {updates} accepted poll updates, {signals} publish signals")
    assert 0 < updates <= signals + 5, (updates, signals)


async def test_a_burst_larger_than_the_queue_reaches_a_fast_reader_whole(
    shared: Deployment, client: AgentlaneClient
) -> None:
    """A run's events arrive in upstream batches larger than a follower's queue (1 000 by
    default; 20 here, so most batches of this run are): a reader reading as fast as it can was
    cut off with `lagging`. Now it gets every event once, in order, to the run's end."""
    key = f"burst-{uuid.uuid4().hex[:8]}"
    settings = settings_for(shared).model_copy(update={"gateway_fanout_queue": 20})
    with GatewayServer(settings) as gateway:
        async with gateway.http(gateway.token(name="b")) as http:
            r = await http.post(f"/v1/sessions/{key}/messages", json={"text": "say ready"})
            assert r.status_code == 200, r.text
            run1 = (await client.wait_started(key, r.json()["message_seq"])).run_id or ""
            await client.wait_for_run(run1)
            live_end = await client.events_offset(key)
            read = SseRead()
            reader = asyncio.create_task(
                read_sse(
                    http,
                    f"/v1/sessions/{key}/events",  # the live end: it joins the feed at once
                    lambda ev: ev.event == "agent_end",
                    timeout=120,
                    out=read,
                )
            )
            for _ in range(600):
                if read.status == 200:
                    break
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)
            r = await http.post(f"/v1/sessions/{key}/messages", json={"text": "count to 3000"})
            assert r.status_code == 200, r.text
            await asyncio.wait_for(reader, 150)
    got = [(ev.id, ev.event) for ev in read.events if ev.id is not None]
    assert not [ev for ev in read.events if ev.event in ("gap", "lagging")]
    seen = SeenEvents()  # the gateway passes each once-announced event on once
    whole = [
        (str(i.offset), i.event.kind.value)
        async for i in client.read_events(key, live_end)
        if seen.first_time(i.event.event_id, i.event.kind)
    ]
    assert len(got) > 40, len(got)
    assert got == whole[: len(got)] and got[-1][1] == "agent_end"
