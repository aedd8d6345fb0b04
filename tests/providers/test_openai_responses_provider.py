"""OpenAIResponsesProvider through the real openai SDK (Responses API) against the fake server."""

from __future__ import annotations

import json
import time

import openai
import pytest

from activities.providers.base import (
    ProviderError,
    ReasoningDelta,
    TextDelta,
    ToolCallComplete,
    ToolCallStart,
)
from agentlane.transcript import Role, ToolCall, TranscriptEntry
from tests.fakes.provider_server import FakeProviderServer
from tests.fakes.scripts import Fault, Reply, ScriptedToolCall, ScriptedUsage
from tests.providers.conftest import (
    OPENAI_KEY,
    READ_TOOL,
    collect,
    finish_of,
    provider_for,
    request_for,
    user,
)

REF = "openai/gpt-5"
MODEL = "gpt-5"


async def test_streams_reasoning_text_tools_and_usage(server: FakeProviderServer) -> None:
    server.script(
        Reply(
            thinking="Summary of my reasoning.",
            text="Here you go.",
            tool_calls=[ScriptedToolCall(name="read", arguments={"path": "r.md"}, chunk_size=4)],
            usage=ScriptedUsage(input=300, output=50, cache_read=700, cache_write=20, reasoning=30),
        )
    )
    events = await collect(
        provider_for(server, REF), request_for(MODEL, tools=[READ_TOOL], thinking="low"), OPENAI_KEY
    )
    reasoning = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    assert reasoning == "Summary of my reasoning."
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Here you go."
    start = next(e for e in events if isinstance(e, ToolCallStart))
    complete = next(e for e in events if isinstance(e, ToolCallComplete))
    assert (start.id, start.name) == (complete.id, "read") and start.id.startswith("call_")
    assert json.loads(complete.arguments_json) == {"path": "r.md"}
    finish = finish_of(events)
    assert finish.stop_reason == "tool_use"
    assert finish.usage.model_dump(exclude={"cost"}) == {
        "input": 300,
        "output": 50,
        "cache_read": 700,
        "cache_write": 20,
    }


async def test_request_body_on_the_wire(server: FakeProviderServer) -> None:
    entries = [
        user("list"),
        TranscriptEntry(
            id="a1",
            role=Role.ASSISTANT,
            ts=1,
            text="Looking.",
            tool_calls=[ToolCall(id="call_9", name="read", arguments={"path": "."})],
        ),
        TranscriptEntry(id="t1", role=Role.TOOL, ts=2, tool_call_id="call_9", text="a b c"),
    ]
    await collect(
        provider_for(server, REF),
        request_for(MODEL, entries, tools=[READ_TOOL], thinking="high", system="Sys."),
        OPENAI_KEY,
    )
    body = server.requests("openai-responses")[-1].body
    assert body["instructions"] == "Sys."
    assert body["store"] is False and body["stream"] is True
    assert body["max_output_tokens"] == 128_000
    assert body["reasoning"] == {"effort": "high", "summary": "auto"}
    assert body["input"] == [
        {"role": "user", "content": "list"},
        {"role": "assistant", "content": "Looking."},
        {
            "type": "function_call",
            "call_id": "call_9",
            "name": "read",
            "arguments": '{"path": "."}',
        },
        {"type": "function_call_output", "call_id": "call_9", "output": "a b c"},
    ]
    tool = body["tools"][0]
    assert tool["type"] == "function" and tool["strict"] is True
    assert tool["parameters"]["additionalProperties"] is False
    assert tool["parameters"]["required"] == ["path", "offset", "mode"]


async def test_off_on_a_model_that_always_reasons_sends_no_effort(
    server: FakeProviderServer,
) -> None:
    await collect(provider_for(server, REF), request_for(MODEL, thinking="off"), OPENAI_KEY)
    assert "reasoning" not in server.requests("openai-responses")[-1].body


async def test_max_tokens_is_incomplete(server: FakeProviderServer) -> None:
    server.script(Reply(text="cut by the limit", stop_reason="max_tokens"))
    events = await collect(provider_for(server, REF), request_for(MODEL), OPENAI_KEY)
    assert finish_of(events).stop_reason == "max_tokens"


@pytest.mark.parametrize(
    ("fault", "status", "code", "text"),
    [
        (Fault.http(401), 401, "invalid_api_key", "Incorrect API key provided"),
        (Fault.http(429, retry_after=4), 429, "rate_limit_exceeded", "Rate limit reached"),
        (Fault.http(500), 500, "server_error", "error while processing"),
        (
            Fault.named("context_overflow"),
            400,
            "context_length_exceeded",
            "exceeds the context window",
        ),
    ],
)
async def test_http_faults(
    server: FakeProviderServer, fault: Fault, status: int, code: str, text: str
) -> None:
    server.script(Reply.error(fault))
    with pytest.raises(ProviderError) as caught:
        await collect(provider_for(server, REF), request_for(MODEL), OPENAI_KEY)
    err = caught.value
    assert (err.status, err.code, err.transport) == (status, code, False)
    assert text in err.message
    assert err.retry_after_seconds == fault.retry_after


async def test_error_event_and_transport_faults(server: FakeProviderServer) -> None:
    server.script(Reply(text="partial", fault=Fault.stream_error("server", 1)))
    with pytest.raises(ProviderError) as event_error:
        await collect(provider_for(server, REF), request_for(MODEL), OPENAI_KEY)
    assert event_error.value.code == "server_error" and not event_error.value.transport

    server.script(Reply(text="partial text", chunk_size=2, fault=Fault.drop(2)))
    with pytest.raises(ProviderError) as dropped:
        await collect(provider_for(server, REF), request_for(MODEL), OPENAI_KEY)
    assert dropped.value.transport

    server.script(Reply(text="partial text", chunk_size=2, fault=Fault.truncate(2)))
    with pytest.raises(ProviderError) as truncated:
        await collect(provider_for(server, REF), request_for(MODEL), OPENAI_KEY)
    assert truncated.value.transport and "response.completed" in truncated.value.message

    server.script(Reply(text="slow", fault=Fault.stall(seconds=5, after_deltas=1)))
    started = time.monotonic()
    with pytest.raises(ProviderError) as stalled:
        await collect(provider_for(server, REF, timeout=0.5), request_for(MODEL), OPENAI_KEY)
    assert stalled.value.transport and stalled.value.code == "ETIMEDOUT"
    assert time.monotonic() - started < 4


async def test_fake_server_non_streaming_responses(server: FakeProviderServer) -> None:
    server.script(Reply(thinking="why", text="final", tool_calls=[ScriptedToolCall(name="read")]))
    client = openai.AsyncOpenAI(api_key=OPENAI_KEY, base_url=server.openai_base_url, max_retries=0)
    try:
        response = await client.responses.create(model=MODEL, input="hi")
    finally:
        await client.close()
    assert response.status == "completed"
    assert [item.type for item in response.output] == ["reasoning", "message", "function_call"]
    assert response.output_text == "final"
    assert response.usage is not None and response.usage.output_tokens > 0
