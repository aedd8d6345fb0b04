"""The one interface every model provider implements (offline, Anthropic, OpenAI, compatible).

A provider turns a neutral request (system prompt, transcript entries, tool specs, thinking level)
into a stream of neutral events. It never retries on its own (Temporal and the run workflow
decide), and it raises `ProviderError` with what it knows; classification into failover reasons
happens in the model-call activity.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentlane.headers import AuthHeader
from agentlane.transcript import TranscriptEntry
from agentlane.usage import Usage


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class Credentials:
    """Resolved inside the activity from the auth store; never serialised.

    From the auth store they hold one profile's settings; for a call they also hold the model
    entry's (`activities/providers/call_credentials.py`), and providers read only these.
    """

    profile_id: str | None
    api_key: str | None = None
    base_url: str | None = None
    kind: str = "api_key"
    # None: the key goes in whatever header the provider's SDK puts it.
    auth_header: AuthHeader | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    # Lower-cased names of headers whose values are config-file literals, the only values here
    # that are not secret; every other value is scrubbed from messages like the key.
    public_headers: frozenset[str] = frozenset()

    def secrets(self) -> tuple[str, ...]:
        """Every string a message must not show, longest first (a key may contain another)."""
        found = {self.api_key} if self.api_key else set()
        for name, value in self.headers.items():
            if name.lower() not in self.public_headers:
                found.update(_secret_parts(value))
        return tuple(sorted(found, key=len, reverse=True))

    def __repr__(self) -> str:
        # Header names only: values may be secrets, and literals need not be in logs either.
        return (
            f"Credentials(profile_id={self.profile_id!r}, api_key=<redacted>, "
            f"auth_header={self.auth_header!r}, headers={sorted(self.headers)!r})"
        )


def _secret_parts(value: str) -> set[str]:
    """The value, and for `<scheme> <token>` the token alone, which a server may echo."""
    parts = value.split()
    return {value, parts[1]} if len(parts) == 2 else {value}


@dataclass(frozen=True)
class ModelRequest:
    model: str
    system: str
    entries: list[TranscriptEntry]
    tools: list[ToolSpec]
    thinking: str = "off"
    max_output_tokens: int | None = None
    options: dict[str, Any] = field(default_factory=dict)
    # "chat", or "summary" for a compaction's summariser call (the offline model answers those
    # with its deterministic summariser; real providers send them like any other request).
    purpose: str = "chat"
    # Whether the model sees images (the catalogue's `capabilities.images`): images that tool
    # results carry go as image blocks, or as a note saying they are not shown.
    images: bool = False


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    text: str


@dataclass(frozen=True)
class ToolCallStart:
    index: int
    id: str
    name: str


@dataclass(frozen=True)
class ToolCallComplete:
    index: int
    id: str
    name: str
    arguments_json: str
    # The provider makes its ids unique in the session itself (the offline model): kept as
    # they are (activities/providers/tool_call_ids.py).
    session_unique: bool = False


@dataclass(frozen=True)
class Finish:
    stop_reason: str
    usage: Usage
    # Provider state the next request must send back (Anthropic's signed thinking blocks); it is
    # kept in the assistant entry's meta, never in workflow history.
    meta: dict[str, Any] = field(default_factory=dict)


StreamEvent = TextDelta | ReasoningDelta | ToolCallStart | ToolCallComplete | Finish


class ProviderError(Exception):
    """A provider's failure as the provider reported it, not yet classified."""

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        model: str,
        status: int | None = None,
        code: str | None = None,
        retry_after_seconds: float | None = None,
        transport: bool = False,
        stream_started: bool = False,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.provider = provider
        self.model = model
        self.status = status
        self.code = code
        self.retry_after_seconds = retry_after_seconds
        self.transport = transport
        # The server had begun its answer (a 200 stream) when the transport failed: a stream
        # cut short, not a connection that never answered.
        self.stream_started = stream_started


class ModelProvider(Protocol):
    name: str

    def stream(
        self, request: ModelRequest, credentials: Credentials | None
    ) -> AsyncIterator[StreamEvent]: ...
