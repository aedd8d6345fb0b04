"""AnthropicProvider through the real anthropic SDK against the fake server."""

from __future__ import annotations

import json
import time

import anthropic
import pytest

from activities.providers.base import (
    Credentials,
    ProviderError,
    ReasoningDelta,
    TextDelta,
    ToolCallComplete,
    ToolCallStart,
)
from activities.providers.request_headers import NO_KEY_PLACEHOLDER
from agentlane.transcript import Role, ToolCall, TranscriptEntry
from tests.fakes.provider_server import FakeProviderServer
from tests.fakes.scripts import Fault, Reply, ScriptedToolCall, ScriptedUsage
from tests.providers.conftest import (
    ANTHROPIC_KEY,
    READ_TOOL,
    collect,
    finish_of,
    provider_for,
    request_for,
    user,
)

REF = "anthropic/claude-haiku-4-5"
MODEL = "claude-haiku-4-5"


async def test_streams_text_and_usage_with_cache_tokens(server: FakeProviderServer) -> None:
    server.script(
        Reply(
            text="Hello there, world.",
            chunk_size=4,
            usage=ScriptedUsage(input=120, output=9, cache_read=1000, cache_write=50),
        )
    )
    events = await collect(provider_for(server, REF), request_for(MODEL), ANTHROPIC_KEY)
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 1 and "".join(deltas) == "Hello there, world."
    finish = finish_of(events)
    assert finish.stop_reason == "end_turn"
    assert finish.usage.model_dump(exclude={"cost"}) == {
        "input": 120,
        "output": 9,
        "cache_read": 1000,
        "cache_write": 50,
    }


async def test_tool_call_arguments_streamed_in_fragments(server: FakeProviderServer) -> None:
    arguments = {"path": "notes/todo.md", "offset": 3, "mode": "text"}
    server.script(
        Reply(
            text="Reading.",
            tool_calls=[ScriptedToolCall(name="read", arguments=arguments, chunk_size=5)],
        )
    )
    events = await collect(
        provider_for(server, REF), request_for(MODEL, tools=[READ_TOOL]), ANTHROPIC_KEY
    )
    starts = [e for e in events if isinstance(e, ToolCallStart)]
    completes = [e for e in events if isinstance(e, ToolCallComplete)]
    assert [(s.index, s.name) for s in starts] == [(0, "read")]
    assert completes[0].id == starts[0].id and completes[0].id.startswith("toolu_")
    assert json.loads(completes[0].arguments_json) == arguments
    assert events.index(starts[0]) < events.index(completes[0])
    assert finish_of(events).stop_reason == "tool_use"


async def test_two_tool_calls_keep_their_order(server: FakeProviderServer) -> None:
    server.script(
        Reply(
            tool_calls=[
                ScriptedToolCall(name="read", arguments={"path": "a"}, id="toolu_a"),
                ScriptedToolCall(name="read", arguments={"path": "b"}, id="toolu_b"),
            ]
        )
    )
    events = await collect(
        provider_for(server, REF), request_for(MODEL, tools=[READ_TOOL]), ANTHROPIC_KEY
    )
    completes = [e for e in events if isinstance(e, ToolCallComplete)]
    assert [(c.index, c.id, c.arguments_json) for c in completes] == [
        (0, "toolu_a", '{"path":"a"}'),
        (1, "toolu_b", '{"path":"b"}'),
    ]


async def test_thinking_deltas_and_budget_parameter(server: FakeProviderServer) -> None:
    server.script(Reply(thinking="Let me consider this.", text="Done."))
    events = await collect(
        provider_for(server, REF),
        request_for(MODEL, thinking="medium", max_output_tokens=4000),
        ANTHROPIC_KEY,
    )
    reasoning = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    assert reasoning == "Let me consider this."
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Done."
    body = server.requests("anthropic")[-1].body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    # The budget must stay below max_tokens: the answer keeps the 4000 it asked for.
    assert body["max_tokens"] == 8192 + 4000


async def test_thinking_off_sends_no_thinking(server: FakeProviderServer) -> None:
    await collect(provider_for(server, REF), request_for(MODEL), ANTHROPIC_KEY)
    body = server.requests("anthropic")[-1].body
    assert "thinking" not in body
    assert body["max_tokens"] == 64_000  # the model entry's output limit


