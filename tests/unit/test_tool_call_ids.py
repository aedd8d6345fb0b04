"""Tool-call ids unique in a session and in each provider's form (activities/providers/
tool_call_ids.py), and calls streamed without an `index` kept apart."""

from __future__ import annotations

import re

from openai._models import construct_type
from openai.types.chat import ChatCompletionChunk

from activities.providers.openai_provider import OpenAIChatProvider, _State
from activities.providers.tool_call_ids import (
    anthropic_wire_id,
    openai_wire_id,
    session_call_id,
)

ANTHROPIC_FORM = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def test_a_providers_random_id_is_kept() -> None:
    given = "toolu_01A09q90qw90lq917835lq9"
    assert session_call_id(given, "e1", 0, set()) == given


def test_counters_missing_ids_and_taken_ones_are_replaced() -> None:
    taken = {"call_0123456789abcdefghij"}
    made = {
        session_call_id("call_0", "e1", 0, taken),
        session_call_id("call_0", "e2", 0, taken),
        session_call_id("", "e2", 1, taken),
        session_call_id("call_0123456789abcdefghij", "e3", 0, taken),
        session_call_id("functions.read:0", "e3", 1, taken),
    }
    assert len(made) == 5 and not made & taken
    assert all(ANTHROPIC_FORM.match(i) and len(i) <= 40 for i in made)
    # The same on every attempt of the same call.
    assert session_call_id("call_0", "e1", 0, taken) == session_call_id("call_0", "e1", 0, taken)


def test_ids_recorded_earlier_are_put_in_each_apis_form() -> None:
    assert anthropic_wire_id("toolu_abc") == "toolu_abc"
    odd = anthropic_wire_id("functions.read:0")
    assert ANTHROPIC_FORM.match(odd) and odd == anthropic_wire_id("functions.read:0")
    assert openai_wire_id("call_abc") == "call_abc"
    assert len(openai_wire_id("x" * 64)) <= 40


def _chunk(tool_calls: list[dict[str, object]]) -> ChatCompletionChunk:
    """As the SDK makes a streamed chunk: without validating it (a server may leave out
    fields its types require, as `index` here)."""
    data = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "delta": {"tool_calls": tool_calls}, "finish_reason": None}],
    }
    chunk: ChatCompletionChunk = construct_type(type_=ChatCompletionChunk, value=data)
    return chunk


def _calls(chunks: list[list[dict[str, object]]]) -> list[tuple[str, str]]:
    provider = OpenAIChatProvider.__new__(OpenAIChatProvider)
    state = _State()
    for pieces in chunks:
        provider._translate(_chunk(pieces), state)
    ordered = sorted(state.calls.values(), key=lambda c: c.ordinal)
    return [(c.id, "".join(c.parts)) for c in ordered]


def test_whole_calls_without_an_index_stay_apart() -> None:
    def whole(call_id: str, path: str) -> dict[str, object]:
        args = '{"path": "' + path + '"}'
        return {"id": call_id, "type": "function", "function": {"name": "read", "arguments": args}}

    assert _calls([[whole("g1", "a")], [whole("g2", "b")]]) == [
        ("g1", '{"path": "a"}'),
        ("g2", '{"path": "b"}'),
    ]


def test_indexed_deltas_still_join() -> None:
    first = {"index": 0, "id": "c1", "type": "function", "function": {"name": "read"}}
    more = {"index": 0, "function": {"arguments": '{"path": "a"}'}}
    assert _calls([[first], [more]]) == [("c1", '{"path": "a"}')]
