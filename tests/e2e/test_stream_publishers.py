"""The worker process's shared event publishers, against a real events workflow on the dev server.

Signals are slowed down by a client interceptor (the server and the stream are real), so "did the
lease wait for the signal" becomes a question of hundreds of milliseconds, not of a few.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
import pytest_asyncio
from temporalio.api.common.v1 import Payload
from temporalio.client import (
    Client,
    Interceptor,
    OutboundInterceptor,
    SignalWorkflowInput,
)
from temporalio.contrib.workflow_streams import (
    PollInput,
    PollResult,
    PublishInput,
    WorkflowStreamClient,
)
from temporalio.service import RPCError

from activities.event_publishing import text_delta_template
from activities.stream_publishers import SessionPublishers
from agentlane.event_stream import EventsInput
from agentlane.events import EVENTS_TOPIC, AgentEvent, EventKind
from agentlane.ids import events_workflow_id
from clients.api import AgentlaneClient
from tests.harness import Deployment

SIGNAL_DELAY = 0.4


class _SlowSignals(Interceptor):
    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        return _SlowSignalsOutbound(next)


class _SlowSignalsOutbound(OutboundInterceptor):
    async def signal_workflow(self, input: SignalWorkflowInput) -> None:
        await asyncio.sleep(SIGNAL_DELAY)
        await super().signal_workflow(input)


def slowed(client: Client) -> Client:
    config: dict[str, Any] = dict(client.config())
    config["interceptors"] = [*config["interceptors"], _SlowSignals()]
    return Client(**config)


async def start_events(
    client: AgentlaneClient, shared: Deployment, key: str, after_events: int | None = None
) -> None:
    await client.client.start_workflow(
        "SessionEventsWorkflow",
        EventsInput(session_key=key, continue_as_new_after_events=after_events),
        id=events_workflow_id(key),
        task_queue=shared.task_queue,
    )


@dataclass
class _Sent:
    run_id: str | None
    publisher_id: str
    sequence: int
    refused: bool


class _RecordSignals(Interceptor):
    """Records every stream publish signal: the run it named, its publisher and sequence."""

    def __init__(self) -> None:
        self.sent: list[_Sent] = []

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        return _RecordSignalsOutbound(next, self.sent)


class _RecordSignalsOutbound(OutboundInterceptor):
    def __init__(self, next: OutboundInterceptor, sent: list[_Sent]) -> None:
        super().__init__(next)
        self._sent = sent

    async def signal_workflow(self, input: SignalWorkflowInput) -> None:
        batch = input.args[0] if input.args else None
        if not isinstance(batch, PublishInput):
            await super().signal_workflow(input)
            return
        record = _Sent(input.run_id, batch.publisher_id, batch.sequence, refused=False)
        self._sent.append(record)
        try:
            await super().signal_workflow(input)
        except RPCError:
            record.refused = True
            raise


async def offset(client: AgentlaneClient, key: str) -> int:
    return await WorkflowStreamClient.create(client.client, events_workflow_id(key)).get_offset()


async def wait_offset(client: AgentlaneClient, key: str, at_least: int, timeout: float = 5) -> None:
    deadline = time.monotonic() + timeout
    while (now := await offset(client, key)) < at_least:
        assert time.monotonic() < deadline, f"offset {now}, expected {at_least}"
        await asyncio.sleep(0.02)


async def stream_events(client: AgentlaneClient, key: str) -> list[AgentEvent]:
    handle = client.client.get_workflow_handle(events_workflow_id(key))
    converter = client.client.data_converter.payload_converter
    result = await handle.query(
        "__temporal_workflow_stream_poll",
        PollInput(topics=[EVENTS_TOPIC], from_offset=0),
        result_type=PollResult,
    )
    out = []
    for item in result.items:
        payload = Payload()
        payload.ParseFromString(base64.b64decode(item.data))
        out.append(converter.from_payload(payload, AgentEvent))
    return out


def event(key: str, name: str) -> AgentEvent:
    return AgentEvent(
        kind=EventKind.TOOL_EXECUTION_START, event_id=name, session_key=key, run_id="r"
    )


@pytest_asyncio.fixture
async def events_key(
    client: AgentlaneClient, shared: Deployment, session_key: str
) -> AsyncIterator[str]:
    await start_events(client, shared, session_key)
    yield session_key
    await client.client.get_workflow_handle(events_workflow_id(session_key)).signal("close")


@pytest_asyncio.fixture
async def pool() -> AsyncIterator[SessionPublishers]:
    publishers = SessionPublishers(timedelta(milliseconds=200))
    yield publishers
    await publishers.close()


async def test_consecutive_leases_keep_publish_order(
    client: AgentlaneClient, events_key: str, pool: SessionPublishers
) -> None:
    slow = slowed(client.client)
    template = text_delta_template(events_key, "r", "m1", 0, 1)
    async with pool.lease(slow, events_key) as first:
        first.publish(event(events_key, "a1"))
        first.text(template, 0, "hel")
        first.text(template, 3, "lo")  # coalesced with the above
        first.publish(event(events_key, "a2"))
        first.text(template, 5, " there")  # still pending when the lease ends
    # The first lease's signal is now in flight (slowed); the second's events queue behind it.
    async with pool.lease(slow, events_key) as second:
        second.publish(event(events_key, "b1"), urgent=True)
        second.publish(event(events_key, "b2"))
    async with pool.lease(slow, events_key) as third:
        third.publish(event(events_key, "c1"))
        await third.flush()
    ids = [e.event_id for e in await stream_events(client, events_key)]
    assert ids == ["a1", "m1/a1/d/0", "a2", "m1/a1/d/5", "b1", "b2", "c1"]
    texts = [e.text for e in await stream_events(client, events_key) if e.text]
    assert texts == ["hello", " there"]


async def test_normal_exit_does_not_wait_for_the_signal(
    client: AgentlaneClient, events_key: str, pool: SessionPublishers
) -> None:
    lease = pool.lease(slowed(client.client), events_key)
    async with lease as publisher:
        publisher.publish(event(events_key, "x"))
        started = time.monotonic()
    exit_took = time.monotonic() - started
    assert exit_took < SIGNAL_DELAY / 4, f"the lease waited {exit_took:.3f}s on exit"
    assert await offset(client, events_key) == 0, "sent before the lease returned"
    await wait_offset(client, events_key, 1)  # and sent shortly after, without another publish


class _Failed(Exception):
    pass


async def test_exit_by_exception_waits_for_the_signal(
    client: AgentlaneClient, events_key: str, pool: SessionPublishers
) -> None:
    slow = slowed(client.client)
    started = time.monotonic()
    with pytest.raises(_Failed):
        async with pool.lease(slow, events_key) as publisher:
            publisher.text(text_delta_template(events_key, "r", "m1", 0, 1), 0, "partial")
            raise _Failed
    assert time.monotonic() - started >= SIGNAL_DELAY
    assert await offset(client, events_key) == 1, "the failed lease returned before its flush"

    ready = asyncio.Event()

    async def cancelled_activity() -> None:
        async with pool.lease(slow, events_key) as publisher:
            publisher.publish(event(events_key, "aborted"))
            ready.set()
            await asyncio.sleep(3600)

    task = asyncio.create_task(cancelled_activity())
    await ready.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await offset(client, events_key) == 2, "the cancelled lease returned before its flush"


async def test_idle_session_is_closed_and_close_sends_the_rest(
    client: AgentlaneClient, events_key: str
) -> None:
    idle = SessionPublishers(timedelta(milliseconds=50), idle_after=timedelta(milliseconds=200))
    try:
        async with idle.lease(client.client, events_key) as publisher:
            publisher.publish(event(events_key, "before idle"))
        assert idle.sessions() == [events_key]
        await wait_offset(client, events_key, 1)
        deadline = time.monotonic() + 3
        while idle.sessions():
            assert time.monotonic() < deadline, "the idle session was not closed"
            await asyncio.sleep(0.02)
        # A later lease starts a fresh stream client for the session.
        async with idle.lease(client.client, events_key) as publisher:
            publisher.publish(event(events_key, "after idle"))
        await wait_offset(client, events_key, 2)
    finally:
        await idle.close()

    # close() sends what a session still holds: here text that no batch tick will ever send.
    never = SessionPublishers(timedelta(hours=1))
    lease = never.lease(slowed(client.client), events_key)
    publisher = await lease.__aenter__()
    publisher.text(text_delta_template(events_key, "r", "m2", 0, 1), 0, "held back")
    await asyncio.sleep(0.3)
    assert await offset(client, events_key) == 2
    await never.close()
    assert await offset(client, events_key) == 3
    assert never.sessions() == []
    await lease.__aexit__(None, None, None)
    events = await stream_events(client, events_key)
    assert [e.text for e in events][-1] == "held back"


async def test_missing_events_workflow_blocks_nothing(
    client: AgentlaneClient, shared: Deployment, session_key: str, pool: SessionPublishers
) -> None:
    # No events workflow for this key yet (or any more, for a closed session).
    started = time.monotonic()
    with pytest.raises(_Failed):
        async with pool.lease(client.client, session_key) as publisher:
            publisher.publish(event(session_key, "lost 1"))
            raise _Failed  # the exit waits for a flush that fails: logged, not raised
    assert time.monotonic() - started < 5
    async with pool.lease(client.client, session_key) as publisher:
        publisher.publish(event(session_key, "lost 2"))
    await asyncio.sleep(0.5)  # its flush, in the background, is refused meanwhile
    await start_events(client, shared, session_key)
    try:
        async with pool.lease(client.client, session_key) as publisher:
            publisher.publish(event(session_key, "delivered"))
        await wait_offset(client, session_key, 1)
        await asyncio.sleep(0.3)  # nothing of the refused batches follows
        assert [e.event_id for e in await stream_events(client, session_key)] == ["delivered"]
    finally:
        await client.client.get_workflow_handle(events_workflow_id(session_key)).signal("close")


async def test_the_pool_vouches_only_for_events_a_signal_delivered(
    client: AgentlaneClient, shared: Deployment, session_key: str, pool: SessionPublishers
) -> None:
    """What `finish_run` may skip reading back: events whose signal the server took. A batch
    refused (no events workflow yet) is not vouched for, nor are kinds the check never asks."""
    with pytest.raises(_Failed):
        async with pool.lease(client.client, session_key) as publisher:
            publisher.publish(event(session_key, "refused"))
            raise _Failed
    assert not pool.delivered.all_delivered("r", {"refused"})
    await start_events(client, shared, session_key)
    try:
        async with pool.lease(client.client, session_key, wait_for_flush=True) as publisher:
            publisher.publish(event(session_key, "delivered"))
            publisher.publish(
                AgentEvent(
                    kind=EventKind.TURN_END, event_id="turn", session_key=session_key, run_id="r"
                )
            )
        assert [e.event_id for e in await stream_events(client, session_key)] == [
            "delivered",
            "turn",
        ]
        assert pool.delivered.all_delivered("r", {"delivered"})
        assert not pool.delivered.all_delivered("r", {"delivered", "refused"})
        assert not pool.delivered.all_delivered("r", {"turn"})
        assert not pool.delivered.all_delivered("another run", {"delivered"})
        pool.delivered.forget("r")
        assert not pool.delivered.all_delivered("r", {"delivered"})
    finally:
        await client.client.get_workflow_handle(events_workflow_id(session_key)).signal("close")


async def test_signals_name_the_run_and_follow_it_across_hand_overs(
    client: AgentlaneClient, shared: Deployment, session_key: str
) -> None:
    """After its first batch a session's publisher signals the events workflow's run, not its
    id (the server then skips a read of the current run per signal); when the stream continues
    as new, the refused batch goes to the next run under the same publisher and sequence, and
    every event arrives once, in order."""
    await start_events(client, shared, session_key, after_events=40)
    recorder = _RecordSignals()
    config: dict[str, Any] = dict(client.client.config())
    config["interceptors"] = [*config["interceptors"], recorder]
    recorded = Client(**config)
    total = 240
    seen: list[str] = []

    async def follow() -> None:
        async for item in client.watch(session_key, 0, poll_cooldown_ms=20):
            seen.append(item.event.event_id)
            if len(seen) == total:
                return

    follower = asyncio.create_task(follow())
    pool = SessionPublishers(timedelta(milliseconds=20))
    try:
        for i in range(0, total, 4):
            async with pool.lease(recorded, session_key) as publisher:
                for j in range(i, i + 4):
                    publisher.publish(event(session_key, f"e{j}"))
            await asyncio.sleep(0.03)
        await asyncio.wait_for(follower, 60)
    finally:
        await pool.close()
        follower.cancel()
        await client.client.get_workflow_handle(events_workflow_id(session_key)).signal("close")
    assert seen == [f"e{j}" for j in range(total)], "every event once, in publish order"
    runs = {s.run_id for s in recorder.sent if s.run_id}
    handle = client.client.get_workflow_handle(events_workflow_id(session_key))
    segments = [w async for w in client.client.list_workflows(f"WorkflowId = '{handle.id}'")]
    assert len(segments) >= 3, f"expected several hand-overs, got {len(segments)} segments"
    assert len(runs) >= 2, f"pinned signals reached {len(runs)} run(s)"
    by_id = [s for s in recorder.sent if s.run_id is None]
    assert len(by_id) <= 3, f"{len(by_id)} of {len(recorder.sent)} signals named no run"
    # A refused batch was sent again, unchanged, to the run that continued the refusing one.
    refused = [s for s in recorder.sent if s.refused]
    assert refused, "no batch met a hand-over (the test did not exercise it)"
    for batch in refused:
        again = [
            s
            for s in recorder.sent
            if (s.publisher_id, s.sequence) == (batch.publisher_id, batch.sequence)
            and s.run_id not in (None, batch.run_id)
            and not s.refused
        ]
        assert again, f"refused batch {batch} was not sent to the next run"