async def test_transcript_mapping_on_the_wire(server: FakeProviderServer) -> None:
    entries = [
        user("read two files"),
        TranscriptEntry(
            id="a1",
            role=Role.ASSISTANT,
            ts=1,
            text="Reading both.",
            tool_calls=[
                ToolCall(id="toolu_1", name="read", arguments={"path": "a"}),
                ToolCall(id="toolu_2", name="read", arguments={}, raw_arguments="{oops"),
            ],
        ),
        TranscriptEntry(id="t1", role=Role.TOOL, ts=2, tool_call_id="toolu_1", text="A content"),
        TranscriptEntry(
            id="t2", role=Role.TOOL, ts=3, tool_call_id="toolu_2", text="bad args", is_error=True
        ),
        user("thanks", "u2"),
    ]
    await collect(
        provider_for(server, REF),
        request_for(MODEL, entries, tools=[READ_TOOL], system="Be brief."),
        ANTHROPIC_KEY,
    )
    body = server.requests("anthropic")[-1].body
    assert body["system"] == [
        {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}
    ]
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["user", "assistant", "user"]
    assistant = body["messages"][1]["content"]
    assert assistant[0] == {"type": "text", "text": "Reading both."}
    assert assistant[1] == {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "read",
        "input": {"path": "a"},
    }
    assert assistant[2]["input"] == {}
    results = body["messages"][2]["content"]
    assert results[0] == {"type": "tool_result", "tool_use_id": "toolu_1", "content": "A content"}
    assert results[1] == {
        "type": "tool_result",
        "tool_use_id": "toolu_2",
        "content": "bad args",
        "is_error": True,
    }
    assert results[2] == {"type": "text", "text": "thanks"}


async def test_tool_schema_arrives_normalised(server: FakeProviderServer) -> None:
    await collect(provider_for(server, REF), request_for(MODEL, tools=[READ_TOOL]), ANTHROPIC_KEY)
    tool = server.requests("anthropic")[-1].body["tools"][0]
    assert tool["name"] == "read"
    schema = tool["input_schema"]
    assert "$schema" not in schema
    assert schema["type"] == "object" and schema["required"] == ["path"]
    # Anthropic takes the rest of JSON Schema as it is.
    assert schema["properties"]["path"]["minLength"] == 1


async def test_auth_headers_reach_the_server(server: FakeProviderServer) -> None:
    await collect(provider_for(server, REF), request_for(MODEL), ANTHROPIC_KEY)
    headers = server.requests("anthropic")[-1].headers
    assert headers["anthropic-version"]
    # anthropic SDK 2.x sends an API key as a bearer token; x-api-key is accepted too.
    assert headers.get("x-api-key") == ANTHROPIC_KEY or (
        headers.get("authorization") == f"Bearer {ANTHROPIC_KEY}"
    )


async def test_wrong_key_is_a_401_provider_error(server: FakeProviderServer) -> None:
    with pytest.raises(ProviderError) as caught:
        await collect(provider_for(server, REF), request_for(MODEL), "sk-ant-wrong-key-000")
    err = caught.value
    assert (err.status, err.code, err.transport) == (401, "authentication_error", False)
    assert '"type":"authentication_error"' in err.message
    assert "sk-ant-wrong-key-000" not in err.message
    assert server.pending() == 0


async def test_missing_key_is_refused_before_any_request(server: FakeProviderServer) -> None:
    with pytest.raises(ProviderError) as caught:
        await collect(provider_for(server, REF), request_for(MODEL), None)
    assert caught.value.code == "missing_api_key"
    assert "no api key found" in caught.value.message.lower()
    assert server.requests() == []


async def test_a_model_declared_keyless_is_called_without_a_key(server: FakeProviderServer) -> None:
    # `key_required = false` (a local server): the call is made, as for the OpenAI APIs.
    server.set_keys(anthropic=[NO_KEY_PLACEHOLDER])
    server.script(Reply(text="no key needed"))
    provider = provider_for(server, REF, key_required=False)
    events = await collect(provider, request_for(MODEL), None)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "no key needed"
    assert len(server.requests()) == 1


@pytest.mark.parametrize(
    ("fault", "status", "code", "text"),
    [
        (Fault.http(401), 401, "authentication_error", "invalid x-api-key"),
        (Fault.http(403), 403, "permission_error", "does not have permission"),
        (Fault.http(402), 402, "billing_error", "credit balance is too low"),
        (Fault.http(500), 500, "api_error", "Internal server error"),
        (Fault.http(503), 503, "api_error", "Service unavailable"),
        (Fault.http(529), 529, "overloaded_error", '"type":"overloaded_error"'),
        (
            Fault.named("context_overflow", prompt_tokens=250_000, limit_tokens=200_000),
            400,
            "invalid_request_error",
            "prompt is too long: 250000 tokens > 200000 maximum",
        ),
    ],
)
async def test_http_faults_become_provider_errors(
    server: FakeProviderServer, fault: Fault, status: int, code: str, text: str
) -> None:
    server.script(Reply.error(fault))
    with pytest.raises(ProviderError) as caught:
        await collect(provider_for(server, REF), request_for(MODEL), ANTHROPIC_KEY)
    err = caught.value
    assert (err.status, err.code, err.transport) == (status, code, False)
    assert err.message.startswith(f"{status} ")
    assert text in err.message
    assert (err.provider, err.model) == ("anthropic", MODEL)


