"""Surrogate halves from a provider: joined when they pair up across deltas, else U+FFFD."""

from __future__ import annotations

import json

from activities.providers.base import Finish, TextDelta, ToolCallComplete
from activities.providers.unicode_repair import mended, valid_arguments, valid_unicode
from agentlane.usage import Usage


def test_pairs_are_joined_and_lone_halves_replaced() -> None:
    assert valid_unicode("a\ud83d\ude00b") == "a😀b"
    assert valid_unicode("a\ud800b\udc00") == "a\ufffdb\ufffd"
    plain = "nothing to mend ✓"
    assert valid_unicode(plain) is plain


def test_escaped_halves_in_arguments() -> None:
    raw = json.dumps({"content": "x\ud800y", "ok": ["\ud83d\ude00"]})
    assert json.loads(valid_arguments(raw)) == {"content": "x\ufffdy", "ok": ["😀"]}
    assert valid_arguments('{"broken": ') == '{"broken": '


async def test_a_pair_split_over_deltas_is_one_character() -> None:
    async def stream():  # type: ignore[no-untyped-def]
        yield TextDelta("smile \ud83d")
        yield TextDelta("\ude00!")
        yield ToolCallComplete(0, "c", "write", '{"a": "\\ud800"}')
        yield TextDelta("end \ud83d")
        yield Finish("end_turn", Usage())

    got = [e async for e in mended(stream())]
    texts = "".join(e.text for e in got if isinstance(e, TextDelta))
    assert texts == "smile 😀!end \ufffd"
    call = next(e for e in got if isinstance(e, ToolCallComplete))
    assert json.loads(call.arguments_json) == {"a": "\ufffd"}
    assert isinstance(got[-1], Finish)
