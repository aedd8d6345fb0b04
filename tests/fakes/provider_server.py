"""A local HTTP server that speaks the Anthropic and OpenAI wire protocols, for tests.

Endpoints (what the official SDKs call):

* `POST /v1/messages`            Anthropic Messages (SSE when `"stream": true`)
* `POST /v1/chat/completions`    OpenAI Chat Completions (SSE when `"stream": true`)
* `POST /v1/responses`           OpenAI Responses (SSE when `"stream": true`)

Auth is checked like the real APIs: Anthropic wants `anthropic-version` and the key in
`x-api-key` (or `Authorization: Bearer`, which is how the anthropic SDK 2.x sends an API key);
OpenAI wants `Authorization: Bearer`. A wrong or missing key gets the provider's real 401 body.
An empty key list for a family turns its check off (a keyless OpenAI-compatible server).
`set_key_headers` changes where a family looks for the key (`"x-api-key"`, `"authorization"`
for Bearer), as a gateway in front of it would; `require_headers` makes every request need
given header values, like a gateway's own auth header, and a 401 for a wrong one echoes the value
it got (some gateways do). `reset` restores both to their defaults.

Each request takes the next scripted `Reply` meant for it from a FIFO (a reply may name the
endpoint, the key it was sent with and the model it asks for; the default short text when none
is left);
see `tests/fakes/scripts.py` for replies and faults. A request no scripted reply was meant for
can be answered by the chaos settings instead (a fault storm: random 429s and stalls, seeded).

A context window can be set (`tests/fakes/context_window.py`): each request's prompt is then
counted from its body, one over the window gets the provider's real overflow error (Anthropic's
"prompt is too long: N tokens > W maximum", OpenAI's `context_length_exceeded` bodies) before any
scripted reply is taken, and one that fits reports the count as its usage input tokens.
`Reply.overflow()` (a `Fault.named("context_overflow")`) forces one whatever the size.
A compaction's summariser request (recognised by its system prompt, `tests/fakes/summaries.py`)
takes only replies scripted with `purpose="summary"`, never chat replies; with none it gets an
automatic five-heading summary. Chaos leaves summariser requests alone.
Control API (no auth):

* `POST /_control/script`   `{"replies": [Reply...], "replace": false}`
* `POST /_control/chaos`    `{"rate_limit": 0.3, "stall": 0.02, "stall_seconds": 6,
                            "retry_after": null, "seed": 1, "only_api": null, "reply": null}`
                            (`scripts.Chaos`; `{}` turns it off)
* `POST /_control/context`  `{"window": 32000, "chars_per_token": 4}` (`{}` or a null window
                            turns it off)
* `POST /_control/reset`    clear the script, the chaos and context settings and the recorded
                            requests
* `GET  /_control/requests` `{"requests": [{"api", "path", "headers", "body", "index", "key",
                            "model", "purpose", "prompt_tokens", "at", "outcome"}...]}`
* `GET  /_control/log`      `{"log": [{"index", "api", "key", "model", "purpose",
                            "prompt_tokens", "at", "outcome"}...]}`: the same requests without
                            headers and bodies; `purpose` is "chat" or "summary",
                            `prompt_tokens` the counted prompt (at 4 characters a token when no
                            window is set), `at` the arrival time (epoch seconds), `outcome` one
                            of `scripts.Outcome`
* `POST /_control/keys`     `{"anthropic": [...], "openai": [...]}`
* `POST /_control/key_headers` `{"anthropic": ["x-api-key", "authorization"], "openai": [...]}`
* `POST /_control/require_headers` `{"headers": {NAME: VALUE}}`
* `GET  /_control/health`

In-process::

    with FakeProviderServer() as server:
        server.script(Reply(text="hi"))
        ...  # point an SDK at server.anthropic_base_url / server.openai_base_url

Out of process::

    python -m tests.fakes.provider_server --port 0   # prints "FAKE_PROVIDER_READY <url>"
    FakeProviderClient(url).script(Reply(text="hi"))
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.request
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal, Protocol

from tests.fakes import wire_anthropic, wire_openai
from tests.fakes.context_window import ContextWindow, overflow_fault, prompt_tokens
from tests.fakes.scripts import (
    Api,
    Chaos,
    ChaosDice,
    ErrorKind,
    Fault,
    Ids,
    Outcome,
    Part,
    Purpose,
    Reply,
    default_reply,
)
from tests.fakes.summaries import auto_summary, is_summary_request, last_user_text
from tests.fakes.tool_pairing import pairing_error

READY_LINE = "FAKE_PROVIDER_READY"
DEFAULT_ANTHROPIC_KEY = "test-anthropic-key"
DEFAULT_OPENAI_KEY = "test-openai-key"
# Where each family looks for the key, in order: `x-api-key`, or `authorization` (Bearer).
KeyHeader = Literal["x-api-key", "authorization"]
DEFAULT_KEY_HEADERS: dict[str, tuple[KeyHeader, ...]] = {
    "anthropic": ("x-api-key", "authorization"),
    "openai": ("authorization",),
}

_PATHS: dict[str, Api] = {
    "/v1/messages": "anthropic",
    "/v1/chat/completions": "openai-chat",
    "/v1/responses": "openai-responses",
}


class Renderer(Protocol):
    def start(self) -> list[bytes]: ...
    def part(self, part: Part) -> list[bytes]: ...
    def finish(self) -> list[bytes]: ...
    def stream_error(self, kind: ErrorKind, fault: Fault) -> list[bytes]: ...
    def message(self) -> dict[str, Any]: ...


@dataclass
class RecordedRequest:
    api: str
    path: str
    headers: dict[str, str]
    body: Any
    at: float = field(default_factory=time.time)
    index: int = 0  # arrival order, from 0 (since the last reset)
    key: str | None = None  # the key the request was sent with
    model: str | None = None  # the wire `model` field
    outcome: Outcome | None = None  # None until the server decided
    purpose: Purpose = "chat"
    prompt_tokens: int | None = None  # None for a body that is not a JSON object

    def log_entry(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "api": self.api,
            "key": self.key,
            "model": self.model,
            "purpose": self.purpose,
            "prompt_tokens": self.prompt_tokens,
            "at": self.at,
            "outcome": self.outcome,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "api": self.api,
            "path": self.path,
            "headers": self.headers,
            "body": self.body,
            **self.log_entry(),
        }


class _State:
    def __init__(self, anthropic_keys: Sequence[str], openai_keys: Sequence[str]) -> None:
        self.lock = threading.Lock()
        self.replies: deque[Reply] = deque()
        self.requests: list[RecordedRequest] = []
        self.keys: dict[str, set[str]] = {
            "anthropic": set(anthropic_keys),
            "openai": set(openai_keys),
        }
        self.key_headers = dict(DEFAULT_KEY_HEADERS)
        # Lower-cased header name -> the value every request must carry.
        self.required: dict[str, str] = {}
        self.ids = Ids()
        self.dice: ChaosDice | None = None
        self.context = ContextWindow()
        # Set on stop/reset so stalled handlers wake up instead of holding the server.
        self.wake = threading.Event()

    def take(self, api: Api, key: str | None = None, model: str | None = None) -> Reply:
        """The first scripted chat reply meant for this endpoint, key and model (FIFO)."""
        reply, _ = self.choose(api, key, model)
        assert reply is not None, "a chat request always gets a reply"
        return reply

    def choose(
        self, api: Api, key: str | None, model: str | None, purpose: Purpose = "chat"
    ) -> tuple[Reply | None, Outcome]:
        """The first scripted reply meant for the request, else what the chaos settings roll
        (only chat requests with nothing scripted for them draw, so a script stays exact).
        None for a summariser request nothing was scripted for: it gets the automatic
        summary."""
        with self.lock:
            for reply in self.replies:
                if reply.matches(api, key, model, purpose):
                    self.replies.remove(reply)
                    return reply, "overflow" if reply.is_overflow else "scripted"
            if purpose == "summary":
                return None, "summary"
            if self.dice is not None and self.dice.chaos.applies(api):
                return self.dice.roll()
        return default_reply(), "ok"

    def record(self, request: RecordedRequest) -> RecordedRequest:
        with self.lock:
            request.index = len(self.requests)
            self.requests.append(request)
        return request

    def decided(self, request: RecordedRequest, outcome: Outcome) -> None:
        with self.lock:
            request.outcome = outcome

    def set_chaos(self, chaos: Chaos | None) -> None:
        with self.lock:
            self.dice = ChaosDice(chaos) if chaos is not None else None

    def clear(self) -> None:
        """Script, chaos, context window, log and gateway settings back to their defaults;
        stalled handlers of the previous test woken."""
        with self.lock:
            self.replies.clear()
            self.requests.clear()
            self.dice = None
            self.context = ContextWindow()
            self.key_headers = dict(DEFAULT_KEY_HEADERS)
            self.required = {}
        self.wake.set()
        self.wake = threading.Event()


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that drops its connection (an SDK giving up on a stalled stream, a closed
        # keep-alive socket) is normal traffic, not a server error worth a traceback.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _OneRequestPerConnection(BaseHTTPRequestHandler):
    def end_headers(self) -> None:
        self.send_header("Connection", "close")
        self.close_connection = True
        super().end_headers()


class Door:
    """A port of the fake server that refuses connections (ECONNREFUSED: a socket bound to it,
    not listening, holds the port) until `open`, then serves the same state; `close` refuses
    again. A provider restarting, or not up yet, as a client sees it."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], host: str) -> None:
        # One request a connection: a pooled keep-alive connection would outlive `close`.
        handler = type("DoorHandler", (_OneRequestPerConnection, handler), {})
        self._server = _Server((host, 0), handler, bind_and_activate=False)
        self._server.daemon_threads = True
        self._server.allow_reuse_address = True
        self._server.server_bind()
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def is_open(self) -> bool:
        return self._thread is not None

    def open(self) -> None:
        if self._thread is not None:
            return
        self._server.server_activate()
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="fake-provider-door", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        """Refuse again: the listening socket goes, a bound one holds the port."""
        if self._thread is None:
            return
        self.shut()
        handler, address = self._server.RequestHandlerClass, self._server.server_address
        self._server = _Server(address, handler, bind_and_activate=False)
        self._server.daemon_threads = True
        self._server.allow_reuse_address = True
        self._server.server_bind()

    def shut(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._server.server_close()


class FakeProviderServer:
    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        anthropic_keys: Sequence[str] = (DEFAULT_ANTHROPIC_KEY,),
        openai_keys: Sequence[str] = (DEFAULT_OPENAI_KEY,),
    ) -> None:
        self.state = _State(anthropic_keys, openai_keys)
        handler = type("BoundHandler", (_Handler,), {"state": self.state})
        self._httpd = _Server((host, port), handler)
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None
        self._doors: list[Door] = []

    # --- lifecycle -------------------------------------------------------------------------

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def anthropic_base_url(self) -> str:
        return self.base_url  # the SDK appends /v1/messages

    @property
    def openai_base_url(self) -> str:
        return self.base_url + "/v1"  # the SDK appends /chat/completions, /responses

    def start(self) -> FakeProviderServer:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="fake-provider", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self.state.wake.set()
        for door in self._doors:
            door.shut()
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def serve_forever(self) -> None:
        self._httpd.serve_forever()

    def __enter__(self) -> FakeProviderServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def door(self) -> Door:
        """A second address for this server that refuses connections until opened (see
        `Door`); closed with the server."""
        door = Door(self._httpd.RequestHandlerClass, self._httpd.server_address[0])
        self._doors.append(door)
        return door

    # --- scripting -------------------------------------------------------------------------

    def script(self, *replies: Reply, replace: bool = False) -> None:
        with self.state.lock:
            if replace:
                self.state.replies.clear()
            self.state.replies.extend(replies)

    def reset(self) -> None:
        self.state.clear()

    def chaos(self, chaos: Chaos | None = None, **settings: Any) -> None:
        """Turn the fault storm on (`Chaos` or its fields as keywords); rates of 0, or no
        argument, turn it off."""
        if chaos is None and settings:
            chaos = Chaos.model_validate(settings)
        self.state.set_chaos(chaos)

    def context_window(self, window: int | None, chars_per_token: float = 4.0) -> None:
        """Reject prompts over `window` tokens (counted at `chars_per_token` characters a token)
        with the provider's overflow error; None turns the limit off."""
        setting = ContextWindow(window=window, chars_per_token=chars_per_token)
        with self.state.lock:
            self.state.context = setting

    def requests(self, api: str | None = None) -> list[RecordedRequest]:
        with self.state.lock:
            return [r for r in self.state.requests if api is None or r.api == api]

    def log(self) -> list[dict[str, Any]]:
        """Every request since the last reset: index, api, key, model, arrival time, outcome."""
        with self.state.lock:
            return [r.log_entry() for r in self.state.requests]

    def pending(self) -> int:
        with self.state.lock:
            return len(self.state.replies)

    def set_keys(
        self, *, anthropic: Iterable[str] | None = None, openai: Iterable[str] | None = None
    ) -> None:
        with self.state.lock:
            if anthropic is not None:
                self.state.keys["anthropic"] = set(anthropic)
            if openai is not None:
                self.state.keys["openai"] = set(openai)

    def set_key_headers(
        self,
        *,
        anthropic: Sequence[KeyHeader] | None = None,
        openai: Sequence[KeyHeader] | None = None,
    ) -> None:
        with self.state.lock:
            if anthropic is not None:
                self.state.key_headers["anthropic"] = tuple(anthropic)
            if openai is not None:
                self.state.key_headers["openai"] = tuple(openai)

    def require_headers(self, headers: dict[str, str]) -> None:
        with self.state.lock:
            self.state.required = {name.lower(): value for name, value in headers.items()}


