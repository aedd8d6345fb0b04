"""The worker process's shared event publishers, against a real events workflow on the dev server.

Signals are slowed down by a client interceptor (the server and the stream are real), so "did the
lease wait for the signal" becomes a question of hundreds of milliseconds, not of a few.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import AsyncIterator
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
from temporalio.contrib.workflow_streams import PollInput, PollResult, WorkflowStreamClient

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


async def start_events(client: AgentlaneClient, shared: Deployment, key: str) -> None:
    await client.client.start_workflow(
        "SessionEventsWorkflow",
        EventsInput(session_key=key),
        id=events_workflow_id(key),
        task_queue=shared.task_queue,
    )


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
