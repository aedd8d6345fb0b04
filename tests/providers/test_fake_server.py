"""The fake server itself: wire details the provider tests rely on, and its control API."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import httpx
import pytest

from activities.providers.base import ProviderError, TextDelta, ToolCallComplete
from tests.fakes.provider_server import FakeProviderClient, FakeProviderServer, spawn
from tests.fakes.scripts import Fault, Reply, ScriptedToolCall
from tests.providers.conftest import (
    ANTHROPIC_KEY,
    OPENAI_KEY,
    collect,
    entry_for,
    finish_of,
    provider_for,
    request_for,
)

ANTHROPIC_HEADERS = {"x-api-key": ANTHROPIC_KEY, "anthropic-version": "2023-06-01"}


def _sse_events(text: str) -> list[str]:
    return [line[len("event: ") :] for line in text.splitlines() if line.startswith("event: ")]


def test_anthropic_stream_event_sequence(server: FakeProviderServer) -> None:
    server.script(
        Reply(
            thinking="hmm",
            text="hi",
            tool_calls=[ScriptedToolCall(name="read", arguments={"path": "abcdefghij"})],
        )
    )
    response = httpx.post(
        server.base_url + "/v1/messages",
        headers=ANTHROPIC_HEADERS,
        json={"model": "m", "max_tokens": 10, "stream": True, "messages": []},
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = _sse_events(response.text)
    assert events[:2] == ["message_start", "ping"]
    assert events[-2:] == ["message_delta", "message_stop"]
    assert events.count("content_block_start") == 3 == events.count("content_block_stop")
    assert response.text.count('"type":"input_json_delta"') >= 3  # arguments in fragments
    assert '"type":"signature_delta"' in response.text


def test_anthropic_auth_checks(server: FakeProviderServer) -> None:
    url = server.base_url + "/v1/messages"
    body = {"model": "m", "max_tokens": 10, "messages": []}
    no_version = httpx.post(url, headers={"x-api-key": ANTHROPIC_KEY}, json=body)
    assert no_version.status_code == 400
    assert "anthropic-version" in no_version.json()["error"]["message"]
    no_key = httpx.post(url, headers={"anthropic-version": "2023-06-01"}, json=body)
    assert no_key.status_code == 401
    assert no_key.json()["error"] == {
        "type": "authentication_error",
        "message": "x-api-key header is required",
    }
    wrong = httpx.post(url, headers={**ANTHROPIC_HEADERS, "x-api-key": "nope"}, json=body)
    assert wrong.status_code == 401 and wrong.json()["type"] == "error"
    assert wrong.headers["request-id"].startswith("req_")
    assert httpx.post(url, headers=ANTHROPIC_HEADERS, json=body).status_code == 200


def test_openai_auth_checks_and_keyless_mode(server: FakeProviderServer) -> None:
    url = server.base_url + "/v1/chat/completions"
    body = {"model": "m", "messages": []}
    missing = httpx.post(url, json=body)
    assert missing.status_code == 401
    assert "You didn't provide an API key" in missing.json()["error"]["message"]
    ok = httpx.post(url, headers={"Authorization": f"Bearer {OPENAI_KEY}"}, json=body)
    assert ok.status_code == 200 and ok.json()["object"] == "chat.completion"
    server.set_keys(openai=[])
    assert httpx.post(url, json=body).status_code == 200


def test_key_headers_and_required_headers_like_a_gateway(server: FakeProviderServer) -> None:
    url = server.base_url + "/v1/chat/completions"
    body = {"model": "m", "messages": []}
    bearer = {"Authorization": f"Bearer {OPENAI_KEY}"}
    server.set_key_headers(openai=["x-api-key"])
    assert httpx.post(url, headers=bearer, json=body).status_code == 401
    assert httpx.post(url, headers={"x-api-key": OPENAI_KEY}, json=body).status_code == 200
    FakeProviderClient(server.base_url).require_headers({"X-Gw": "right"})
    ok = {"x-api-key": OPENAI_KEY}
    missing = httpx.post(url, headers=ok, json=body)
    assert (
        missing.status_code == 401 and missing.json()["error"]["message"] == "missing x-gw header"
    )
    wrong = httpx.post(url, headers={**ok, "X-Gw": "wrong-value"}, json=body)
    assert wrong.json()["error"]["message"] == "invalid x-gw: wrong-value"
    assert httpx.post(url, headers={**ok, "X-Gw": "right"}, json=body).status_code == 200
    # reset restores where keys are read and drops the gateway's requirement.
    server.reset()
    assert httpx.post(url, headers=bearer, json=body).status_code == 200
    client = FakeProviderClient(server.base_url)
    client.set_key_headers(openai=["x-api-key"])
    assert httpx.post(url, headers=bearer, json=body).status_code == 401
    client.reset()
    assert httpx.post(url, headers=bearer, json=body).status_code == 200


def test_chat_stream_has_usage_chunk_only_when_asked(server: FakeProviderServer) -> None:
    url = server.base_url + "/v1/chat/completions"
    headers = {"Authorization": f"Bearer {OPENAI_KEY}"}
    base = {"model": "m", "messages": [], "stream": True}
    plain = httpx.post(url, headers=headers, json=base).text
    with_usage = httpx.post(
        url, headers=headers, json={**base, "stream_options": {"include_usage": True}}
    ).text
    assert plain.rstrip().endswith("data: [DONE]") and '"usage"' not in plain
    assert '"usage":{"prompt_tokens"' in with_usage


def test_script_filter_by_api_and_default_reply(server: FakeProviderServer) -> None:
    server.script(Reply(text="for responses", api="openai-responses"), Reply(text="for anyone"))
    headers = {"Authorization": f"Bearer {OPENAI_KEY}"}
    chat = httpx.post(
        server.base_url + "/v1/chat/completions",
        headers=headers,
        json={"model": "m", "messages": []},
    )
    assert chat.json()["choices"][0]["message"]["content"] == "for anyone"
    again = httpx.post(
        server.base_url + "/v1/chat/completions",
        headers=headers,
        json={"model": "m", "messages": []},
    )
    assert again.json()["choices"][0]["message"]["content"] == "Hello from the fake provider."
    assert server.pending() == 1


def test_control_api_over_http(server: FakeProviderServer) -> None:
    client = FakeProviderClient(server.base_url)
    assert client.healthy()
    assert client.script(Reply(text="scripted over http")) == 1
    headers = {"Authorization": f"Bearer {OPENAI_KEY}"}
    reply = httpx.post(
        server.base_url + "/v1/chat/completions",
        headers=headers,
        json={"model": "m", "messages": []},
    )
    assert reply.json()["choices"][0]["message"]["content"] == "scripted over http"
    recorded = client.requests()
    assert recorded[-1]["api"] == "openai-chat" and recorded[-1]["body"]["model"] == "m"
    assert recorded[-1]["headers"]["authorization"] == f"Bearer {OPENAI_KEY}"
    client.reset()
    assert client.requests() == []


@pytest.fixture(scope="module")
def server_process() -> Iterator[str]:
    process, url = spawn(extra_args=["--anthropic-key", "proc-key", "--openai-key", "proc-key"])
    try:
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()


async def test_out_of_process_server_drives_real_sdks(
    server: FakeProviderServer, server_process: str
) -> None:
    url = server_process
    control = FakeProviderClient(url)
    control.reset()
    control.script(
        Reply(text="from another process", api="anthropic"),
        Reply(tool_calls=[ScriptedToolCall(name="read", arguments={"p": 1})], api="openai-chat"),
    )
    from activities.providers.catalog import build_provider

    anthropic_entry = entry_for(server, "anthropic/claude-haiku-4-5", base_url=url)
    events = await collect(
        build_provider(anthropic_entry), request_for("claude-haiku-4-5"), "proc-key"
    )
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "from another process"
    chat_entry = entry_for(server, "openai/gpt-4.1", base_url=url + "/v1")
    events = await collect(build_provider(chat_entry), request_for("gpt-4.1"), "proc-key")
    complete = next(e for e in events if isinstance(e, ToolCallComplete))
    assert json.loads(complete.arguments_json) == {"p": 1}
    assert finish_of(events).stop_reason == "tool_use"
    recorded = control.requests()
    assert [r["api"] for r in recorded] == ["anthropic", "openai-chat"]
    assert recorded[1]["body"]["stream"] is True


@pytest.mark.parametrize(
    ("ref", "key"),
    [
        ("anthropic/claude-haiku-4-5", ANTHROPIC_KEY),
        ("openai/gpt-4.1", OPENAI_KEY),
        ("openai/gpt-5", OPENAI_KEY),
    ],
)
async def test_malformed_event_is_a_transport_error(
    server: FakeProviderServer, ref: str, key: str
) -> None:
    server.script(Reply(text="fine so far", fault=Fault.garbage(1)))
    with pytest.raises(ProviderError) as caught:
        await collect(provider_for(server, ref), request_for(ref.split("/")[1]), key)
    assert caught.value.transport and caught.value.code == "malformed_response"


async def test_model_without_tool_support_gets_no_tools(server: FakeProviderServer) -> None:
    from agentlane.config import ModelCapabilities
    from tests.providers.conftest import READ_TOOL

    provider = provider_for(server, "openai/gpt-4.1", capabilities=ModelCapabilities(tools=False))
    await collect(provider, request_for("gpt-4.1", tools=[READ_TOOL]), OPENAI_KEY)
    assert "tools" not in server.requests("openai-chat")[-1].body


def test_a_reply_can_target_a_key_and_a_model(server: FakeProviderServer) -> None:
    """Failover tests script a fault for one profile's key or one model; other requests skip
    past it in the FIFO and take what is meant for them."""
    other = "sk-ant-other-key"
    server.set_keys(anthropic=[ANTHROPIC_KEY, other])
    try:
        server.script(
            Reply(text="for the other key", key=other),
            Reply(text="for model b", model="b"),
            Reply(text="for anyone"),
        )
        url = server.base_url + "/v1/messages"

        def ask(key: str, model: str) -> str:
            headers = {**ANTHROPIC_HEADERS, "x-api-key": key}
            body = {"model": model, "max_tokens": 10, "messages": []}
            response = httpx.post(url, headers=headers, json=body)
            return "".join(b.get("text", "") for b in response.json()["content"])

        assert ask(ANTHROPIC_KEY, "b") == "for model b"
        assert ask(ANTHROPIC_KEY, "a") == "for anyone"
        assert ask(other, "a") == "for the other key"
        assert server.pending() == 0
    finally:
        server.set_keys(anthropic=[ANTHROPIC_KEY])
