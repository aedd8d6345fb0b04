"""The gateway's SSE stream against a real dev server and worker: `id:` is the stream offset; a
client that drops mid-reply and comes back with Last-Event-ID sees every event exactly once
(compared with the whole stream), also across the stream's continue-as-new and a dev-server
restart; the live end without `from`; keep-alive comments; an explicit `gap` when the stream no
longer holds what a client asks for."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.client import WorkflowExecutionStatus

from agentlane.event_stream import EventsInput
from agentlane.ids import events_workflow_id
from clients.api import AgentlaneClient
from tests.conftest import make_deployment, settings_for
from tests.e2e.gateway_support import GatewayServer, SseEvent, SseRead, agent_end_of, read_sse
from tests.harness import Deployment, devserver


@pytest.fixture(scope="module")
def gateway(shared: Deployment) -> Iterator[GatewayServer]:
    settings = settings_for(shared).model_copy(update={"gateway_keepalive": timedelta(seconds=1)})
    with GatewayServer(settings) as gw:
        yield gw


@pytest.fixture(scope="module")
def token(gateway: GatewayServer) -> str:
    return gateway.token(name="sse-tests")


def nth_delta(n: int) -> object:
    count = 0

    def stop(ev: SseEvent) -> bool:
        nonlocal count
        count += ev.event == "text_delta"
        return count >= n

    return stop


def assert_exactly_once(parts: list[SseRead], whole: SseRead) -> None:
    """The pieces, joined, are the whole stream: same ids, same events, none twice."""
    got = [ev for part in parts for ev in part.events if ev.id is not None]
    want = [ev for ev in whole.events if ev.id is not None]
    ids = [int(ev.id or -1) for ev in got]
    assert ids == list(range(ids[0], ids[0] + len(ids))), "ids skip or repeat"
    assert [(ev.id, ev.event, ev.data) for ev in got] == [(ev.id, ev.event, ev.data) for ev in want]
    assert not [ev for part in parts for ev in part.events if ev.event == "gap"]


async def start(http: object, key: str, text: str, client: AgentlaneClient) -> str:
    """Send through the gateway; the id of the run that took the message."""
    r = await http.post(f"/v1/sessions/{key}/messages", json={"text": text})  # type: ignore[attr-defined]
    assert r.status_code == 200, r.text
    fate = await client.wait_started(key, r.json()["message_seq"])
    return fate.run_id or ""


async def test_resume_mid_reply_with_last_event_id_exactly_once(
    gateway: GatewayServer, token: str, client: AgentlaneClient
) -> None:
    key = f"sse-{uuid.uuid4().hex[:8]}"
    async with gateway.http(token) as http:
        run_id = await start(http, key, "count slowly to 60 then say done", client)
        first = await read_sse(http, f"/v1/sessions/{key}/events?from=0", nth_delta(5))
        assert first.events[0].id == "0" and first.events[0].event == "agent_start"
        # Gone mid-reply; back with the last id it saw (and a stale ?from, which the header beats).
        rest = await read_sse(
            http,
            f"/v1/sessions/{key}/events?from=0",
            agent_end_of(run_id),
            headers={"Last-Event-ID": first.last_id or ""},
        )
        assert rest.events[0].id == str(int(first.last_id or 0) + 1)
        whole = await read_sse(http, f"/v1/sessions/{key}/events?from=0", agent_end_of(run_id))
        assert_exactly_once([first, rest], whole)
        data = whole.events[-1].json()
        assert data["kind"] == "agent_end" and data["session_key"] == key
        # The same with ?from= instead of the header.
        by_from = await read_sse(
            http,
            f"/v1/sessions/{key}/events?from={int(first.last_id or 0) + 1}",
            agent_end_of(run_id),
        )
        assert_exactly_once([first, by_from], whole)

        # Without from or Last-Event-ID: the live end. Nothing old comes; the next run's does.
        end = await client.events_offset(key)
        live = SseRead()
        follower = asyncio.create_task(
            read_sse(
                http, f"/v1/sessions/{key}/events", lambda ev: ev.event == "agent_end", out=live
            )
        )
        await asyncio.sleep(1.5)
        assert not [ev for ev in live.events if ev.id]
        # Idle: keep-alive comments (every second here) hold the connection open.
        assert live.comments, "no keep-alive comment on an idle stream"
        await start(http, key, "say again", client)
        await asyncio.wait_for(follower, 30)
        assert live.events[0].id == str(end) and live.events[0].event == "agent_start"

        # An offset this stream never gave out (issue 19): refused with where the end is,
        # never taken for a restart and replayed from 0.
        end = await client.events_offset(key)
        huge = "99999999999999999999999"
        for path, headers in [
            (f"/v1/sessions/{key}/events?from={huge}", {}),
            (f"/v1/sessions/{key}/events", {"Last-Event-ID": huge}),
            (f"/v1/sessions/{key}/events?from={end + 1}", {}),
        ]:
            got = await http.get(path, headers=headers)
            assert got.status_code == 400, got.text
            problem = got.json()
            assert problem["next_offset"] == end
            assert "past the end" in problem["detail"] and "again" not in problem["detail"]


async def test_resume_across_stream_continue_as_new(
    gateway: GatewayServer, token: str, client: AgentlaneClient, workspace: Path
) -> None:
    key = f"sse-can-{uuid.uuid4().hex[:8]}"
    # The thresholds are session settings only the Python client sets; the gateway follows.
    receipt = await client.send_and_start(
        key,
        " then ".join(f"write f{i}.txt with {i}" for i in range(6)) + " then count slowly to 40",
        workspace=str(workspace),
        session_overrides={"events_continue_as_new_after_events": 30},
    )
    run_id = receipt.run_id or ""
    async with gateway.http(token) as http:
        # The whole stream, followed live from the start: once the run has ended, a hand-over
        # at rest keeps only the stream's last items (REST_CARRY_BYTES), so a read from 0 made
        # afterwards may begin further on (after a `gap` event).
        whole_read = asyncio.create_task(
            read_sse(http, f"/v1/sessions/{key}/events?from=0", agent_end_of(run_id))
        )
        first = await read_sse(http, f"/v1/sessions/{key}/events?from=0", nth_delta(2))
        rest = await read_sse(
            http,
            f"/v1/sessions/{key}/events",
            agent_end_of(run_id),
            headers={"Last-Event-ID": first.last_id or ""},
        )
        whole = await whole_read
    assert_exactly_once([first, rest], whole)
    chain = [
        wf.status
        async for wf in client.client.list_workflows(f"WorkflowId = '{events_workflow_id(key)}'")
    ]
    assert chain.count(WorkflowExecutionStatus.CONTINUED_AS_NEW) >= 2


async def test_a_client_behind_the_retained_window_gets_a_gap_event(
    gateway: GatewayServer, token: str, client: AgentlaneClient, shared: Deployment
) -> None:
    key = f"sse-gap-{uuid.uuid4().hex[:8]}"
    # The session's stream, started beforehand with a tiny window: it keeps 3 items when it
    # continues as new (every ~30 history events). The session adopts it.
    await client.client.start_workflow(
        "SessionEventsWorkflow",
        EventsInput(session_key=key, keep_items=3, continue_as_new_after_events=30),
        id=events_workflow_id(key),
        task_queue=shared.task_queue,
    )
    async with gateway.http(token) as http:
        run_id = await start(http, key, "count slowly to 40 then say done", client)
        first = await read_sse(http, f"/v1/sessions/{key}/events?from=0", nth_delta(1))
        await client.wait_for_run(run_id)
        behind = await read_sse(
            http,
            f"/v1/sessions/{key}/events",
            agent_end_of(run_id),
            headers={"Last-Event-ID": first.last_id or ""},
        )
    gap = behind.events[0]
    assert gap.event == "gap" and gap.id is None
    info = gap.json()
    asked = int(first.last_id or 0) + 1
    assert info["requested"] == asked
    assert info["first_available"] > asked
    assert info["missed"] == info["first_available"] - asked
    assert "transcript" in info["advice"]
    assert behind.events[1].id == str(info["first_available"])
    assert behind.events[-1].event == "agent_end"


async def test_resume_across_a_dev_server_restart(tmp_path: Path) -> None:
    own = devserver.DevServer(
        data_dir=tmp_path / "temporal", port=devserver.free_port(), ui_port=None
    )
    own.start()
    dep = make_deployment(own, tmp_path / "data")
    dep.data_dir.mkdir()
    try:
        dep.start_worker()
        with GatewayServer(settings_for(dep)) as gw:
            tok = gw.token(name="restart")
            async with gw.http(tok) as http:
                own_client = await AgentlaneClient.connect(settings_for(dep))
                run_id = await start(
                    http, "restart", "count slowly to 80 then say survived", own_client
                )
                # One follower stays connected through the restart.
                through = SseRead()
                follower = asyncio.create_task(
                    read_sse(
                        http,
                        "/v1/sessions/restart/events?from=0",
                        agent_end_of(run_id),
                        timeout=150,
                        out=through,
                    )
                )
                # Another drops mid-reply, and comes back after the restart.
                first = await read_sse(http, "/v1/sessions/restart/events?from=0", nth_delta(3))
                own.stop()
                await asyncio.sleep(2)
                own.start()
                rest = await read_sse(
                    http,
                    "/v1/sessions/restart/events",
                    agent_end_of(run_id),
                    headers={"Last-Event-ID": first.last_id or ""},
                    timeout=150,
                )
                await asyncio.wait_for(follower, 150)
                whole = await read_sse(
                    http, "/v1/sessions/restart/events?from=0", agent_end_of(run_id)
                )
        assert_exactly_once([first, rest], whole)
        assert_exactly_once([through], whole)
        assert whole.events[-1].json()["kind"] == "agent_end"
    finally:
        dep.stop_workers()
        own.stop()


async def test_an_agui_stream_resumed_mid_run_does_not_start_the_run_again(
    gateway: GatewayServer, token: str, client: AgentlaneClient
) -> None:
    """AG-UI clients refuse a second RUN_STARTED for a run they have: a resume with
    Last-Event-ID is primed with what the client already had, and the text goes on where it
    stopped, none of it twice."""
    key = f"agui-{uuid.uuid4().hex[:8]}"

    def finished(ev: SseEvent) -> bool:
        return bool(ev.json().get("type") in ("RUN_FINISHED", "RUN_ERROR"))

    def text_started(ev: SseEvent) -> bool:
        return bool(ev.json().get("type") == "TEXT_MESSAGE_CONTENT")

    async with gateway.http(token) as http:
        await start(http, key, "count slowly to 40 then say done", client)
        path = f"/v1/sessions/{key}/events?vocabulary=agui"
        first = await read_sse(http, f"{path}&from=0", text_started)
        rest = await read_sse(http, path, finished, headers={"Last-Event-ID": first.last_id or ""})
        # AG-UI messages (not the gateway's own `gap` / `closed`); only the last of an item's
        # messages carries its id.
        types = [
            ev.json()["type"]
            for part in (first, rest)
            for ev in part.events
            if ev.event == "message"
        ]
        assert types.count("RUN_STARTED") == 1, types
        assert types[-1] == "RUN_FINISHED"
        text = "".join(
            ev.json().get("delta", "")
            for part in (first, rest)
            for ev in part.events
            if ev.event == "message" and ev.json()["type"] == "TEXT_MESSAGE_CONTENT"
        )
        assert text.count(" 40") == 1 and text.count("1 2 3") == 1, text
