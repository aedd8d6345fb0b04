"""Text from a provider made valid Unicode before anything stores or sends it.

A JSON string may escape a character outside the BMP as a surrogate pair (`"\\ud83d\\ude00"`), and a
server that escapes per token can split the pair over two stream chunks; a broken model can emit
a lone half. Python decodes each half into a lone surrogate, which no UTF-8 encoder takes: the
first store write or publish of such a reply failed, and the retried activity called (and billed)
the provider again, eight times. Here a pair split over deltas is joined, and a lone half becomes
U+FFFD, in text, reasoning and tool-call arguments alike.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from activities.providers.base import (
    Finish,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallComplete,
)

_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_unicode(text: str) -> str:
    """Adjacent halves joined into their character, a lone one replaced by U+FFFD."""
    if not _SURROGATE.search(text):
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


class _Mender:
    """One stream of deltas: a high half at the end of a delta waits for the next one."""

    def __init__(self) -> None:
        self.pending = ""

    def feed(self, text: str) -> str:
        text = self.pending + text
        self.pending = ""
        if text and "\ud800" <= text[-1] <= "\udbff":
            self.pending, text = text[-1], text[:-1]
        return valid_unicode(text)

    def flush(self) -> str:
        pending, self.pending = self.pending, ""
        return "\ufffd" if pending else ""


def _mend_value(value: Any) -> Any:
    if isinstance(value, str):
        return valid_unicode(value)
    if isinstance(value, list):
        return [_mend_value(v) for v in value]
    if isinstance(value, dict):
        return {valid_unicode(str(k)): _mend_value(v) for k, v in value.items()}
    return value


def valid_arguments(arguments_json: str) -> str:
    """Tool-call arguments whose strings are valid Unicode (escaped halves included); text that
    is not JSON is left for the caller to refuse as it is."""
    text = valid_unicode(arguments_json)
    if "\\u" not in text.lower():
        return text
    try:
        value = json.loads(text)
    except ValueError:
        return text
    mended = _mend_value(value)
    return text if mended == value else json.dumps(mended, ensure_ascii=False)


async def mended(stream: AsyncIterator[StreamEvent]) -> AsyncIterator[StreamEvent]:
    text, reasoning = _Mender(), _Mender()
    async for event in stream:
        if isinstance(event, TextDelta):
            fixed = text.feed(event.text)
            if fixed:
                yield TextDelta(fixed)
            continue
        if isinstance(event, ReasoningDelta):
            fixed = reasoning.feed(event.text)
            if fixed:
                yield ReasoningDelta(fixed)
            continue
        if isinstance(event, ToolCallComplete):
            args = valid_arguments(event.arguments_json)
            if args is not event.arguments_json:
                event = replace(event, arguments_json=args)
        elif isinstance(event, Finish):
            for mender, kind in ((text, TextDelta), (reasoning, ReasoningDelta)):
                rest = mender.flush()
                if rest:
                    yield kind(rest)
        yield event
    for mender, kind in ((text, TextDelta), (reasoning, ReasoningDelta)):
        rest = mender.flush()
        if rest:
            yield kind(rest)
