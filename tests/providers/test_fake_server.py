"""The fake server itself: wire details the provider tests rely on, and its control API."""

from __future__ import annotations

import json
import subprocess
import threading
import time
import urllib.error
from collections.abc import Iterator

import httpx
import pytest

from activities.providers.base import ProviderError, TextDelta, ToolCallComplete
from tests.fakes.provider_server import FakeProviderClient, FakeProviderServer, spawn
from tests.fakes.scripts import Chaos, Fault, Reply, ScriptedToolCall
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


# -- chaos mode (a fault storm) ------------------------------------------------------------


def _post_messages(client: httpx.Client, url: str) -> int:
    body = {"model": "m", "max_tokens": 10, "messages": []}
    return client.post(url + "/v1/messages", headers=ANTHROPIC_HEADERS, json=body).status_code


def test_chaos_rates_are_roughly_honoured_and_repeat_with_the_seed(
    server: FakeProviderServer,
) -> None:
    def storm() -> list[str]:
        server.reset()
        server.chaos(rate_limit=0.3, stall=0.02, stall_seconds=0.01, seed=7)
        with httpx.Client() as client:
            statuses = [_post_messages(client, server.base_url) for _ in range(400)]
        log = server.log()
        assert [e["outcome"] == "429" for e in log] == [s == 429 for s in statuses]
        return [e["outcome"] for e in log]

    outcomes = storm()
    # Binomial(400, 0.3): sd 9.2, so +-4 sd; Binomial(400, 0.02): mean 8.
    assert 83 <= outcomes.count("429") <= 157
    assert 1 <= outcomes.count("stall") <= 20
    assert outcomes.count("ok") == 400 - outcomes.count("429") - outcomes.count("stall")
    assert storm() == outcomes, "the same seed gives the same outcomes in the same order"


def test_chaos_429_is_real_shaped_and_logged_with_key_and_model(
    server: FakeProviderServer,
) -> None:
    control = FakeProviderClient(server.base_url)
    took = control.chaos(rate_limit=1.0, retry_after=3, only_api="anthropic", seed=1)
    assert took.rate_limit == 1.0 and took.only_api == "anthropic"
    before = time.time()
    response = httpx.post(
        server.base_url + "/v1/messages",
        headers=ANTHROPIC_HEADERS,
        json={"model": "claude-x", "max_tokens": 10, "messages": []},
    )
    assert response.status_code == 429
    assert response.headers["retry-after"] == "3"
    assert response.json()["error"]["type"] == "rate_limit_error"
    # Another endpoint is left alone by only_api.
    chat = httpx.post(
        server.base_url + "/v1/chat/completions",
        headers={"Authorization": f"Bearer {OPENAI_KEY}"},
        json={"model": "gpt-x", "messages": []},
    )
    assert chat.status_code == 200
    log = control.log()
    assert [(e["api"], e["key"], e["model"], e["outcome"]) for e in log] == [
        ("anthropic", ANTHROPIC_KEY, "claude-x", "429"),
        ("openai-chat", OPENAI_KEY, "gpt-x", "ok"),
    ]
    assert [e["index"] for e in log] == [0, 1]
    assert before <= log[0]["at"] <= log[1]["at"] <= time.time()
    assert control.requests()[0]["outcome"] == "429"
    # Rates that cannot both hold are refused.
    with pytest.raises(urllib.error.HTTPError) as refused:
        control.chaos(Chaos.model_construct(rate_limit=0.8, stall=0.5))
    assert refused.value.code == 400


def test_chaos_stall_sends_a_first_delta_then_waits_until_reset(
    server: FakeProviderServer,
) -> None:
    server.chaos(stall=1.0, stall_seconds=60)
    deltas: list[float] = []
    done = threading.Event()

    def read() -> None:
        body = {"model": "m", "max_tokens": 10, "stream": True, "messages": []}
        with httpx.stream(
            "POST", server.base_url + "/v1/messages", headers=ANTHROPIC_HEADERS, json=body
        ) as response:
            for line in response.iter_lines():
                if '"text_delta"' in line:
                    deltas.append(time.monotonic())
        done.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + 5
    while not deltas and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(deltas) == 1, "the first delta arrives"
    assert not done.wait(0.5) and len(deltas) == 1, "then silence"
    assert server.log()[0]["outcome"] == "stall"
    woke = time.monotonic()
    server.reset()  # wakes the stalled handler, which finishes its reply
    assert done.wait(5)
    assert len(deltas) > 1 and deltas[1] - woke < 5


def test_chaos_off_at_zero_never_for_scripted_replies_and_cleared_by_reset(
    server: FakeProviderServer,
) -> None:
    with httpx.Client() as client:
        server.chaos(rate_limit=0.0, stall=0.0, seed=3)
        assert {_post_messages(client, server.base_url) for _ in range(50)} == {200}
        server.chaos(rate_limit=1.0)
        server.script(Reply(text="scripted"))
        assert _post_messages(client, server.base_url) == 200  # the script comes first
        assert _post_messages(client, server.base_url) == 429
        assert [e["outcome"] for e in server.log()[-2:]] == ["scripted", "429"]
        server.reset()
        assert server.log() == []
        assert _post_messages(client, server.base_url) == 200
        assert server.log()[0]["outcome"] == "ok"
        server.chaos(rate_limit=1.0)
        server.chaos()  # no settings: off
        assert _post_messages(client, server.base_url) == 200


def test_chaos_ok_reply_can_be_chosen(server: FakeProviderServer) -> None:
    server.chaos(Chaos(reply=Reply(text="storm reply")))
    response = httpx.post(
        server.base_url + "/v1/messages",
        headers=ANTHROPIC_HEADERS,
        json={"model": "m", "max_tokens": 10, "messages": []},
    )
    assert "".join(b.get("text", "") for b in response.json()["content"]) == "storm reply"
