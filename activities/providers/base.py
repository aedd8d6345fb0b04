"""The one interface every model provider implements (offline, Anthropic, OpenAI, compatible).

A provider turns a neutral request (system prompt, transcript entries, tool specs, thinking level)
into a stream of neutral events. It never retries on its own (Temporal and the run workflow
decide), and it raises `ProviderError` with what it knows; classification into failover reasons
happens in the model-call activity.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentlane.transcript import TranscriptEntry
from agentlane.usage import Usage


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class Credentials:
    """Resolved inside the activity from the auth store; never serialised."""

    profile_id: str | None
    api_key: str | None = None
    base_url: str | None = None
    kind: str = "api_key"

    def __repr__(self) -> str:
        return f"Credentials(profile_id={self.profile_id!r}, api_key=<redacted>)"


@dataclass(frozen=True)
class ModelRequest:
    model: str
    system: str
    entries: list[TranscriptEntry]
    tools: list[ToolSpec]
    thinking: str = "off"
    max_output_tokens: int | None = None
    options: dict[str, Any] = field(default_factory=dict)


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
    ) -> None:
        super().__init__(message)
        self.message = message
        self.provider = provider
        self.model = model
        self.status = status
        self.code = code
        self.retry_after_seconds = retry_after_seconds
        self.transport = transport


class ModelProvider(Protocol):
    name: str

    def stream(
        self, request: ModelRequest, credentials: Credentials | None
    ) -> AsyncIterator[StreamEvent]: ...