class _Handler(BaseHTTPRequestHandler):
    state: _State
    protocol_version = "HTTP/1.1"
    server_version = "fake-provider/1"
    # Headers and body go out as separate writes; with Nagle on, the body waits for the
    # client's delayed ACK (40 ms a request on Linux), which a storm of requests would measure.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        return

    # --- routing ---------------------------------------------------------------------------

    def do_GET(self) -> None:
        if self.path == "/_control/requests":
            with self.state.lock:
                body = {"requests": [r.to_dict() for r in self.state.requests]}
            self._json(200, body)
        elif self.path == "/_control/log":
            with self.state.lock:
                body = {"log": [r.log_entry() for r in self.state.requests]}
            self._json(200, body)
        elif self.path == "/_control/health":
            self._json(200, {"ok": True})
        else:
            self._json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        raw = self._read_body()
        if self.path.startswith("/_control/"):
            self._control(raw)
            return
        api = _PATHS.get(self.path.split("?", 1)[0])
        try:
            body = json.loads(raw.decode("utf-8")) if raw else {}
        except ValueError:
            body = None
        if api is None:
            self._json(404, {"error": {"message": f"Invalid URL (POST {self.path})"}})
            return
        model = body.get("model") if isinstance(body, dict) else None
        key = self._sent_key(api)
        with self.state.lock:
            context = self.state.context
        fields = body if isinstance(body, dict) else None
        purpose: Purpose = "summary" if fields and is_summary_request(fields) else "chat"
        recorded = self.state.record(
            RecordedRequest(
                api,
                self.path,
                {k.lower(): v for k, v in self.headers.items()},
                body,
                key=key,
                model=model if isinstance(model, str) else None,
                purpose=purpose,
                prompt_tokens=None
                if fields is None
                else prompt_tokens(fields, context.chars_per_token),
            )
        )
        if not isinstance(body, dict):
            self.state.decided(recorded, "rejected")
            self._api_error(api, Fault.named("bad_request", message="request body is not JSON"), {})
            return
        if not self._gateway_passed(api):
            return
        if not self._authorized(api, body):
            self.state.decided(recorded, "rejected")
            return
        self._answer(api, body, recorded, context.window)

    def _answer(
        self, api: Api, body: dict[str, Any], recorded: RecordedRequest, window: int | None
    ) -> None:
        """An authorised request's answer: the overflow error, a scripted reply, the automatic
        summary, or what chaos rolls."""
        counted = recorded.prompt_tokens or 0
        unpaired = pairing_error(api, body)
        if unpaired is not None:
            # Checked before anything else, as the real APIs do: a 400 nothing is scripted for.
            self.state.decided(recorded, "rejected")
            self._api_error(api, Fault.named("bad_request", message=unpaired), body)
            return
        if window is not None and counted > window:
            # Before the script: the provider never got to answer, so the reply stays queued.
            self.state.decided(recorded, "overflow")
            self._api_error(api, overflow_fault(None, counted, window), body)
            return
        reply, outcome = self.state.choose(api, recorded.key, recorded.model, recorded.purpose)
        if reply is None:
            reply = Reply(text=auto_summary(last_user_text(body)), purpose="summary")
        self.state.decided(recorded, outcome)
        if reply.is_overflow and reply.fault is not None:
            reply = reply.model_copy(update={"fault": overflow_fault(reply.fault, counted, window)})
        # With a window the counted prompt is the provider's truth; without, the old rough
        # whole-body estimate stays (tests written before windows existed rely on it).
        self._reply(api, body, reply, counted if window is not None else None)

    def _sent_key(self, api: Api) -> str | None:
        family = "anthropic" if api == "anthropic" else "openai"
        with self.state.lock:
            places = self.state.key_headers[family]
        for place in places:
            if place == "x-api-key":
                key = self.headers.get("x-api-key")
            else:
                bearer = self.headers.get("authorization", "")
                key = bearer[7:].strip() if bearer.lower().startswith("bearer ") else None
            if key:
                return key
        return None

    def _control(self, raw: bytes) -> None:
        data = json.loads(raw.decode("utf-8")) if raw else {}
        if self.path == "/_control/script":
            replies = [Reply.model_validate(r) for r in data.get("replies", [])]
            with self.state.lock:
                if data.get("replace"):
                    self.state.replies.clear()
                self.state.replies.extend(replies)
            self._json(200, {"queued": len(replies)})
        elif self.path == "/_control/chaos":
            try:
                chaos = Chaos.model_validate(data)
            except ValueError as err:
                self._json(400, {"error": {"message": str(err)}})
                return
            self.state.set_chaos(chaos)
            self._json(200, {"ok": True, "chaos": chaos.model_dump(mode="json")})
        elif self.path == "/_control/context":
            try:
                context = ContextWindow.model_validate(data)
            except ValueError as err:
                self._json(400, {"error": {"message": str(err)}})
                return
            with self.state.lock:
                self.state.context = context
            self._json(200, {"ok": True, "context": context.model_dump(mode="json")})
        elif self.path == "/_control/reset":
            self.state.clear()
            self._json(200, {"ok": True})
        elif self.path == "/_control/keys":
            with self.state.lock:
                for family in ("anthropic", "openai"):
                    if family in data:
                        self.state.keys[family] = set(data[family])
            self._json(200, {"ok": True})
        elif self.path == "/_control/key_headers":
            with self.state.lock:
                for family in ("anthropic", "openai"):
                    if family in data:
                        self.state.key_headers[family] = tuple(data[family])
            self._json(200, {"ok": True})
        elif self.path == "/_control/require_headers":
            with self.state.lock:
                self.state.required = {k.lower(): v for k, v in data["headers"].items()}
            self._json(200, {"ok": True})
        else:
            self._json(404, {"error": {"message": f"no control route {self.path}"}})

    # --- auth ------------------------------------------------------------------------------

    def _gateway_passed(self, api: Api) -> bool:
        """A gateway's own header check, before the provider sees the request."""
        with self.state.lock:
            required = dict(self.state.required)
        for name, expected in required.items():
            got = self.headers.get(name)
            if got == expected:
                continue
            message = f"missing {name} header" if got is None else f"invalid {name}: {got}"
            if api == "anthropic":
                payload: dict[str, Any] = {
                    "type": "error",
                    "error": {"type": "authentication_error", "message": message},
                }
            else:
                payload = {
                    "error": {
                        "message": message,
                        "type": "invalid_request_error",
                        "code": "gateway_unauthorized",
                    }
                }
            self._json(401, payload, self._request_id_headers(api))
            return False
        return True

    def _authorized(self, api: Api, body: dict[str, Any]) -> bool:
        family = "anthropic" if api == "anthropic" else "openai"
        with self.state.lock:
            valid = set(self.state.keys[family])
        key = self._sent_key(api)
        if family == "anthropic":
            if not self.headers.get("anthropic-version"):
                fault = Fault.named("bad_request", message="anthropic-version: header is required")
                self._api_error(api, fault, body)
                return False
            if valid and key is None:
                self._api_error(
                    api, Fault.named("auth", message="x-api-key header is required"), body
                )
                return False
        if valid and key not in valid:
            self._api_error(api, Fault.named("auth"), body, key=key)
            return False
        return True

    # --- replies ---------------------------------------------------------------------------

    def _reply(
        self, api: Api, body: dict[str, Any], reply: Reply, input_tokens: int | None = None
    ) -> None:
        fault = reply.fault
        if fault is not None and fault.kind == "http":
            self._api_error(api, fault, body)
            return
        if fault is not None and fault.kind == "reset":
            self._reset_connection()
            return
        renderer = self._renderer(api, body, reply, input_tokens)
        if not body.get("stream") or reply.ignore_stream:
            if fault is not None and fault.kind == "stall":
                # No stream to stall in the middle of: the whole answer is late instead.
                self.state.wake.wait(fault.seconds)
            if reply.ttft:
                self.state.wake.wait(reply.ttft)
            self._json(200, renderer.message(), self._request_id_headers(api))
            return
        self._stream(renderer, reply)

    def _renderer(
        self, api: Api, body: dict[str, Any], reply: Reply, input_tokens: int | None
    ) -> Renderer:
        model = str(body.get("model", "fake-model"))
        if input_tokens is None:
            input_tokens = max(1, len(json.dumps(body)) // 4)
        ids = self.state.ids
        if api == "anthropic":
            return wire_anthropic.AnthropicRenderer(
                reply, model=model, input_tokens=input_tokens, ids=ids
            )
        if api == "openai-chat":
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return wire_openai.ChatRenderer(
                reply, model=model, input_tokens=input_tokens, ids=ids, include_usage=include_usage
            )
        encrypted = "reasoning.encrypted_content" in (body.get("include") or [])
        return wire_openai.ResponsesRenderer(
            reply, model=model, input_tokens=input_tokens, ids=ids, encrypted=encrypted
        )

    def _stream(self, renderer: Renderer, reply: Reply) -> None:
        fault = reply.fault
        wake = self.state.wake
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            self._chunks(renderer.start())
            sent = 0
            first = True
            for part in reply.parts():
                if part.is_delta:
                    if fault is not None and sent == fault.after_deltas:
                        if self._strike(fault, renderer, wake):
                            return
                        fault = None
                    wait = reply.ttft if first else reply.delay
                    if wait:
                        wake.wait(wait)
                    first = False
                    sent += 1
                self._chunks(renderer.part(part))
            if fault is not None and self._strike(fault, renderer, wake):
                return
            self._chunks(renderer.finish())
            self._end_chunks()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.close_connection = True

    def _strike(self, fault: Fault, renderer: Renderer, wake: threading.Event) -> bool:
        """Apply a mid-stream fault; True when the stream is over."""
        if fault.kind == "stall":
            wake.wait(fault.seconds)
            return False
        if fault.kind == "drop":
            self.close_connection = True
            # No terminating chunk: the client sees an incomplete chunked body.
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            return True
        if fault.kind == "garbage":
            # Named like a real event so every SDK tries to parse it.
            self._chunks([b"event: content_block_delta\ndata: {not json\n\n"])
            self._end_chunks()
            return True
        if fault.kind == "truncate":
            self._end_chunks()
            return True
        if fault.kind == "stream_error":
            _, kind = fault.resolved()
            self._chunks(renderer.stream_error(kind, fault))
            self._end_chunks()
            return True
        return False

    def _reset_connection(self) -> None:
        """Close with a TCP RST (linger on, zero timeout): the client reads ECONNRESET."""
        self.close_connection = True
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()

    def _chunks(self, events: list[bytes]) -> None:
        for data in events:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _end_chunks(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    # --- errors ----------------------------------------------------------------------------

    def _api_error(
        self, api: Api, fault: Fault, body: dict[str, Any], *, key: str | None = None
    ) -> None:
        status, kind = fault.resolved()
        model = str(body.get("model", "fake-model"))
        headers = self._request_id_headers(api)
        if fault.retry_after is not None:
            headers["retry-after"] = _number(fault.retry_after)
        if api == "anthropic":
            payload = wire_anthropic.error_body(
                kind, fault, model=model, request_id=headers["request-id"]
            )
            if kind == "rate_limit":
                headers["anthropic-ratelimit-input-tokens-remaining"] = "0"
        else:
            if key is None:
                bearer = self.headers.get("authorization", "")
                key = bearer[7:].strip() if bearer.lower().startswith("bearer ") else None
            effort = body.get("reasoning_effort") or (body.get("reasoning") or {}).get("effort")
            payload = wire_openai.error_body(
                kind, fault, model=model, api=api, key=key, effort=effort
            )
            if kind == "rate_limit":
                headers["x-ratelimit-remaining-tokens"] = "0"
        self._json(status, payload, headers)

    def _request_id_headers(self, api: Api) -> dict[str, str]:
        rid = self.state.ids.next("req_fake")
        return {"request-id": rid} if api == "anthropic" else {"x-request-id": rid}

    # --- plumbing --------------------------------------------------------------------------

    def _read_body(self) -> bytes:
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


class FakeProviderClient:
    """Drives a fake server in another process through its control API."""

    def __init__(self, base_url: str, timeout: float = 10.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout

    def script(self, *replies: Reply, replace: bool = False) -> int:
        payload = {"replies": [r.model_dump(mode="json") for r in replies], "replace": replace}
        return int(self._call("POST", "/_control/script", payload)["queued"])

    def reset(self) -> None:
        self._call("POST", "/_control/reset", {})

    def chaos(self, chaos: Chaos | None = None, **settings: Any) -> Chaos:
        """As `FakeProviderServer.chaos`; returns the settings the server took."""
        payload = (chaos or Chaos.model_validate(settings)).model_dump(mode="json")
        return Chaos.model_validate(self._call("POST", "/_control/chaos", payload)["chaos"])

    def context_window(self, window: int | None, chars_per_token: float = 4.0) -> ContextWindow:
        """As `FakeProviderServer.context_window`; returns the settings the server took."""
        payload = {"window": window, "chars_per_token": chars_per_token}
        took = self._call("POST", "/_control/context", payload)["context"]
        return ContextWindow.model_validate(took)

    def requests(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "/_control/requests")["requests"])

    def log(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "/_control/log")["log"])

    def set_keys(
        self, *, anthropic: Iterable[str] | None = None, openai: Iterable[str] | None = None
    ) -> None:
        payload: dict[str, list[str]] = {}
        if anthropic is not None:
            payload["anthropic"] = list(anthropic)
        if openai is not None:
            payload["openai"] = list(openai)
        self._call("POST", "/_control/keys", payload)

    def set_key_headers(
        self,
        *,
        anthropic: Sequence[KeyHeader] | None = None,
        openai: Sequence[KeyHeader] | None = None,
    ) -> None:
        payload: dict[str, list[str]] = {}
        if anthropic is not None:
            payload["anthropic"] = list(anthropic)
        if openai is not None:
            payload["openai"] = list(openai)
        self._call("POST", "/_control/key_headers", payload)

    def require_headers(self, headers: dict[str, str]) -> None:
        self._call("POST", "/_control/require_headers", {"headers": headers})

    def healthy(self) -> bool:
        try:
            return bool(self._call("GET", "/_control/health").get("ok"))
        except OSError:
            return False

    def _call(self, method: str, path: str, payload: Any = None) -> Any:
        data = json.dumps(payload).encode() if payload is not None else None
        request = urllib.request.Request(
            self.base_url + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=self.timeout) as response:
            return json.loads(response.read().decode("utf-8"))


def spawn(
    port: int = 0, *, extra_args: Sequence[str] = (), timeout: float = 15.0
) -> tuple[subprocess.Popen[str], str]:
    """Start the server as a child process; returns it and its base URL once it is ready."""
    repo_root = Path(__file__).resolve().parents[2]
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.provider_server", "--port", str(port), *extra_args],
        stdout=subprocess.PIPE,
        text=True,
        cwd=repo_root,
    )
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if line.startswith(READY_LINE):
            return process, line.split()[1]
        if not line and process.poll() is not None:
            break
    process.kill()
    raise RuntimeError("fake provider server did not start")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Fake Anthropic/OpenAI server for tests")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--anthropic-key", action="append", dest="anthropic_keys")
    parser.add_argument("--openai-key", action="append", dest="openai_keys")
    parser.add_argument("--no-auth", action="store_true", help="accept any key or none")
    args = parser.parse_args(argv)
    anthropic_keys = [] if args.no_auth else (args.anthropic_keys or [DEFAULT_ANTHROPIC_KEY])
    openai_keys = [] if args.no_auth else (args.openai_keys or [DEFAULT_OPENAI_KEY])
    server = FakeProviderServer(
        args.host, args.port, anthropic_keys=anthropic_keys, openai_keys=openai_keys
    )

    def _terminate(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _terminate)
    print(f"{READY_LINE} http://{args.host}:{server.port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.state.wake.set()
        server._httpd.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
