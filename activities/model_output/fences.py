"""Markdown code-fence detection shared by the think-tag stripper and the block chunker.

SPEC §15: a line indented by at most three spaces that starts with three or more backticks or
tildes opens a fence; a line of the same character, at least as long, closes it; an unclosed fence
runs to the end of the text. A break position is unsafe when it lies strictly inside a fence span.

Two refinements over that wording follow CommonMark, so that what is treated as code is what chat
clients render as code:

* a closing line holds nothing but whitespace after its marker (```` ```js ```` inside a block is
  content, not a close);
* a backtick opener's info string holds no backtick, so a one-line ```` ```npm i``` ```` is an
  inline code span, not a fence that would swallow the rest of the message.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_OPENER_RE = re.compile(r"( {0,3})(`{3,}|~{3,})(.*)")
_CLOSER_RE = re.compile(r" {0,3}(`{3,}|~{3,})[ \t]*")
# A line start that may still turn into a fence opener once more characters arrive.
_OPENER_PREFIX_RE = re.compile(r" {0,3}(?:`{0,2}|~{0,2})")
FENCE_HEAD_RE = re.compile(r" {0,3}(?:`{3,}|~{3,})")
_CLOSER_PREFIX_RE = re.compile(r" {0,3}([`~]*)[ \t]*")


@dataclass(frozen=True)
class FenceOpener:
    indent: str
    marker: str

    def closing_line(self) -> str:
        return f"{self.indent}{self.marker}"


@dataclass(frozen=True)
class FenceSpan:
    """One fenced block of a text, by character offsets into that text."""

    start: int
    """Offset of the first character of the opening line."""
    end: int
    """Offset of the newline that ends the closing line, or the text length when unclosed."""
    open_line: str
    opener: FenceOpener
    open_line_end: int
    """Offset of the newline that ends the opening line, or the text length."""
    close_line_start: int | None
    """Offset of the first character of the closing line; None while the fence is unclosed."""

    def strictly_contains(self, index: int) -> bool:
        # An unclosed fence is still growing: its end is not a boundary yet.
        if self.close_line_start is None:
            return self.start < index
        return self.start < index < self.end

    @property
    def closed(self) -> bool:
        return self.close_line_start is not None


def _without_cr(line: str) -> str:
    return line[:-1] if line.endswith("\r") else line


def match_fence_opener(line: str) -> FenceOpener | None:
    """The opener a complete line (no newline) starts, or None if it opens no fence."""
    found = _OPENER_RE.fullmatch(_without_cr(line))
    if found is None:
        return None
    indent, marker, info = found.groups()
    if marker[0] == "`" and "`" in info:
        return None
    return FenceOpener(indent=indent, marker=marker)


def is_fence_closer(line: str, opener: FenceOpener) -> bool:
    """Whether a complete line (no newline) closes the fence that `opener` opened."""
    found = _CLOSER_RE.fullmatch(_without_cr(line))
    if found is None:
        return False
    marker = found.group(1)
    return marker[0] == opener.marker[0] and len(marker) >= len(opener.marker)


def may_become_fence_opener(partial_line: str) -> bool:
    """Whether an incomplete line could still grow into a fence opener."""
    return _OPENER_PREFIX_RE.fullmatch(partial_line) is not None or (
        FENCE_HEAD_RE.match(partial_line) is not None
    )


def may_become_fence_closer(partial_line: str, opener: FenceOpener) -> bool:
    """Whether an incomplete line could still grow into the line that closes `opener`."""
    found = _CLOSER_PREFIX_RE.fullmatch(partial_line)
    return found is not None and set(found.group(1)) <= {opener.marker[0]}


def parse_fence_spans(text: str) -> list[FenceSpan]:
    spans: list[FenceSpan] = []
    open_at: tuple[int, int, str, FenceOpener] | None = None
    line_start = 0
    while True:
        newline = text.find("\n", line_start)
        line_end = len(text) if newline == -1 else newline
        line = text[line_start:line_end]
        if open_at is None:
            opener = match_fence_opener(line)
            if opener is not None:
                open_at = (line_start, line_end, line, opener)
        elif is_fence_closer(line, open_at[3]):
            start, open_end, open_line, opener = open_at
            spans.append(FenceSpan(start, line_end, open_line, opener, open_end, line_start))
            open_at = None
        if newline == -1:
            break
        line_start = newline + 1
    if open_at is not None:
        start, open_end, open_line, opener = open_at
        spans.append(FenceSpan(start, len(text), open_line, opener, open_end, None))
    return spans


def fence_span_at(spans: Sequence[FenceSpan], index: int) -> FenceSpan | None:
    for span in spans:
        if span.strictly_contains(index):
            return span
    return None


def is_safe_break(spans: Sequence[FenceSpan], index: int) -> bool:
    return fence_span_at(spans, index) is None
