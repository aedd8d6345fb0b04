"""The fake provider's context window, overflow errors and summariser requests, through the real
`anthropic` and `openai` SDKs (and the engine's providers where usage is what matters)."""

from __future__ import annotations

import urllib.error
from typing import Any

import anthropic
import openai
import pytest

from activities.context.safeguard_summary import (
    SUMMARIZER_SYSTEM_PROMPT,
    build_merge_prompt,
    build_summary_instructions,
    build_summary_prompt,
    has_required_headings,
)
from activities.providers.base import TextDelta
from activities.providers.overflow_figures import overflow_figures
from tests.fakes.context_window import IMAGE_CHARS, prompt_chars, prompt_tokens
from tests.fakes.provider_server import FakeProviderClient, FakeProviderServer
from tests.fakes.scripts import Reply
from tests.fakes.summaries import AUTO_SUMMARY_MARK, SUMMARIZER_PROMPT_PREFIX
from tests.providers.conftest import (
    ANTHROPIC_KEY,
    OPENAI_KEY,
    collect,
    finish_of,
    provider_for,
    request_for,
    user,
)

SYSTEM = "abcd"  # 4 characters
ASK = "x" * 40  # 40 characters: with the system prompt, 11 tokens at 4 a token


def claude(server: FakeProviderServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        api_key=ANTHROPIC_KEY, base_url=server.anthropic_base_url, max_retries=0
    )


def gpt(server: FakeProviderServer) -> openai.OpenAI:
    return openai.OpenAI(api_key=OPENAI_KEY, base_url=server.openai_base_url, max_retries=0)


def ask_anthropic(server: FakeProviderServer, text: str = ASK, system: str = SYSTEM) -> Any:
    return claude(server).messages.create(
        model="claude-haiku-4-5",
        max_tokens=100,
        system=system,
        messages=[{"role": "user", "content": text}],
    )


def ask_chat(server: FakeProviderServer, text: str = ASK, system: str = SYSTEM) -> Any:
    return gpt(server).chat.completions.create(
        model="gpt-4.1",
        messages=[{"role": "system", "content": system}, {"role": "user", "content": text}],
    )


def ask_responses(server: FakeProviderServer, text: str = ASK, system: str = SYSTEM) -> Any:
    return gpt(server).responses.create(
        model="gpt-5", instructions=system, input=[{"role": "user", "content": text}]
    )


# -- counting --------------------------------------------------------------------------------


