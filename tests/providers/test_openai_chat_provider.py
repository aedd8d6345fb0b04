"""OpenAIChatProvider (OpenAI and OpenAI-compatible servers) through the real openai SDK."""

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
from agentlane.config import ApiKind, ModelCapabilities
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

REF = "openai/gpt-4.1"
MODEL = "gpt-4.1"


async def test_streams_text_and_usage(server: FakeProviderServer) -> None:
    server.script(
        Reply(
            text="Chat says hello.",
            chunk_size=3,
            usage=ScriptedUsage(input=40, output=6, cache_read=960),
        )
    )
    events = await collect(provider_for(server, REF), request_for(MODEL), OPENAI_KEY)
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 1 and "".join(deltas) == "Chat says hello."
    finish = finish_of(events)
    assert finish.stop_reason == "end_turn"
    # prompt_tokens (1000) includes the cached 960: input is the uncached rest.
    assert finish.usage.model_dump(exclude={"cost"}) == {
        "input": 40,
        "output": 6,
        "cache_read": 960,
        "cache_write": 0,
    }
    body = server.requests("openai-chat")[-1].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["max_completion_tokens"] == 32_768 and "max_tokens" not in body
    assert body["messages"][0] == {"role": "system", "content": "You are a test."}
    assert "reasoning_effort" not in body


async def test_tool_calls_assembled_by_index(server: FakeProviderServer) -> None:
    server.script(
        Reply(
            tool_calls=[
                ScriptedToolCall(name="read", arguments={"path": "a.txt", "mode": "text"}),
                ScriptedToolCall(name="read", arguments={"path": "b.txt"}, chunk_size=2),
            ]
        )
    )
    events = await collect(
        provider_for(server, REF), request_for(MODEL, tools=[READ_TOOL]), OPENAI_KEY
    )
    starts = [e for e in events if isinstance(e, ToolCallStart)]
    completes = [e for e in events if isinstance(e, ToolCallComplete)]
    assert [s.index for s in starts] == [0, 1]
    assert [c.id for c in completes] == [s.id for s in starts]
    assert json.loads(completes[0].arguments_json) == {"path": "a.txt", "mode": "text"}
    assert json.loads(completes[1].arguments_json) == {"path": "b.txt"}
    assert finish_of(events).stop_reason == "tool_use"


async def test_strict_nulls_for_optional_arguments_are_removed(server: FakeProviderServer) -> None:
    # Under strict mode the model must send every property; optional ones come back null.
    server.script(
        Reply(
            tool_calls=[
                ScriptedToolCall(name="read", arguments={"path": "a", "offset": None, "mode": None})
            ]
        )
    )
    events = await collect(
        provider_for(server, REF), request_for(MODEL, tools=[READ_TOOL]), OPENAI_KEY
    )
    complete = next(e for e in events if isinstance(e, ToolCallComplete))
    assert json.loads(complete.arguments_json) == {"path": "a"}


async def test_strict_tool_schema_on_the_wire(server: FakeProviderServer) -> None:
    await collect(provider_for(server, REF), request_for(MODEL, tools=[READ_TOOL]), OPENAI_KEY)
    tool = server.requests("openai-chat")[-1].body["tools"][0]
    assert tool["type"] == "function" and tool["function"]["strict"] is True
    schema = tool["function"]["parameters"]
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["path", "offset", "mode"]
    assert "$schema" not in schema
    props = schema["properties"]
    assert props["path"]["type"] == "string" and "minLength" not in props["path"]
    assert props["offset"]["type"] == ["integer", "null"] and "default" not in props["offset"]
    assert props["mode"]["enum"] == ["text", "bytes", None]
    assert "minimum: 0" in props["offset"]["description"]


async def test_transcript_mapping_on_the_wire(server: FakeProviderServer) -> None:
    entries = [
        user("go"),
        TranscriptEntry(
            id="a1",
            role=Role.ASSISTANT,
            ts=1,
            text="",
            tool_calls=[ToolCall(id="call_1", name="read", arguments={"path": "a"})],
        ),
        TranscriptEntry(id="t1", role=Role.TOOL, ts=2, tool_call_id="call_1", text="content"),
    ]
    await collect(provider_for(server, REF), request_for(MODEL, entries), OPENAI_KEY)
    messages = server.requests("openai-chat")[-1].body["messages"]
    assert messages[1] == {"role": "user", "content": "go"}
    assert messages[2]["role"] == "assistant" and messages[2]["content"] is None
    assert messages[2]["tool_calls"] == [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "read", "arguments": '{"path": "a"}'},
        }
    ]
    assert messages[3] == {"role": "tool", "tool_call_id": "call_1", "content": "content"}


async def test_compatible_server_without_key(server: FakeProviderServer) -> None:
    server.set_keys(openai=[])  # a local vLLM / Ollama takes no key
    server.script(Reply(thinking="pondering", text="local answer"))
    provider = provider_for(
        server,
        REF,
        provider="vllm",
        id="qwen3",
        api=ApiKind.OPENAI_COMPATIBLE,
        capabilities=ModelCapabilities(thinking_levels=["off", "low", "high"]),
    )
    events = await collect(provider, request_for("qwen3", tools=[READ_TOOL], thinking="low"), None)
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == "pondering"
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "local answer"
    request = server.requests("openai-chat")[-1]
    body = request.body
    assert body["max_tokens"] == 32_768 and "max_completion_tokens" not in body
    assert body["reasoning_effort"] == "low"
    assert "strict" not in body["tools"][0]["function"]
    # Never OpenAI's key from the environment: a placeholder the server ignores.
    assert request.headers["authorization"] == "Bearer no-key"


