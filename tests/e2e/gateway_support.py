"""The gateway in tests: a real uvicorn server on a free port in a thread (its own event loop and
its own AgentlaneClient, as in production), tokens, and a small SSE reader."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import uvicorn

from agentlane.settings import Settings
from clients.gateway.app import create_app
from clients.gateway.auth import TokenStore


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class GatewayServer:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings.model_copy(update={"gateway_port": free_port()})
        config = uvicorn.Config(
            create_app(self.settings),
            host="127.0.0.1",
            port=self.settings.gateway_port,
            log_level="warning",
            timeout_graceful_shutdown=1,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.url = f"http://127.0.0.1:{self.settings.gateway_port}"
        self.tokens = TokenStore(self.settings.data_dir)

    def __enter__(self) -> GatewayServer:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the gateway did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *_: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)

    def token(self, **kwargs: Any) -> str:
        return self.tokens.create(**kwargs)[1]

    def http(self, token: str | None = None) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=90)


@dataclass
class SseEvent:
    event: str
    data: str
    id: str | None

    def json(self) -> Any:
        return json.loads(self.data)


@dataclass
class SseRead:
    events: list[SseEvent] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)
    status: int = 0
    last_id: str | None = None


async def read_sse(
    http: httpx.AsyncClient,
    path: str,
    stop: Callable[[SseEvent], bool],
    headers: dict[str, str] | None = None,
    timeout: float = 60,
    out: SseRead | None = None,
) -> SseRead:
    """Events until `stop(event)` is true (that event included); then the connection is
    dropped, as a client that goes away would."""
    out = out or SseRead()

    async def go() -> None:
        async with http.stream("GET", path, headers=headers or {}) as response:
            out.status = response.status_code
            if response.status_code != 200:
                await response.aread()
                out.events.append(SseEvent("http-error", response.text, None))
                return
            fields: dict[str, str] = {}
            data: list[str] = []
            async for line in response.aiter_lines():
                if line == "":
                    if data or fields:
                        ev = SseEvent(
                            fields.get("event", "message"), "\n".join(data), fields.get("id")
                        )
                        fields, data = {}, []
                        out.events.append(ev)
                        if ev.id is not None:
                            out.last_id = ev.id
                        if stop(ev):
                            return
                    continue
                if line.startswith(":"):
                    out.comments.append(line[1:].strip())
                    continue
                name, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if name == "data":
                    data.append(value)
                else:
                    fields[name] = value

    await asyncio.wait_for(go(), timeout)
    return out


def agent_end_of(run_id: str) -> Callable[[SseEvent], bool]:
    def stop(ev: SseEvent) -> bool:
        if ev.event != "agent_end":
            return False
        return bool(ev.json().get("run_id") == run_id)

    return stop
