"""The HTTP gateway under load (issue 11): first delta through SSE, 500 followers of one session,
webhook delivery.

    python bench/bench_gateway.py [--quick]      (from the repository root, with the venv's Python)

The gateway runs as its own process (`clients.gateway.app.serve`, uvicorn) on a free port, so
its RSS and CPU are its own; the model is the fake provider server (`tests/fakes/
provider_server.py`, an Anthropic model) with a scripted time to first token. Followers are raw
HTTP/1.0 sockets in this process (cheap to hold 500 of), parsing the SSE lines themselves.

(a) message POSTed to the gateway -> first `text_delta` at an SSE follower, minus the TTFT;
    beside it the Python client's figure in the same run (`client.send` + a `watch` subscriber).
(b) N followers of one session (connected at the live end before the message) through a run
    that streams a few hundred events (the worker publishes every 20 ms here): gateway RSS and
    CPU, event lag (the first follower's receipt -> each follower's; and the event's `ts` ->
    receipt), and the accepted poll updates added to the session's events workflow history.
    With the fan-out (500 and 50 followers), and the baseline without it (50: each connection
    polls the stream itself).
(c) webhooks: N sessions, one run each (`count to 600`, cut into block replies), all with a
    callback on a local receiver: deliveries per second and block_reply event `ts` -> receipt.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable as a plain script

import httpx  # noqa: E402
from temporalio.api.enums.v1 import EventType  # noqa: E402

from agentlane.ids import events_workflow_id  # noqa: E402
from agentlane.messages import Routing  # noqa: E402
from bench.bench_first_delta import write_config  # noqa: E402
from bench.common import (  # noqa: E402
    Figures,
    Stack,
    Table,
    Watcher,
    bench_stack,
    fresh_key,
    median,
    note,
    wait_idle,
    workflow_chain,
    workspace,
)
from clients.gateway.auth import TokenStore  # noqa: E402
from tests.fakes.provider_server import DEFAULT_ANTHROPIC_KEY, FakeProviderClient, spawn  # noqa: E402
from tests.fakes.scripts import Reply  # noqa: E402
from tests.harness import Deployment, devserver  # noqa: E402

QUICK = os.environ.get("AGENTLANE_BENCH_QUICK") == "1"
MODEL = "anthropic/claude-haiku-4-5"
TTFT_S = 0.2
TOKEN_S = 0.02
FIRST_DELTA_MESSAGES = 10
FOLLOWERS = 500
BASELINE_FOLLOWERS = 50
STREAM_CHUNKS = 300  # deltas the model sends in (b)
STREAM_DELAY_S = 0.03
WEBHOOK_RUNS = 20


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(q * len(ordered) + 0.5) - 1))]


# -- the gateway process ----------------------------------------------------------------------


class GatewayProcess:
    def __init__(self, dep: Deployment, fanout: bool) -> None:
        self.port = devserver.free_port()
        env = dict(dep.env())
        env.update(
            AGENTLANE_GATEWAY_PORT=str(self.port),
            AGENTLANE_GATEWAY_RATE_PER_S="100000",
            AGENTLANE_GATEWAY_RATE_BURST="100000",
            AGENTLANE_GATEWAY_KEEPALIVE_S="5",
            AGENTLANE_GATEWAY_FANOUT="1" if fanout else "0",
        )
        self.log = dep.data_dir / f"gateway-{self.port}.log"
        code = "import logging; from clients.gateway.app import serve; serve()"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", code],
                cwd=Path(__file__).resolve().parents[1],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.url = f"http://127.0.0.1:{self.port}"

    async def ready(self) -> None:
        async with httpx.AsyncClient() as http:
            for _ in range(300):
                try:
                    if (await http.get(self.url + "/healthz")).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.1)
        raise RuntimeError(f"gateway did not start: {self.log.read_text()[-2000:]}")

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


# -- a cheap SSE follower -----------------------------------------------------------------------


@dataclass
class Follower:
    """GET the events over a raw HTTP/1.0 socket; (offset, receipt monotonic, receipt wall, ts,
    kind) per event, until the first agent_end."""

    port: int
    path: str
    token: str
    connected: asyncio.Event = field(default_factory=asyncio.Event)
    got: list[tuple[int, float, float, float, str]] = field(default_factory=list)
    other: list[str] = field(default_factory=list)  # gap, lagging, closed, errors

    async def run(self) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port, limit=1 << 20)
        writer.write(
            f"GET {self.path} HTTP/1.0\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
            f"Authorization: Bearer {self.token}\r\n\r\n".encode()
        )
        await writer.drain()
        try:
            status = await reader.readline()
            if b" 200 " not in status:
                self.other.append(status.decode().strip())
                return
            while (await reader.readline()).strip():
                pass
            self.connected.set()
            kind, ident = "", None
            while True:
                line = await reader.readline()
                if not line:
                    self.other.append("eof")
                    return
                now, wall = time.monotonic(), time.time()
                text = line.decode().rstrip("\r\n")
                if text.startswith("event:"):
                    kind = text[6:].strip()
                elif text.startswith("id:"):
                    ident = int(text[3:].strip())
                elif text.startswith("data:"):
                    if ident is None:
                        self.other.append(kind)
                        if kind in ("lagging", "closed"):
                            return
                        continue
                    data = text[5:]
                    at = data.find('"ts":')
                    ts = float(data[at + 5 : data.find(",", at)]) if at >= 0 else 0.0
                    self.got.append((ident, now, wall, ts, kind))
                    if kind == "agent_end":
                        return
                elif not text:
                    kind, ident = "", None
        finally:
            self.connected.set()
            writer.close()


# -- (a) first delta ------------------------------------------------------------------------------


async def first_delta(
    stack: Stack, dep: Deployment, gw: GatewayProcess, token: str, fake: FakeProviderClient
) -> tuple[list[float], list[float]]:
    client = await stack.client(dep)
    reply = Reply(text="The quick brown fox jumps over the lazy dog.", ttft=TTFT_S, delay=TOKEN_S)
    via_gateway: list[float] = []
    via_client: list[float] = []
    key_gw, key_py = fresh_key("fd-gw"), fresh_key("fd-py")
    ws_py = workspace(dep, key_py)
    n = 3 if QUICK else FIRST_DELTA_MESSAGES
    async with httpx.AsyncClient(
        base_url=gw.url, headers={"Authorization": f"Bearer {token}"}, timeout=60
    ) as http:
        for i in range(n + 1):
            # Gateway: a follower at the live end, then the POST.
            await asyncio.to_thread(fake.script, reply)
            follower = None
            if i:
                follower = Follower(gw.port, f"/v1/sessions/{key_gw}/events", token)
                task = asyncio.create_task(follower.run())
                await follower.connected.wait()
            started = time.monotonic()
            r = await http.post(
                f"/v1/sessions/{key_gw}/messages",
                json={"text": "hello", "model": MODEL},
            )
            assert r.status_code == 200, r.text
            if follower is not None:
                await asyncio.wait_for(task, 60)
                first = next(g for g in follower.got if g[4] == "text_delta")
                via_gateway.append(first[1] - started - TTFT_S)
            await wait_idle(client, key_gw, runs=i + 1)

            # Python client: a watch subscriber at the live end, then send.
            await asyncio.to_thread(fake.script, reply)
            offset = await client.events_offset(key_py) if i else 0
            watcher = Watcher(client, key_py, offset).start()
            started = time.monotonic()
            await client.send(key_py, "hello", workspace=str(ws_py), model=MODEL)
            await watcher.wait()
            if i:
                via_client.append(watcher.text_arrivals()[0].at - started - TTFT_S)
            await wait_idle(client, key_py, runs=i + 1)
    return via_gateway, via_client


# -- (b) many followers -----------------------------------------------------------------------


@dataclass
class FollowResult:
    label: str
    followers: int
    events: int
    complete: int
    rss_before: float
    rss_peak: float
    cpu_s: float
    window_s: float
    lag_first: list[float]
    lag_ts: list[float]
    updates: int
    signals: int
    problems: list[str]


async def poll_counts(stack: Stack, dep: Deployment, key: str) -> tuple[int, int]:
    client = await stack.client(dep)
    chain = await workflow_chain(client.client, events_workflow_id(key))
    ups = sum(
        e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
        for e in chain.events
    )
    sig = sum(
        e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED for e in chain.events
    )
    return ups, sig


async def many_followers(
    stack: Stack,
    dep: Deployment,
    gw: GatewayProcess,
    token: str,
    fake: FakeProviderClient,
    count: int,
    label: str,
) -> FollowResult:
    client = await stack.client(dep)
    key = fresh_key("fan")
    ws = workspace(dep, key)
    await asyncio.to_thread(fake.script, Reply(text="ready", api="anthropic"))
    await client.send(key, "hello", workspace=str(ws), model=MODEL)
    await wait_idle(client, key, runs=1)
    await asyncio.sleep(0.5)
    chunks = 40 if QUICK else STREAM_CHUNKS
    text = "".join(f"w{i:04d} " for i in range(chunks))
    await asyncio.to_thread(
        fake.script, Reply(text=text, ttft=TTFT_S, delay=STREAM_DELAY_S, chunk_size=6)
    )
    rss_before = gw.rss_mb()
    followers = [Follower(gw.port, f"/v1/sessions/{key}/events", token) for _ in range(count)]
    tasks = [asyncio.create_task(f.run()) for f in followers]
    for f in followers:
        await asyncio.wait_for(f.connected.wait(), 60)
    await asyncio.sleep(0.5)
    ups0, sig0 = await poll_counts(stack, dep, key)
    cpu0, t0 = gw.cpu_seconds(), time.monotonic()
    peak = gw.rss_mb()
    await client.send(key, "stream", model=MODEL)
    all_done = asyncio.gather(*tasks, return_exceptions=True)
    while not all_done.done():
        peak = max(peak, gw.rss_mb())
        await asyncio.wait([all_done], timeout=0.2)
    cpu1, t1 = gw.cpu_seconds(), time.monotonic()
    await wait_idle(client, key, runs=2)
    ups1, sig1 = await poll_counts(stack, dep, key)
    problems = [f"{type(r).__name__}: {r}" for r in all_done.result() if isinstance(r, Exception)]
    first_at: dict[int, float] = {}
    for f in followers:
        for off, at, _, _, _ in f.got:
            first_at[off] = min(first_at.get(off, at), at)
        problems += [o for o in f.other if o != "closed"]
    want = sorted(first_at)
    lag_first: list[float] = []
    lag_ts: list[float] = []
    complete = 0
    for f in followers:
        offsets = [g[0] for g in f.got]
        complete += offsets == want
        for off, at, wall, ts, _ in f.got:
            lag_first.append(at - first_at[off])
            if ts:
                lag_ts.append(wall - ts)
    return FollowResult(
        label,
        count,
        len(want),
        complete,
        rss_before,
        peak,
        cpu1 - cpu0,
        t1 - t0,
        lag_first,
        lag_ts,
        ups1 - ups0,
        sig1 - sig0,
        sorted(set(problems))[:5],
    )


# -- (c) webhooks -------------------------------------------------------------------------------


class Receiver:
    def __init__(self) -> None:
        self.port = devserver.free_port()
        self.got: list[tuple[float, dict[str, Any]]] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                at = time.time()
                with receiver.lock:
                    receiver.got.append((at, json.loads(body)))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.port}/hooks"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


async def webhooks(stack: Stack, dep: Deployment) -> dict[str, float]:
    client = await stack.client(dep)
    # The receiver is on loopback: webhooks reach it only with the operator's leave, given in
    # the configuration each side reads: this client the data dir's, the worker the fake
    # provider's file (AGENTLANE_CONFIG) when it has one.
    for config in {dep.data_dir / "config.toml", Path(dep.extra_env.get("AGENTLANE_CONFIG", ""))}:
        if config.name:
            kept = config.read_text() if config.exists() else ""
            config.write_text(f"{kept}\n[webhooks]\nallow_private = true\n")
    receiver = Receiver()
    runs = 4 if QUICK else WEBHOOK_RUNS
    try:
        keys = [fresh_key("hook") for _ in range(runs)]
        routing = Routing(channel="bench", to="room", callback_url=receiver.url)
        started = time.time()
        await asyncio.gather(
            *(
                client.send(k, "count to 600", workspace=str(workspace(dep, k)), routing=routing)
                for k in keys
            )
        )

        async def delivered(key: str) -> None:
            while True:
                hook = (await client.status(key)).webhook
                if hook is not None and hook.runs_delivered >= 1 and not hook.pending_runs:
                    return
                await asyncio.sleep(0.3)

        await asyncio.wait_for(asyncio.gather(*(delivered(k) for k in keys)), 300)
        with receiver.lock:
            got = list(receiver.got)
    finally:
        receiver.stop()
    unique = {body["id"]: (at, body) for at, body in reversed(got)}  # first receipt of each id
    blocks = [at - body["ts"] for at, body in unique.values() if body["kind"] == "block_reply"]
    finals = sum(1 for _, body in unique.values() if body["kind"] == "final_reply")
    last = max(at for at, _ in got)
    return {
        "runs": float(runs),
        "posts": float(len(got)),
        "unique": float(len(unique)),
        "blocks": float(len(blocks)),
        "finals": float(finals),
        "window_s": last - started,
        "per_s": len(unique) / (last - started),
        "block_p50_ms": pct(blocks, 0.5) * 1000,
        "block_p99_ms": pct(blocks, 0.99) * 1000,
    }


# -- main -------------------------------------------------------------------------------------


async def main() -> None:
    figures = Figures()
    async with bench_stack("bench-gateway") as stack:
        proc, fake_url = spawn()
        stack.processes.append(proc)
        fake = FakeProviderClient(fake_url)
        dep = stack.deployment(
            ANTHROPIC_API_KEY=DEFAULT_ANTHROPIC_KEY,
            AGENTLANE_STREAM_BATCH_MS="20",
            AGENTLANE_OFFLINE_TOKEN_MS="5",
        )
        dep.extra_env["AGENTLANE_CONFIG"] = str(write_config(dep, fake_url))
        dep.start_worker()
        token = TokenStore(dep.data_dir).create(name="bench")[1]
        note(
            f"dev server {stack.server.address}; fake provider {fake_url}; TTFT "
            f"{TTFT_S * 1000:.0f} ms; worker publishes every 20 ms"
        )

        # (a) + (b) with the fan-out
        gw = GatewayProcess(dep, fanout=True)
        try:
            await gw.ready()
            via_gw, via_py = await first_delta(stack, dep, gw, token, fake)
            n_many = 100 if QUICK else FOLLOWERS
            n_base = 20 if QUICK else BASELINE_FOLLOWERS
            fan_many = await many_followers(stack, dep, gw, token, fake, n_many, "fan-out")
            fan_base = await many_followers(stack, dep, gw, token, fake, n_base, "fan-out")
        finally:
            gw.stop()
        gw = GatewayProcess(dep, fanout=False)
        try:
            await gw.ready()
            nofan = await many_followers(stack, dep, gw, token, fake, n_base, "no fan-out")
        finally:
            gw.stop()
        hooks = await webhooks(stack, dep)

    t = Table(
        "(a) message -> first text delta at the client, minus TTFT (ms)",
        ["path", "median", "p99", "samples"],
    )
    t.add(
        "gateway: POST /messages -> SSE text_delta",
        median(via_gw) * 1000,
        pct(via_gw, 0.99) * 1000,
        len(via_gw),
    )
    t.add(
        "python client: send + watch", median(via_py) * 1000, pct(via_py, 0.99) * 1000, len(via_py)
    )
    t.print()
    figures.add("gateway_first_delta_median", median(via_gw) * 1000, "ms")
    figures.add("gateway_first_delta_p99", pct(via_gw, 0.99) * 1000, "ms")
    figures.add("client_first_delta_median", median(via_py) * 1000, "ms")
    figures.add("client_first_delta_p99", pct(via_py, 0.99) * 1000, "ms")

    t = Table(
        "(b) SSE followers of one session through one streaming run",
        [
            "case",
            "followers",
            "events",
            "all events, in order",
            "RSS before/peak MB",
            "CPU s (per s of run)",
            "lag vs first follower p50/p99 ms",
            "ts -> receipt p50/p99 ms",
            "poll updates",
            "publish signals",
        ],
    )
    for r in (fan_many, fan_base, nofan):
        t.add(
            r.label,
            r.followers,
            r.events,
            f"{r.complete}/{r.followers}",
            f"{r.rss_before:.0f}/{r.rss_peak:.0f}",
            f"{r.cpu_s:.2f} ({r.cpu_s / r.window_s:.2f})",
            f"{pct(r.lag_first, 0.5) * 1000:.1f}/{pct(r.lag_first, 0.99) * 1000:.1f}",
            f"{pct(r.lag_ts, 0.5) * 1000:.0f}/{pct(r.lag_ts, 0.99) * 1000:.0f}",
            r.updates,
            r.signals,
        )
    t.print()
    for r in (fan_many, fan_base, nofan):
        if r.problems:
            note(f"{r.label} x{r.followers}: {r.problems}")
    for tag, r in (
        (f"fanout_{fan_many.followers}", fan_many),
        (f"fanout_{fan_base.followers}", fan_base),
        (f"nofanout_{nofan.followers}", nofan),
    ):
        figures.add(f"gateway_{tag}_complete", float(r.complete), f"of {r.followers}")
        figures.add(f"gateway_{tag}_rss_peak", r.rss_peak, "MB")
        figures.add(f"gateway_{tag}_rss_growth", r.rss_peak - r.rss_before, "MB")
        figures.add(f"gateway_{tag}_cpu", r.cpu_s, "s")
        figures.add(f"gateway_{tag}_lag_p50", pct(r.lag_first, 0.5) * 1000, "ms")
        figures.add(f"gateway_{tag}_lag_p99", pct(r.lag_first, 0.99) * 1000, "ms")
        figures.add(f"gateway_{tag}_ts_lag_p50", pct(r.lag_ts, 0.5) * 1000, "ms")
        figures.add(f"gateway_{tag}_ts_lag_p99", pct(r.lag_ts, 0.99) * 1000, "ms")
        figures.add(f"gateway_{tag}_poll_updates", float(r.updates), "events")
    if fan_base.updates:
        figures.add("ratio_poll_updates_nofanout_vs_fanout", nofan.updates / fan_base.updates, "x")

    t = Table(
        "(c) webhook delivery to a local receiver",
        [
            "runs",
            "POSTs",
            "unique ids",
            "block replies",
            "final replies",
            "s",
            "deliveries/s",
            "block ts -> receipt p50/p99 ms",
        ],
    )
    t.add(
        int(hooks["runs"]),
        int(hooks["posts"]),
        int(hooks["unique"]),
        int(hooks["blocks"]),
        int(hooks["finals"]),
        hooks["window_s"],
        hooks["per_s"],
        f"{hooks['block_p50_ms']:.0f}/{hooks['block_p99_ms']:.0f}",
    )
    t.print()
    figures.add("webhook_deliveries_per_s", hooks["per_s"], "/s")
    figures.add("webhook_block_latency_p50", hooks["block_p50_ms"], "ms")
    figures.add("webhook_block_latency_p99", hooks["block_p99_ms"], "ms")
    note(
        "(a) both paths at a follower connected at the live end before the message; the gateway's "
        "adds the HTTP POST and the SSE hop. (b) lag vs first follower: each follower's receipt "
        "minus the earliest receipt of that offset by any follower; ts -> receipt: wall clock "
        "from the event's publish time in the worker (includes the 20 ms publish batching and "
        "the poll). Poll updates: accepted updates added to the events workflow's history "
        "during the run. (c) deliveries/s: unique POSTs over first send -> last receipt (all "
        "runs at once); latency from the block_reply event's ts."
    )
    figures.print()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run (numbers mean little)")
    args = parser.parse_args()
    if args.quick:
        QUICK = True
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(130)