def test_the_three_wire_formats_count_the_same_conversation_alike() -> None:
    arguments = {"path": "notes.txt"}
    tool = {"name": "read", "description": "Read a file.", "input_schema": {"type": "object"}}
    anthropic_body = {
        "system": [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": ASK},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "ok"},
                    {"type": "tool_use", "id": "toolu_1", "name": "read", "input": arguments},
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "hi"}],
            },
        ],
        "tools": [tool],
    }
    chat_body = {
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": ASK},
            {
                "role": "assistant",
                "content": "ok",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "read", "arguments": '{"path":"notes.txt"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "hi"},
        ],
        "tools": [tool],
    }
    # system 4 + ask 40 + "ok" 2 + "read" 4 + '{"path":"notes.txt"}' 20 + "hi" 2 + the tool's JSON
    expected = 72 + len(
        '{"name":"read","description":"Read a file.","input_schema":{"type":"object"}}'
    )
    assert prompt_chars(anthropic_body) == expected
    assert prompt_chars(chat_body) == expected
    assert prompt_tokens(anthropic_body, 4) == -(-expected // 4)
    image = {"type": "image", "source": {"type": "base64", "data": "A" * 100_000}}
    assert prompt_chars({"messages": [{"role": "user", "content": [image]}]}) == IMAGE_CHARS


# -- overflow --------------------------------------------------------------------------------


def test_anthropic_overflow_is_the_real_error(server: FakeProviderServer) -> None:
    server.context_window(10)
    server.script(Reply(text="kept for later"))
    with pytest.raises(anthropic.BadRequestError) as caught:
        ask_anthropic(server)
    assert caught.value.status_code == 400
    body = caught.value.body
    assert isinstance(body, dict)
    assert body["type"] == "error"
    assert body["error"] == {
        "type": "invalid_request_error",
        "message": "prompt is too long: 11 tokens > 10 maximum",
    }
    assert overflow_figures(str(caught.value)) == (11, 10)
    assert [(e["outcome"], e["prompt_tokens"]) for e in server.log()] == [("overflow", 11)]
    assert server.pending() == 1, "the scripted reply waits for a request that fits"
    server.context_window(11)
    reply = ask_anthropic(server)
    assert reply.content[0].text == "kept for later"
    assert reply.usage.input_tokens == 11
    assert server.log()[-1]["outcome"] == "scripted"


def test_openai_chat_overflow_is_the_real_error(server: FakeProviderServer) -> None:
    server.context_window(32_000)
    with pytest.raises(openai.BadRequestError) as caught:
        ask_chat(server, "x" * (40_123 * 4 - len(SYSTEM)))
    error = caught.value
    assert error.status_code == 400
    assert error.code == "context_length_exceeded" and error.param == "messages"
    assert error.type == "invalid_request_error"
    assert error.body == {
        "message": "This model's maximum context length is 32000 tokens. However, your messages "
        "resulted in 40123 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
    assert overflow_figures(str(error)) == (40_123, 32_000)


def test_openai_responses_overflow_is_the_real_error(server: FakeProviderServer) -> None:
    server.context_window(10)
    with pytest.raises(openai.BadRequestError) as caught:
        ask_responses(server)
    error = caught.value
    assert error.status_code == 400
    assert error.code == "context_length_exceeded" and error.param == "input"
    assert error.body == {
        "message": "Your input exceeds the context window of this model. Please adjust your "
        "input and try again.",
        "type": "invalid_request_error",
        "param": "input",
        "code": "context_length_exceeded",
    }
    assert server.log()[-1]["outcome"] == "overflow"


def test_a_request_that_fits_reports_the_count_as_usage(server: FakeProviderServer) -> None:
    server.context_window(1_000)
    assert ask_anthropic(server).usage.input_tokens == 11
    assert ask_chat(server).usage.prompt_tokens == 11
    assert ask_responses(server).usage.input_tokens == 11
    assert [e["prompt_tokens"] for e in server.log()] == [11, 11, 11]


@pytest.mark.parametrize(
    ("ref", "key"),
    [
        ("anthropic/claude-haiku-4-5", ANTHROPIC_KEY),
        ("openai/gpt-4.1", OPENAI_KEY),
        ("openai/gpt-5", OPENAI_KEY),
    ],
)
async def test_engine_providers_stream_the_count_as_usage(
    server: FakeProviderServer, ref: str, key: str
) -> None:
    """What the engine's calibration reads: the streamed Finish's input tokens."""
    server.context_window(100_000, chars_per_token=3)
    events = await collect(provider_for(server, ref), request_for(ref.split("/")[1]), key)
    assert finish_of(events).usage.input == server.log()[-1]["prompt_tokens"]


def test_forced_overflows_then_success(server: FakeProviderServer) -> None:
    server.script(Reply.overflow(), Reply.overflow(), Reply.overflow(), Reply(text="finally"))
    for _ in range(3):
        with pytest.raises(anthropic.BadRequestError) as caught:
            ask_anthropic(server)
        # No window: the figures still read as an overflow.
        prompt, limit = overflow_figures(str(caught.value))
        assert limit == 200_000 and prompt is not None and prompt > limit
    assert ask_anthropic(server).content[0].text == "finally"
    assert [e["outcome"] for e in server.log()] == ["overflow"] * 3 + ["scripted"]


def test_forced_overflow_names_the_window(server: FakeProviderServer) -> None:
    server.context_window(32_000)
    server.script(Reply.overflow(api="openai-chat"))
    with pytest.raises(openai.BadRequestError) as caught:
        ask_chat(server)
    assert overflow_figures(str(caught.value)) == (34_000, 32_000)
    server.script(Reply.overflow(prompt_tokens=40_123))
    with pytest.raises(anthropic.BadRequestError) as exact:
        ask_anthropic(server)
    assert "prompt is too long: 40123 tokens > 32000 maximum" in str(exact.value)


# -- summariser requests ---------------------------------------------------------------------


def test_the_fake_knows_the_engines_summariser_prompt() -> None:
    assert SUMMARIZER_SYSTEM_PROMPT.startswith(SUMMARIZER_PROMPT_PREFIX)
    assert SUMMARIZER_SYSTEM_PROMPT[len(SUMMARIZER_PROMPT_PREFIX)] == " "


def _summary_prompt() -> str:
    entries = [
        user("read notes.txt then say done", "u1"),
        user("now write report.md with the totals", "u2"),
    ]
    return build_summary_prompt(entries, build_summary_instructions())


def test_summariser_request_gets_an_automatic_summary(server: FakeProviderServer) -> None:
    server.script(Reply(text="for the chat"))
    reply = ask_anthropic(server, _summary_prompt(), SUMMARIZER_SYSTEM_PROMPT)
    text = reply.content[0].text
    assert has_required_headings(text) and len(text) < 1_500
    assert AUTO_SUMMARY_MARK in text
    assert "- now write report.md with the totals" in text
    assert "- notes.txt" in text and "- report.md" in text
    assert server.pending() == 1, "the chat reply is not a summary"
    assert ask_anthropic(server).content[0].text == "for the chat"
    log = server.log()
    assert [(e["purpose"], e["outcome"]) for e in log] == [
        ("summary", "summary"),
        ("chat", "scripted"),
    ]
    # The same on the OpenAI endpoints, for a merge prompt too.
    merge = build_merge_prompt([text, text])
    for answer in (
        ask_chat(server, merge, SUMMARIZER_SYSTEM_PROMPT).choices[0].message.content,
        ask_responses(server, merge, SUMMARIZER_SYSTEM_PROMPT).output_text,
    ):
        assert has_required_headings(answer) and "merged 2 partial summaries" in answer


def test_summary_replies_go_to_summariser_requests_only(server: FakeProviderServer) -> None:
    server.script(Reply(text="scripted summary", purpose="summary"), Reply(text="chat"))
    assert ask_anthropic(server).content[0].text == "chat"
    summary = ask_anthropic(server, _summary_prompt(), SUMMARIZER_SYSTEM_PROMPT)
    assert summary.content[0].text == "scripted summary"
    assert [e["outcome"] for e in server.log()] == ["scripted", "scripted"]


def test_summariser_requests_overflow_too(server: FakeProviderServer) -> None:
    server.context_window(50)
    with pytest.raises(anthropic.BadRequestError):
        ask_anthropic(server, _summary_prompt(), SUMMARIZER_SYSTEM_PROMPT)
    server.context_window(None)
    server.script(Reply.overflow(purpose="summary"))
    with pytest.raises(anthropic.BadRequestError):
        ask_anthropic(server, _summary_prompt(), SUMMARIZER_SYSTEM_PROMPT)
    assert [(e["purpose"], e["outcome"]) for e in server.log()] == [("summary", "overflow")] * 2


def test_chaos_leaves_summariser_requests_alone(server: FakeProviderServer) -> None:
    server.chaos(rate_limit=1.0)
    text = ask_anthropic(server, _summary_prompt(), SUMMARIZER_SYSTEM_PROMPT).content[0].text
    assert has_required_headings(text)


async def test_engine_summary_request_through_the_provider(server: FakeProviderServer) -> None:
    request = request_for(
        "claude-haiku-4-5", [user(_summary_prompt())], system=SUMMARIZER_SYSTEM_PROMPT
    )
    events = await collect(
        provider_for(server, "anthropic/claude-haiku-4-5"), request, ANTHROPIC_KEY
    )
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert has_required_headings(text)
    assert server.log()[-1]["purpose"] == "summary"


# -- control API -----------------------------------------------------------------------------


def test_context_control_endpoint(server: FakeProviderServer) -> None:
    client = FakeProviderClient(server.base_url)
    took = client.context_window(10, chars_per_token=2)
    assert (took.window, took.chars_per_token) == (10, 2)
    with pytest.raises(anthropic.BadRequestError):
        ask_anthropic(server)  # 44 characters at 2 a token: 22 > 10
    assert client.context_window(None).window is None
    ask_anthropic(server)
    client.context_window(10)
    client._call("POST", "/_control/context", {})  # {} turns it off too
    ask_anthropic(server)
    client.context_window(10)
    client.reset()
    ask_anthropic(server)
    assert [e["outcome"] for e in client.log()] == ["ok"]
    with pytest.raises(urllib.error.HTTPError) as refused:
        client._call("POST", "/_control/context", {"window": 0})
    assert refused.value.code == 400
