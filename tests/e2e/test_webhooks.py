"""Webhook delivery (issue 11) end to end: a real dev server and worker, a local receiver that
fails, goes away, comes back, and still gets every block reply, final reply and error exactly
once by idempotency key, in order, with valid signatures.

The receiver is down for seconds here; the retry policy (1 s doubling to a 1-minute cap,
unlimited attempts, a day's schedule-to-close: `workflows/webhook_queue.py`) is what makes the
same hold for a callback down for an hour: ~65 attempts, the first after its return within a
minute.

Receivers listen on loopback, which a webhook may reach only when the operator allows it
(`[webhooks] allow_private = true`): the delivery tests run on a deployment of their own with
that config; the refusals run on the shared one, which has none. No traffic leaves the machine.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from agentlane.events import EventKind
from agentlane.messages import Routing
from agentlane.webhook_secrets import WebhookSecretStore
from agentlane.webhooks import HEADER_ID, HEADER_KIND, HEADER_SIGNATURE, default_secret_ref
from clients.api import AgentlaneClient, SendRejected
from clients.gateway.webhooks import verify_request
from tests.e2e.support import collect, wait_idle
from tests.harness import Deployment, devserver

RECEIVER_REPLY = b"internal-service-reply: do not leak"


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    status: int
    at: float


@dataclass
class Receiver:
    """An http.server on 127.0.0.1 in a thread: answers 500 to the first `fail_first` POSTs,
    and can be taken down (connection refused) and brought back on the same port."""

    fail_first: int = 0
    down_after_failures: float = 0.0
    port: int = field(default_factory=devserver.free_port)
    got: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None
    thread: threading.Thread | None = None
    down_windows: list[tuple[float, float]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/agentlane"

    def start(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver.lock:
                    failing = receiver.fail_first > 0
                    if failing:
                        receiver.fail_first -= 1
                    status = 500 if failing else 200
                    receiver.got.append(
                        Received(dict(self.headers.items()), body, status, time.time())
                    )
                    go_down = failing and receiver.fail_first == 0 and receiver.down_after_failures
                self.send_response(status)
                reply = RECEIVER_REPLY if failing else b""
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)
                if go_down:
                    threading.Thread(target=receiver.outage, daemon=True).start()

            def log_message(self, *args: Any) -> None:
                pass

        self._handler = Handler
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def outage(self) -> None:
        """Down (connection refused) for `down_after_failures` seconds, then back."""
        began = time.time()
        self.stop()
        time.sleep(self.down_after_failures)
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.down_windows.append((began, time.time()))

    def accepted(self) -> list[Received]:
        with self.lock:
            return [r for r in self.got if r.status == 200]


@pytest.fixture
def receiver() -> Any:
    r = Receiver()
    r.start()
    yield r
    r.stop()


def first_occurrences(got: list[Received]) -> list[dict[str, Any]]:
    seen: set[str] = set()
    out = []
    for r in got:
        body = json.loads(r.body)
        if body["id"] not in seen:
            seen.add(body["id"])
            out.append(body)
    return out


async def wait_delivered(client: AgentlaneClient, key: str, runs: int, timeout: float) -> None:
    async def go() -> None:
        while True:
            hook = (await client.status(key)).webhook
            if hook is not None and hook.runs_delivered >= runs and not hook.pending_runs:
                return
            await asyncio.sleep(0.3)

    await asyncio.wait_for(go(), timeout)


async def test_replies_survive_failures_and_an_outage_in_order_signed(
    hooked_client: AgentlaneClient,
    hooked: Deployment,
    session_key: str,
    receiver: Receiver,
) -> None:
    client = hooked_client
    workspace = hooked.data_dir / "ws" / session_key
    workspace.mkdir(parents=True)
    receiver.fail_first = 2
    receiver.down_after_failures = 3.0
    secret = WebhookSecretStore(hooked.data_dir).ensure(default_secret_ref(session_key))
    routing = Routing(channel="test", to="room-1", callback_url=receiver.url)

    first = await client.send_and_start(
        session_key, "count to 600", workspace=str(workspace), routing=routing
    )
    assert first.run_id
    events = await collect(client, session_key, first.run_id)
    await client.wait_for_run(first.run_id)
    # While the receiver fails, the session's status says so (Temporal's view of the attempt).
    saw_retrying = False
    for _ in range(50):
        hook = (await client.status(session_key)).webhook
        assert hook is not None and hook.url == receiver.url
        if hook.attempt and hook.attempt > 1 and hook.last_error:
            saw_retrying = True
            # The HTTP status only: the receiver's reply never reaches a status reader.
            assert "HTTP 500" in hook.last_error
            assert "internal-service-reply" not in hook.last_error
            break
        await asyncio.sleep(0.2)
    assert saw_retrying, "the status never showed a retrying delivery"

    await client.send(session_key, "say two")  # no routing: the callback stays
    await wait_idle(client, session_key, runs=2)
    third = await client.send_and_start(session_key, "run `sleep 20` then say never")
    await asyncio.wait_for(_until_tool_start(client, session_key), 30)
    await client.abort(session_key, "stopped by the test")

    await wait_delivered(client, session_key, runs=3, timeout=120)
    assert receiver.down_windows, "the receiver never went down"
    assert sum(1 for r in receiver.got if r.status == 500) == 2
    # A failed attempt is one line in the worker's log, not a traceback each time (a receiver
    # down for a day would write 1 440 of them).
    logs = "".join(w.log.read_text(errors="replace") for w in hooked.workers)
    assert "webhook delivery: POST" in logs
    tracebacks = logs.split("Traceback (most recent call last)")[1:]
    assert not [t for t in tracebacks if "WebhookDeliveryFailed" in t[:4000]]

    # Every request (repeats included) carries a valid signature and a matching id.
    for r in receiver.got:
        body = verify_request(secret, r.body, r.headers)
        assert r.headers[HEADER_ID] == body.id
        assert r.headers[HEADER_KIND] == body.kind.value
        assert r.headers[HEADER_SIGNATURE].startswith("t=")

    got = first_occurrences(receiver.accepted())
    ids = [b["id"] for b in got]
    assert len(ids) == len(set(ids))
    run1 = f"session:{session_key}:run:1"
    blocks = [
        e
        for e in {e.event_id: e for e in events.events}.values()
        if e.kind == EventKind.BLOCK_REPLY and e.run_id == run1
    ]
    assert len(blocks) >= 2, "the reply should have been cut into several blocks"
    result1 = await client.wait_for_run(run1)
    result2 = await client.wait_for_run(f"session:{session_key}:run:2")
    expected_run1 = [b.event_id for b in blocks] + [f"{run1}/final_reply"]
    assert ids[: len(expected_run1)] == expected_run1
    assert [b["text"] for b in got[: len(blocks)]] == [b.text for b in blocks]
    final1 = got[len(blocks)]
    assert final1["kind"] == "final_reply" and final1["text"] == result1.reply
    assert final1["channel"] == "test" and final1["to"] == "room-1"

    rest = got[len(expected_run1) :]
    run2 = [b for b in rest if b["run_id"] == f"session:{session_key}:run:2"]
    run3 = [b for b in rest if b["run_id"] == f"session:{session_key}:run:3"]
    assert rest == run2 + run3  # runs in order
    assert [b["kind"] for b in run2] == ["block_reply", "final_reply"]
    assert run2[-1]["text"] == result2.reply == "two"
    assert run3[-1]["kind"] == "error" and run3[-1]["error_code"] == "aborted"
    assert run3[-1]["status"] == "aborted"
    assert third.message_seq == 3

    status = (await client.status(session_key)).webhook
    assert status is not None
    assert status.delivered >= len(got) and status.runs_failed == 0
    assert status.last_delivered_id == f"session:{session_key}:run:3/error"


async def _until_tool_start(client: AgentlaneClient, key: str) -> None:
    async for item in client.watch(key, 0):
        if item.event.kind == EventKind.TOOL_EXECUTION_START and item.event.run_id.endswith(
            ":run:3"
        ):
            return


async def test_bad_callback_urls_are_refused_with_a_reason(
    client: AgentlaneClient, session_key: str
) -> None:
    for url, words in [
        ("ftp://example.com/x", "http:// or https://"),
        ("https://user:pw@example.com/x", "user or password"),
        ("not a url", "whitespace"),
        ("http:///nohost", "no host"),
    ]:
        with pytest.raises((SendRejected, ValueError), match=words):
            await client.send(session_key, "hi", routing=Routing(callback_url=url))
    # A secret that is not stored: every delivery would fail for a day; refused at send.
    with pytest.raises(SendRejected, match="webhook secret 'no-such-ref' is not stored"):
        await client.send(
            session_key,
            "hi",
            routing=Routing(
                callback_url="https://example.com/x", callback_secret_ref="no-such-ref"
            ),
        )
    assert not await client.session_ever_existed(session_key)


async def test_targets_inside_the_network_are_refused_by_default(
    client: AgentlaneClient, session_key: str, receiver: Receiver
) -> None:
    # A literal address: refused when the message is sent, with what would allow it.
    for url in [
        "http://10.0.0.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:10.0.0.1]/",
        receiver.url,
    ]:
        with pytest.raises(SendRejected, match="allow_private"):
            await client.send(session_key, "hi", routing=Routing(callback_url=url))
    assert not await client.session_ever_existed(session_key)

    # A name that resolves inside the network passes the send (no lookup there) and is
    # refused where the worker connects: nothing reaches the receiver, and the status says why.
    url = f"http://localhost:{receiver.port}/hooks/agentlane"
    sent = await client.send_and_start(session_key, "say hi", routing=Routing(callback_url=url))
    await client.wait_for_run(sent.run_id or "")

    async def given_up() -> str:
        while True:
            hook = (await client.status(session_key)).webhook
            if hook is not None and hook.runs_failed:
                return hook.last_error or ""
            await asyncio.sleep(0.3)

    error = await asyncio.wait_for(given_up(), 60)
    assert "loopback" in error and "allow_private" in error, error
    assert receiver.got == []
