"""What a test tells the fake provider server to answer: scripted replies and faults.

A `Reply` is JSON-serialisable (pydantic), so the same script works in-process and over HTTP
(`POST /_control/script`). A reply is cut into *parts* (thinking chunks, text chunks, tool-call
starts and argument fragments); each wire renderer turns parts into its protocol's events, and
faults that strike mid-stream count the delta parts already sent.
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

Api = Literal["anthropic", "openai-chat", "openai-responses"]
# What a request is for: a compaction's summariser call, or anything else.
Purpose = Literal["chat", "summary"]
ErrorKind = Literal[
    "auth",
    "permission",
    "billing",
    "quota",
    "rate_limit",
    "server",
    "unavailable",
    "overloaded",
    "context_overflow",
    "thinking_unsupported",
    "not_found",
    "bad_request",
]

_STATUS_KINDS: dict[int, ErrorKind] = {
    400: "bad_request",
    401: "auth",
    402: "billing",
    403: "permission",
    404: "not_found",
    429: "rate_limit",
    500: "server",
    503: "unavailable",
    529: "overloaded",
}
_KIND_STATUS: dict[str, int] = {
    "auth": 401,
    "permission": 403,
    "billing": 402,
    "quota": 429,
    "rate_limit": 429,
    "server": 500,
    "unavailable": 503,
    "overloaded": 529,
    "context_overflow": 400,
    "thinking_unsupported": 400,
    "not_found": 404,
    "bad_request": 400,
}


# A context_overflow fault's window when neither the fault nor the server's setting names one.
DEFAULT_LIMIT_TOKENS = 200_000


class Fault(BaseModel):
    """`http`: an error response instead of a reply. `stall`: stop sending for `seconds` after
    `after_deltas` deltas. `drop`: close the connection mid-stream. `truncate`: end the body
    cleanly mid-stream, without the final events. `garbage`: an event that is not JSON.
    `stream_error`: an error event inside a 200 stream. `reset`: read the request, then reset
    the connection (TCP RST) before any answer."""

    kind: Literal["http", "stall", "drop", "truncate", "garbage", "stream_error", "reset"] = "http"
    status: int | None = None
    error: ErrorKind | None = None
    message: str | None = None
    retry_after: float | None = None
    after_deltas: int = 0
    seconds: float = 0.0
    # context_overflow figures (None: the counted prompt and the window when one is set, see
    # `figures`); thinking_unsupported's accepted values (OpenAI's wording).
    prompt_tokens: int | None = None
    limit_tokens: int | None = None
    supported: list[str] = Field(default_factory=lambda: ["low", "medium", "high"])

    def figures(self) -> tuple[int, int]:
        """(prompt, limit) for an overflow message. Without figures: a 200 000 window, and a
        prompt over whatever limit applies, so a forced overflow never reads "40 tokens > 32000
        maximum"."""
        limit = self.limit_tokens or DEFAULT_LIMIT_TOKENS
        return self.prompt_tokens or limit + max(1, limit // 16), limit

    def resolved(self) -> tuple[int, ErrorKind]:
        if self.error is not None:
            return (self.status or _KIND_STATUS[self.error]), self.error
        status = self.status or 500
        return status, _STATUS_KINDS.get(status, "server")

    # Shorthands for tests.
    @classmethod
    def http(cls, status: int, **kw: Any) -> Fault:
        return cls(kind="http", status=status, **kw)

    @classmethod
    def named(cls, error: ErrorKind, **kw: Any) -> Fault:
        return cls(kind="http", error=error, **kw)

    @classmethod
    def stall(cls, seconds: float, after_deltas: int = 1) -> Fault:
        return cls(kind="stall", seconds=seconds, after_deltas=after_deltas)

    @classmethod
    def drop(cls, after_deltas: int = 1) -> Fault:
        return cls(kind="drop", after_deltas=after_deltas)

    @classmethod
    def reset(cls) -> Fault:
        return cls(kind="reset")

    @classmethod
    def truncate(cls, after_deltas: int = 1) -> Fault:
        return cls(kind="truncate", after_deltas=after_deltas)

    @classmethod
    def garbage(cls, after_deltas: int = 1) -> Fault:
        return cls(kind="garbage", after_deltas=after_deltas)

    @classmethod
    def stream_error(cls, error: ErrorKind = "overloaded", after_deltas: int = 1) -> Fault:
        return cls(kind="stream_error", error=error, after_deltas=after_deltas)


class ScriptedToolCall(BaseModel):
    name: str
    # A dict is sent as its JSON; a string is sent verbatim (to script malformed arguments).
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    id: str | None = None
    chunk_size: int = 7

    def arguments_json(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, separators=(",", ":"))


class ScriptedUsage(BaseModel):
    input: int | None = None  # None: estimated from the request size
    output: int | None = None  # None: estimated from the reply size
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0


class Reply(BaseModel):
    text: str = ""
    thinking: str = ""
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list)
    usage: ScriptedUsage = Field(default_factory=ScriptedUsage)
    # Neutral words: end_turn, tool_use, max_tokens, refusal; None picks end_turn or tool_use.
    stop_reason: str | None = None
    ttft: float = 0.0  # seconds before the first delta
    delay: float = 0.0  # seconds between deltas
    chunk_size: int = 6  # characters per text / thinking delta
    fault: Fault | None = None
    # Only this endpoint takes the reply from the queue (None: any endpoint).
    api: Api | None = None
    # Only a request made with this key (a profile's key) takes the reply (None: any key).
    key: str | None = None
    # Only a request for this model id (the wire `model` field) takes the reply (None: any).
    model: str | None = None
    # "summary": only a compaction's summariser request takes the reply (one no reply targets
    # gets an automatic summary); "chat": only other requests do.
    purpose: Purpose = "chat"
    # Answer with the whole message as JSON even when the request asked for a stream, as some
    # servers do when tools are given.
    ignore_stream: bool = False

    def matches(
        self, api: Api, key: str | None, model: str | None, purpose: Purpose = "chat"
    ) -> bool:
        return (
            self.purpose == purpose
            and (self.api is None or self.api == api)
            and (self.key is None or self.key == key)
            and (self.model is None or self.model == model)
        )

    @classmethod
    def error(
        cls,
        fault: Fault,
        api: Api | None = None,
        *,
        key: str | None = None,
        model: str | None = None,
    ) -> Reply:
        return cls(fault=fault, api=api, key=key, model=model)

    @classmethod
    def overflow(
        cls,
        api: Api | None = None,
        *,
        key: str | None = None,
        model: str | None = None,
        purpose: Purpose = "chat",
        prompt_tokens: int | None = None,
        limit_tokens: int | None = None,
    ) -> Reply:
        """The provider's context-overflow error whatever the request's size. Unset figures
        are the window (when one is set) and the counted prompt when over it, else see
        `Fault.figures`."""
        fault = Fault.named(
            "context_overflow", prompt_tokens=prompt_tokens, limit_tokens=limit_tokens
        )
        return cls(fault=fault, api=api, key=key, model=model, purpose=purpose)

    @property
    def is_overflow(self) -> bool:
        return (
            self.fault is not None
            and self.fault.kind == "http"
            and self.fault.error == "context_overflow"
        )

    def stop(self) -> str:
        if self.stop_reason:
            return self.stop_reason
        return "tool_use" if self.tool_calls else "end_turn"

    def parts(self) -> Iterator[Part]:
        for piece in _chunks(self.thinking, self.chunk_size):
            yield Part("thinking", piece)
        for piece in _chunks(self.text, self.chunk_size):
            yield Part("text", piece)
        for index, call in enumerate(self.tool_calls):
            yield Part("tool_start", "", index)
            for piece in _chunks(call.arguments_json(), call.chunk_size):
                yield Part("tool_args", piece, index)

    def output_tokens(self) -> int:
        if self.usage.output is not None:
            return self.usage.output
        size = len(self.text) + len(self.thinking)
        size += sum(len(c.arguments_json()) + len(c.name) for c in self.tool_calls)
        return max(1, size // 4)


DEFAULT_REPLY_TEXT = "Hello from the fake provider."


def default_reply() -> Reply:
    return Reply(text=DEFAULT_REPLY_TEXT)


# What the server did with one request (its log): a chaos outcome (`ok`, `429`, `stall`), a
# scripted reply (`scripted`), an error before any reply (`rejected`: bad body, wrong key), the
# provider's context-overflow error (`overflow`: over the window, or a scripted overflow), or
# the automatic answer to a summariser request (`summary`).
Outcome = Literal["ok", "429", "stall", "scripted", "rejected", "overflow", "summary"]


class Chaos(BaseModel):
    """A fault storm: each request that finds no scripted reply meant for it is answered with a
    real-shaped 429 (`rate_limit` of the time, with `Retry-After` when `retry_after` is set) or
    stalls after its first delta for `stall_seconds` (`stall` of the time), else `reply` (the
    default reply when None). The n-th such request always gets the same outcome for a given
    `seed`, whatever the threads do. `only_api`: other endpoints are left alone. Rates of 0
    turn the faults off."""

    rate_limit: float = Field(default=0.0, ge=0.0, le=1.0)
    stall: float = Field(default=0.0, ge=0.0, le=1.0)
    stall_seconds: float = Field(default=30.0, ge=0.0)
    retry_after: float | None = None
    seed: int | None = None
    only_api: Api | None = None
    reply: Reply | None = None

    @model_validator(mode="after")
    def _rates_fit(self) -> Chaos:
        if self.rate_limit + self.stall > 1.0:
            raise ValueError("rate_limit + stall must not exceed 1")
        return self

    def applies(self, api: Api) -> bool:
        return self.only_api is None or self.only_api == api


class ChaosDice:
    """The outcomes of a `Chaos`, drawn in request order from one seeded generator (callers
    serialise `roll`)."""

    def __init__(self, chaos: Chaos) -> None:
        self.chaos = chaos
        self._rng = random.Random(chaos.seed)

    def roll(self) -> tuple[Reply, Outcome]:
        chaos = self.chaos
        draw = self._rng.random()
        base = chaos.reply or default_reply()
        if draw < chaos.rate_limit:
            fault = Fault.named("rate_limit", retry_after=chaos.retry_after)
            return Reply.error(fault), "429"
        if draw < chaos.rate_limit + chaos.stall:
            stalled = base.model_copy(update={"fault": Fault.stall(chaos.stall_seconds)})
            return stalled, "stall"
        return base, "ok"


@dataclass(frozen=True)
class Part:
    kind: Literal["thinking", "text", "tool_start", "tool_args"]
    text: str
    tool: int = -1

    @property
    def is_delta(self) -> bool:
        return self.kind != "tool_start"


def _chunks(text: str, size: int) -> Iterator[str]:
    size = max(1, size)
    for start in range(0, len(text), size):
        yield text[start : start + size]


class Ids:
    """Deterministic ids per server: `<prefix>_0001`, `<prefix>_0002`, ..."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def next(self, prefix: str) -> str:
        with self._lock:
            count = self._counts.get(prefix, 0) + 1
            self._counts[prefix] = count
        return f"{prefix}_{count:04d}"


def mask_key(key: str) -> str:
    """How OpenAI echoes a wrong key: a few characters, stars, the last four."""
    if len(key) <= 8:
        return "*" * len(key)
    return f"{key[:3]}{'*' * 12}{key[-4:]}"