async def test_rate_limit_carries_retry_after(server: FakeProviderServer) -> None:
    server.script(Reply.error(Fault.http(429, retry_after=17)))
    with pytest.raises(ProviderError) as caught:
        await collect(provider_for(server, REF), request_for(MODEL), ANTHROPIC_KEY)
    err = caught.value
    assert (err.status, err.code, err.retry_after_seconds) == (429, "rate_limit_error", 17.0)
    assert "rate limit" in err.message


async def test_error_event_inside_the_stream(server: FakeProviderServer) -> None:
    server.script(Reply(text="partial answer", fault=Fault.stream_error("overloaded", 1)))
    with pytest.raises(ProviderError) as caught:
        await collect(provider_for(server, REF), request_for(MODEL), ANTHROPIC_KEY)
    err = caught.value
    assert err.status is None and err.code == "overloaded_error" and not err.transport
    assert '"type":"overloaded_error"' in err.message


async def test_connection_dropped_mid_stream_is_transport(server: FakeProviderServer) -> None:
    server.script(Reply(text="a long answer that is cut", chunk_size=3, fault=Fault.drop(2)))
    seen: list[str] = []
    with pytest.raises(ProviderError) as caught:
        async for event in provider_for(server, REF).stream(
            request_for(MODEL), Credentials(profile_id="p1", api_key=ANTHROPIC_KEY)
        ):
            if isinstance(event, TextDelta):
                seen.append(event.text)
    assert caught.value.transport and caught.value.status is None
    assert "Connection error" in caught.value.message
    assert seen == ["a l", "ong"]


async def test_stream_ended_without_message_stop_is_transport(server: FakeProviderServer) -> None:
    server.script(Reply(text="abcdef", chunk_size=2, fault=Fault.truncate(2)))
    with pytest.raises(ProviderError) as caught:
        await collect(provider_for(server, REF), request_for(MODEL), ANTHROPIC_KEY)
    assert caught.value.transport and caught.value.code == "stream_incomplete"
    assert "message_stop" in caught.value.message


async def test_stalled_stream_times_out_as_transport(server: FakeProviderServer) -> None:
    server.script(Reply(text="slow answer", fault=Fault.stall(seconds=5, after_deltas=1)))
    started = time.monotonic()
    with pytest.raises(ProviderError) as caught:
        await collect(provider_for(server, REF, timeout=0.5), request_for(MODEL), ANTHROPIC_KEY)
    assert caught.value.transport
    assert caught.value.code == "ETIMEDOUT"
    assert "timed out" in caught.value.message.lower()
    assert time.monotonic() - started < 4


async def test_connection_refused_is_transport(server: FakeProviderServer) -> None:
    provider = provider_for(server, REF, base_url="http://127.0.0.1:9", timeout=2)
    with pytest.raises(ProviderError) as caught:
        await collect(provider, request_for(MODEL), ANTHROPIC_KEY)
    assert caught.value.transport and caught.value.code == "ECONNREFUSED"


async def test_time_to_first_token_is_honoured(server: FakeProviderServer) -> None:
    server.script(Reply(text="late", ttft=0.4))
    started = time.monotonic()
    events = await collect(provider_for(server, REF), request_for(MODEL), ANTHROPIC_KEY)
    assert time.monotonic() - started >= 0.4
    assert finish_of(events).stop_reason == "end_turn"


async def test_fake_server_non_streaming_messages(server: FakeProviderServer) -> None:
    server.script(
        Reply(text="plain", tool_calls=[ScriptedToolCall(name="read", arguments={"path": "x"})])
    )
    client = anthropic.AsyncAnthropic(
        api_key=ANTHROPIC_KEY, base_url=server.anthropic_base_url, max_retries=0
    )
    try:
        message = await client.messages.create(
            model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "hi"}]
        )
    finally:
        await client.close()
    assert message.stop_reason == "tool_use"
    assert [b.type for b in message.content] == ["text", "tool_use"]
    assert message.usage.output_tokens > 0