async def test_reasoning_effort_for_thinking_levels(server: FakeProviderServer) -> None:
    provider = provider_for(
        server, REF, capabilities=ModelCapabilities(thinking_levels=["off", "minimal", "high"])
    )
    for level, effort in [("minimal", "minimal"), ("high", "high"), ("off", None)]:
        await collect(provider, request_for(MODEL, thinking=level), OPENAI_KEY)
        assert server.requests("openai-chat")[-1].body.get("reasoning_effort") == effort


async def test_server_side_unsupported_effort_error(server: FakeProviderServer) -> None:
    server.script(Reply.error(Fault.named("thinking_unsupported", supported=["low", "high"])))
    provider = provider_for(
        server, REF, capabilities=ModelCapabilities(thinking_levels=["off", "minimal"])
    )
    with pytest.raises(ProviderError) as caught:
        await collect(provider, request_for(MODEL, thinking="minimal"), OPENAI_KEY)
    err = caught.value
    assert (err.status, err.code) == (400, "unsupported_value")
    assert "does not support 'minimal'" in err.message
    assert "Supported values are: 'low', and 'high'." in err.message


async def test_wrong_key_is_401_without_the_key(server: FakeProviderServer) -> None:
    with pytest.raises(ProviderError) as caught:
        await collect(provider_for(server, REF), request_for(MODEL), "sk-wrong-secret-9876")
    err = caught.value
    assert (err.status, err.code) == (401, "invalid_api_key")
    assert "Incorrect API key provided" in err.message
    assert "sk-wrong-secret-9876" not in err.message and "9876" not in err.message


@pytest.mark.parametrize(
    ("fault", "status", "code", "text"),
    [
        (Fault.http(403), 403, "unsupported_country_region_territory", "not supported"),
        (Fault.http(402), 402, "402", "Insufficient credits"),
        (Fault.named("quota"), 429, "insufficient_quota", "exceeded your current quota"),
        (Fault.http(500), 500, "server_error", "error while processing your request"),
        (Fault.http(503), 503, "server_error", "currently overloaded"),
        (Fault.http(529), 529, "overloaded_error", "Overloaded"),
        (Fault.http(404), 404, "model_not_found", "does not exist"),
        (
            Fault.named("context_overflow", prompt_tokens=130_532, limit_tokens=128_000),
            400,
            "context_length_exceeded",
            "maximum context length is 128000 tokens. However, your messages resulted in 130532",
        ),
    ],
)
async def test_http_faults_become_provider_errors(
    server: FakeProviderServer, fault: Fault, status: int, code: str, text: str
) -> None:
    server.script(Reply.error(fault))
    with pytest.raises(ProviderError) as caught:
        await collect(provider_for(server, REF), request_for(MODEL), OPENAI_KEY)
    err = caught.value
    assert (err.status, err.code, err.transport) == (status, code, False)
    assert err.message.startswith(f"{status} ") and text in err.message


async def test_rate_limit_carries_retry_after(server: FakeProviderServer) -> None:
    server.script(Reply.error(Fault.http(429, retry_after=2.5)))
    with pytest.raises(ProviderError) as caught:
        await collect(provider_for(server, REF), request_for(MODEL), OPENAI_KEY)
    err = caught.value
    assert (err.status, err.code, err.retry_after_seconds) == (429, "rate_limit_exceeded", 2.5)
    assert "(TPM)" in err.message


async def test_error_chunk_inside_the_stream(server: FakeProviderServer) -> None:
    server.script(Reply(text="some text", fault=Fault.stream_error("server", 1)))
    with pytest.raises(ProviderError) as caught:
        await collect(provider_for(server, REF), request_for(MODEL), OPENAI_KEY)
    err = caught.value
    assert err.status is None and err.code == "server_error" and not err.transport
    assert "error while processing" in err.message


async def test_dropped_and_stalled_streams_are_transport(server: FakeProviderServer) -> None:
    server.script(Reply(text="cut short here", chunk_size=2, fault=Fault.drop(3)))
    with pytest.raises(ProviderError) as dropped:
        await collect(provider_for(server, REF), request_for(MODEL), OPENAI_KEY)
    assert dropped.value.transport and dropped.value.code == "ECONNRESET"

    server.script(Reply(text="slow", fault=Fault.stall(seconds=5, after_deltas=1)))
    started = time.monotonic()
    with pytest.raises(ProviderError) as stalled:
        await collect(provider_for(server, REF, timeout=0.5), request_for(MODEL), OPENAI_KEY)
    assert stalled.value.transport and stalled.value.code == "ETIMEDOUT"
    assert "timed out" in stalled.value.message.lower()
    assert time.monotonic() - started < 4


async def test_stream_ended_without_finish_is_transport(server: FakeProviderServer) -> None:
    # The body ends cleanly (a proxy gave up) but no finish_reason ever came.
    server.script(Reply(text="abcdef", chunk_size=2, fault=Fault.truncate(2)))
    with pytest.raises(ProviderError) as caught:
        await collect(provider_for(server, REF), request_for(MODEL), OPENAI_KEY)
    assert caught.value.transport and caught.value.code == "stream_incomplete"
    assert "stream closed" in caught.value.message


async def test_fake_server_non_streaming_chat(server: FakeProviderServer) -> None:
    server.script(Reply(text="whole", tool_calls=[ScriptedToolCall(name="read", arguments={})]))
    client = openai.AsyncOpenAI(api_key=OPENAI_KEY, base_url=server.openai_base_url, max_retries=0)
    try:
        completion = await client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}]
        )
    finally:
        await client.close()
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content == "whole"
    assert choice.message.tool_calls and choice.message.tool_calls[0].type == "function"
    assert completion.usage is not None and completion.usage.total_tokens > 0
