"""One fake provider server for the whole session; each test starts from an empty script."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from activities.providers.base import (
    Credentials,
    Finish,
    ModelProvider,
    ModelRequest,
    StreamEvent,
    ToolSpec,
)
from activities.providers.catalog import build_provider
from agentlane.config import ModelEntry, build_config
from agentlane.transcript import Role, TranscriptEntry
from tests.fakes.provider_server import (
    DEFAULT_ANTHROPIC_KEY,
    DEFAULT_OPENAI_KEY,
    FakeProviderServer,
)

ANTHROPIC_KEY = DEFAULT_ANTHROPIC_KEY
OPENAI_KEY = DEFAULT_OPENAI_KEY

READ_TOOL = ToolSpec(
    name="read",
    description="Read a file.",
    parameters={
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "path": {"type": "string", "minLength": 1, "description": "File path"},
            "offset": {"type": "integer", "minimum": 0, "default": 0},
            "mode": {"type": "string", "enum": ["text", "bytes"]},
        },
        "required": ["path"],
    },
)


@pytest.fixture(scope="session")
def fake_server() -> Iterator[FakeProviderServer]:
    with FakeProviderServer() as server:
        yield server


@pytest.fixture
def server(fake_server: FakeProviderServer) -> Iterator[FakeProviderServer]:
    fake_server.reset()
    fake_server.set_keys(anthropic=[ANTHROPIC_KEY], openai=[OPENAI_KEY])
    yield fake_server
    fake_server.reset()


def entry_for(server: FakeProviderServer, ref: str, **updates: Any) -> ModelEntry:
    entry = build_config({}, {}).model(ref)
    base_url = server.anthropic_base_url if entry.api == "anthropic" else server.openai_base_url
    return entry.model_copy(update={"base_url": base_url, **updates})


def provider_for(
    server: FakeProviderServer, ref: str, *, timeout: float = 10.0, **updates: Any
) -> ModelProvider:
    return build_provider(entry_for(server, ref, **updates), timeout_seconds=timeout)


def user(text: str, entry_id: str = "u1") -> TranscriptEntry:
    return TranscriptEntry(id=entry_id, role=Role.USER, ts=0.0, text=text)


def request_for(
    model: str,
    entries: list[TranscriptEntry] | None = None,
    *,
    tools: list[ToolSpec] | None = None,
    thinking: str = "off",
    system: str = "You are a test.",
    max_output_tokens: int | None = None,
) -> ModelRequest:
    return ModelRequest(
        model=model,
        system=system,
        entries=entries if entries is not None else [user("hello")],
        tools=tools if tools is not None else [],
        thinking=thinking,
        max_output_tokens=max_output_tokens,
    )


async def collect(
    provider: ModelProvider, request: ModelRequest, key: str | None, profile: str = "p1"
) -> list[StreamEvent]:
    credentials = Credentials(profile_id=profile, api_key=key) if key is not None else None
    return [event async for event in provider.stream(request, credentials)]


def finish_of(events: list[StreamEvent]) -> Finish:
    last = events[-1]
    assert isinstance(last, Finish), events
    return last
