"""AG-UI's own transport (issue 19) driven by the real `HttpAgent` of `@ag-ui/client` from the
npm registry (tests/agui_client, installed by `./dev test`): a run with tool calls, a run
aborted through the gateway, and two runs on one thread, each checked by the client's own
event verifier. Skipped, with the reason, where node or the package is missing."""

from __future__ import annotations

import asyncio
import json
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clients.api import AgentlaneClient
from tests.conftest import settings_for
from tests.e2e.gateway_support import GatewayServer
from tests.harness import Deployment

CLIENT_DIR = Path(__file__).resolve().parents[1] / "agui_client"
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(
    NODE is None or not (CLIENT_DIR / "node_modules" / "@ag-ui" / "client").is_dir(),
    reason="needs node and @ag-ui/client in tests/agui_client/node_modules "
    "(`./dev test` installs it with npm where the registry is reachable)",
)


@pytest.fixture(scope="module")
def gateway(shared: Deployment) -> Iterator[GatewayServer]:
    with GatewayServer(settings_for(shared)) as gw:
        yield gw


class Agent:
    """One HttpAgent (one thread) in a node process, driven a run at a time."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def start(cls, url: str, token: str, thread: str) -> Agent:
        assert NODE is not None
        proc = await asyncio.create_subprocess_exec(
            NODE,
            str(CLIENT_DIR / "drive.mjs"),
            url,
            token,
            thread,
            cwd=CLIENT_DIR,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env={"PATH": "/usr/bin:/bin", "SUPPRESS_TRANSFORMATION_WARNINGS": "1"},
        )
        return cls(proc)

    async def run(
        self, text: str, props: dict[str, Any] | None = None, on_event: Any = None
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The events the client received and how its runAgent ended."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        command = {"op": "run", "text": text, "forwardedProps": props or {}}
        self.proc.stdin.write((json.dumps(command) + "\n").encode())
        await self.proc.stdin.drain()
        events: list[dict[str, Any]] = []
        while True:
            line = await asyncio.wait_for(self.proc.stdout.readline(), 90)
            assert line, "the node client ended early"
            got = json.loads(line)
            if "event" in got:
                events.append(got["event"])
                if on_event is not None:
                    await on_event(got["event"])
                continue
            return events, got

    async def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 10)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def assert_one_clean_run(events: list[dict[str, Any]], end: dict[str, Any]) -> None:
    assert "done" in end, end
    assert end["done"]["verifyError"] is None, end["done"]["verifyError"]
    assert end["done"]["verified"] == len(events)
    kinds = types(events)
    assert kinds[0] == "RUN_STARTED" and kinds.count("RUN_STARTED") == 1, kinds
    assert kinds[-1] in ("RUN_FINISHED", "RUN_ERROR"), kinds


async def test_a_run_with_tool_calls_then_a_second_on_the_same_thread(
    gateway: GatewayServer, client: AgentlaneClient
) -> None:
    key = f"agui-{uuid.uuid4().hex[:8]}"
    token = gateway.token(name="agui", prefixes=["agui-"])
    agent = await Agent.start(f"{gateway.url}/v1/agui/{key}", token, key)
    try:
        events, end = await agent.run(
            "run `echo from-agui` then say all done", {"mode": "followup", "ignored": 1}
        )
        assert_one_clean_run(events, end)
        kinds = types(events)
        assert kinds[-1] == "RUN_FINISHED", kinds
        for kind in ("TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT"):
            assert kind in kinds, kinds
        result = next(e for e in events if e["type"] == "TOOL_CALL_RESULT")
        assert "from-agui" in result["content"]
        started = events[0]
        assert started["threadId"] == key
        run1 = started["runId"]
        # The client holds the user message, the assistant's tool call and its result, and
        # the reply, as its own apply step built them from the events.
        messages = end["done"]["messages"]
        roles = [m["role"] for m in messages]
        assert roles[0] == "user" and "tool" in roles and roles[-1] == "assistant", roles
        assert "all done" in messages[-1]["content"]

        # A second run on the same thread: the client resends the whole conversation; only
        # its new last message is sent to the session, which runs it as its next run.
        events2, end2 = await agent.run("say second answer")
        assert_one_clean_run(events2, end2)
        assert events2[0]["runId"] != run1 and events2[0]["threadId"] == key
        assert end2["done"]["messages"][-1]["content"] == "second answer"
        transcript = client.transcript(key)
        users = [e.text for e in transcript if e.role.value == "user"]
        assert users == ["run `echo from-agui` then say all done", "say second answer"]

        # The `?vocabulary=agui` stream of the same session is written as AG-UI's own SSE
        # parser splits it ("\n\n" between events), and reads back as the same two runs.
        async with gateway.http(token) as http:
            raw = b""
            path = f"/v1/sessions/{key}/events?vocabulary=agui&from=0"
            async with http.stream("GET", path) as response:
                async for chunk in response.aiter_bytes():
                    raw += chunk
                    if raw.count(b'"RUN_FINISHED"') >= 2:
                        break
        assert b"\r" not in raw
        frames = [f for f in raw.decode().split("\n\n") if "data:" in f]
        kinds = [json.loads(f.split("data: ", 1)[1].split("\n")[0])["type"] for f in frames]
        assert kinds.count("RUN_STARTED") == 2 and kinds.count("RUN_FINISHED") == 2, kinds
    finally:
        await agent.close()


async def test_a_run_aborted_through_the_gateway_ends_cancelled(
    gateway: GatewayServer, client: AgentlaneClient
) -> None:
    key = f"agui-{uuid.uuid4().hex[:8]}"
    token = gateway.token(name="agui-abort")
    agent = await Agent.start(f"{gateway.url}/v1/agui/{key}", token, key)

    async def abort_at_tool(event: dict[str, Any]) -> None:
        if event["type"] == "TOOL_CALL_START":
            async with gateway.http(token) as http:
                r = await http.post(f"/v1/sessions/{key}/abort", json={"reason": "test"})
                assert r.status_code == 200, r.text

    try:
        events, end = await agent.run("run `sleep 20` then say never", on_event=abort_at_tool)
        assert_one_clean_run(events, end)
        finished = events[-1]
        assert finished["type"] == "RUN_FINISHED", types(events)
        assert finished["outcome"]["type"] == "cancelled", finished
        result = await client.wait_for_run(events[0]["runId"])
        assert result.status.value == "aborted", result
    finally:
        await agent.close()


async def test_bad_inputs_are_refused_before_any_run(gateway: GatewayServer) -> None:
    key = f"agui-{uuid.uuid4().hex[:8]}"
    token = gateway.token(name="agui-bad", prefixes=["agui-"])
    base = {
        "threadId": key,
        "runId": "r1",
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
        "messages": [{"id": "m1", "role": "user", "content": "hi"}],
    }
    async with gateway.http(token) as http:
        cases: list[tuple[dict[str, Any], int, str]] = [
            ({**base, "threadId": "other"}, 422, "threadId 'other' is not this session"),
            ({**base, "messages": []}, 422, "messages is empty"),
            (
                {**base, "messages": [{"id": "a", "role": "assistant", "content": "x"}]},
                422,
                "must be the user's new message",
            ),
            ({**base, "forwardedProps": {"mode": "sideways"}}, 422, "sideways"),
            ({**base, "forwardedProps": {"model": "nope/none"}}, 422, "nope/none"),
            ({**base, "messages": [{"id": "m", "role": "user", "content": "a\x00"}]}, 422, "NUL"),
            ({"threadId": key}, 422, "runId"),
        ]
        for body, status, words in cases:
            r = await http.post(f"/v1/agui/{key}", json=body)
            assert r.status_code == status, (body, r.text)
            assert words in r.json()["detail"], (body, r.text)
        # Tokens as on every route.
        outside = await http.post("/v1/agui/elsewhere", json={**base, "threadId": "elsewhere"})
        assert outside.status_code == 403, outside.text
    async with gateway.http() as anonymous:
        assert (await anonymous.post(f"/v1/agui/{key}", json=base)).status_code == 401
