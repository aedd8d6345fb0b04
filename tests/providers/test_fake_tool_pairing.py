"""The fake refuses unpaired tool calls and results as the real APIs do (tests/fakes/tool_pairing),
so transcript-repair tests can fail."""

from __future__ import annotations

import anthropic
import openai
import pytest

from tests.fakes.provider_server import FakeProviderServer


def test_an_orphan_tool_result_gets_anthropics_400() -> None:
    with FakeProviderServer(anthropic_keys=["k"]) as fake:
        client = anthropic.Anthropic(api_key="k", base_url=fake.anthropic_base_url)
        with pytest.raises(anthropic.BadRequestError) as err:
            client.messages.create(
                model="m",
                max_tokens=10,
                messages=[
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "hello"},
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": "toolu_x", "content": "r"}
                        ],
                    },
                ],
            )
        assert "unexpected `tool_use_id` found in `tool_result` blocks: toolu_x" in str(err.value)


def test_a_call_without_results_gets_openais_400() -> None:
    with FakeProviderServer(openai_keys=["k"]) as fake:
        client = openai.OpenAI(api_key="k", base_url=fake.openai_base_url)
        with pytest.raises(openai.BadRequestError) as err:
            client.chat.completions.create(
                model="m",
                messages=[
                    {"role": "user", "content": "hi"},
                    {
                        "role": "assistant",
                        "tool_calls": [
                            {
                                "id": "call_1",
                                "type": "function",
                                "function": {"name": "read", "arguments": "{}"},
                            }
                        ],
                    },
                    {"role": "user", "content": "and?"},
                ],
            )
        assert "did not have response messages: call_1" in str(err.value)
