"""Think / final tags and reasoning modes (SPEC §16, cases T68, T70, T71 of §18.11).

Models without native thinking blocks write their reasoning inline between `<think>` tags
(also `thinking`, `thought`, `antthinking`, optionally `antml:`-prefixed, with attributes,
any case, whitespace inside the brackets). "Reasoning tag" providers also wrap the answer in
`<final>…</final>`. Tags inside inline code spans or fenced code blocks are literal text.

One scanner serves both the streaming stripper and the whole-text function, so a message
streamed in any number of deltas yields exactly the text that stripping it whole yields. To make
that hold, the streaming side holds back only what it cannot decide yet: a possible partial tag,
a backtick run that may still grow, a line that may still become a fence opener, and an inline
code span whose closing backticks have not arrived (a span ends at a blank line or a fence line,
as in CommonMark; an unmatched backtick run is literal and does not hide later tags).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final, Literal

from activities.model_output.fences import (
    FENCE_HEAD_RE,
    FenceOpener,
    is_fence_closer,
    match_fence_opener,
    may_become_fence_opener,
)

THINKING_TAG_NAMES: Final = ("think", "thinking", "thought", "antthinking")
FINAL_TAG_NAME: Final = "final"

# Longest tag (attributes included) we accept; a longer "<think …" is literal text, in both the
# streaming and whole-text paths, so a stray "<" cannot hold back a stream indefinitely.
_MAX_TAG_CHARS: Final = 256

_TAG_RE = re.compile(
    r"<\s*(?P<close>/?)\s*(?:antml:)?"
    r"(?P<name>antthinking|thinking|thought|think|final)(?=[\s/>])[^<>]*>",
    re.IGNORECASE,
)
_TAG_LEAD_RE = re.compile(r"<\s*/?\s*")
_INLINE_SPECIAL_RE = re.compile(r"[<`\n]")
# What can end an inline code span: a backtick run (its partner) or a newline (a blank line).
_SPAN_SCAN_RE = re.compile(r"`+|\n")
_LEADING_THINK_TAG_RE = re.compile(
    r"\s*<\s*(?:antml:)?(?:antthinking|thinking|thought|think)(?=[\s/>])[^<>/]*>", re.IGNORECASE
)
_ALL_TAG_NAMES: Final = (*THINKING_TAG_NAMES, FINAL_TAG_NAME)
_ANTML_PREFIX: Final = "antml:"
_REASONING_BLOCK_SEPARATOR: Final = "\n\n"


class _Undecided:
    """Marker: the text seen so far cannot settle the question; wait for more."""


_UNDECIDED: Final = _Undecided()

StripMode = Literal["strict", "preserve"]
TrimMode = Literal["both", "none", "start"]


def _could_be_partial_tag(fragment: str) -> bool:
    """Whether `fragment` (starting at "<", without ">") may still grow into a tag."""
    if len(fragment) >= _MAX_TAG_CHARS or ">" in fragment or "<" in fragment[1:]:
        return False
    lead = _TAG_LEAD_RE.match(fragment)
    rest = fragment[lead.end() if lead else 1 :].lower()
    if rest.startswith(_ANTML_PREFIX):
        rest = rest[len(_ANTML_PREFIX) :]
    elif _ANTML_PREFIX.startswith(rest):
        return True
    for name in _ALL_TAG_NAMES:
        if name.startswith(rest):
            return True
        if rest.startswith(name) and (rest[len(name)].isspace() or rest[len(name)] == "/"):
            return True
    return False


def _line_ends_paragraph(text: str, line_start: int, at_end: bool) -> bool | _Undecided:
    """Whether the line starting at `line_start` is blank or a fence opener (ends a code span)."""
    newline = text.find("\n", line_start)
    if newline != -1:
        line = text[line_start:newline]
        return not line.strip(" \t") or match_fence_opener(line) is not None
    line = text[line_start:]
    if at_end:
        return not line.strip(" \t") or match_fence_opener(line) is not None
    if not line.strip(" \t") or may_become_fence_opener(line):
        return _UNDECIDED
    return False


def _find_code_span_end(
    text: str, start: int, ticks: int, at_end: bool
) -> tuple[int | None | _Undecided, int]:
    """End offset of the code span whose opening run of `ticks` backticks ends before `start`.

    None when the run has no partner before the paragraph ends: it is then literal text. The
    second value is how far the text was settled: when undecided, a later probe of the same
    (grown) text may resume there.
    """
    for found in _SPAN_SCAN_RE.finditer(text, start):
        if found.group(0) == "\n":
            ends = _line_ends_paragraph(text, found.end(), at_end)
            if isinstance(ends, _Undecided):
                return _UNDECIDED, found.start()
            if ends:
                return None, found.start()
        elif found.end() == len(text) and not at_end:
            return _UNDECIDED, found.start()
        elif len(found.group(0)) == ticks:
            return found.end(), found.end()
    return (None if at_end else _UNDECIDED), len(text)


@dataclass
class _Output:
    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)


class _TagScanner:
    """State machine over raw model text; see the module docstring for what it holds back."""

    def __init__(self, *, enforce_final_tag: bool) -> None:
        self.enforce_final_tag = enforce_final_tag
        self.in_thinking = False
        self.in_final = False
        self.saw_final = False
        self.reasoning_seen = False
        self.open_block: list[str] = []
        self._fence: FenceOpener | None = None
        self._fence_line = ""
        self._at_line_start = True
        self._separate_next_reasoning = False
        # How far the code-span probe of a held backtick run at the start of the held text
        # got, so a long paragraph after a lone backtick is not rescanned on every delta.
        self._held_span_probe: tuple[int, int] | None = None
        self._resume_span_probe: tuple[int, int] | None = None

    def scan(self, text: str, *, at_end: bool) -> tuple[int, _Output]:
        """Process `text`; return how many characters were consumed and what they produced."""
        out = _Output()
        self._resume_span_probe, self._held_span_probe = self._held_span_probe, None
        pos = 0
        while pos < len(text):
            step: int | None
            if self._fence is not None:
                step = self._step_in_fence(self._fence, text, pos, out)
            elif self._at_line_start:
                step = self._step_line_start(text, pos, at_end, out)
            else:
                step = self._step_inline(text, pos, at_end, out)
            if step is None:
                break
            pos = step
        return pos, out

    def _route(self, segment: str, out: _Output) -> None:
        if not segment:
            return
        if self.in_thinking:
            if self._separate_next_reasoning:
                out.reasoning.append(_REASONING_BLOCK_SEPARATOR)
                self._separate_next_reasoning = False
            out.reasoning.append(segment)
            self.open_block.append(segment)
            self.reasoning_seen = True
        elif not self.enforce_final_tag or self.in_final:
            out.text.append(segment)

    def _step_in_fence(self, fence: FenceOpener, text: str, pos: int, out: _Output) -> int:
        newline = text.find("\n", pos)
        end = len(text) if newline == -1 else newline + 1
        self._route(text[pos:end], out)
        if newline == -1:
            self._fence_line += text[pos:end]
            return end
        line = self._fence_line + text[pos:newline]
        self._fence_line = ""
        if is_fence_closer(line, fence):
            self._fence = None
        return end

    def _step_line_start(self, text: str, pos: int, at_end: bool, out: _Output) -> int | None:
        newline = text.find("\n", pos)
        line_end = len(text) if newline == -1 else newline
        if FENCE_HEAD_RE.match(text, pos) is None:
            if not at_end and newline == -1 and may_become_fence_opener(text[pos:]):
                return None
            self._at_line_start = False
            return pos
        # Whether a backtick run opens a fence depends on the whole line (info string).
        if newline == -1 and not at_end:
            return None
        opener = match_fence_opener(text[pos:line_end])
        if opener is None:
            self._at_line_start = False
            return pos
        end = line_end if newline == -1 else newline + 1
        self._route(text[pos:end], out)
        self._fence = opener
        self._fence_line = ""
        return end

    def _step_inline(self, text: str, pos: int, at_end: bool, out: _Output) -> int | None:
        special = _INLINE_SPECIAL_RE.search(text, pos)
        if special is None:
            self._route(text[pos:], out)
            return len(text)
        index = special.start()
        if index > pos:
            self._route(text[pos:index], out)
            return index
        char = text[index]
        if char == "\n":
            self._route(char, out)
            self._at_line_start = True
            return index + 1
        if char == "`":
            return self._step_backticks(text, index, at_end, out)
        return self._step_angle(text, index, at_end, out)

    def _step_backticks(self, text: str, index: int, at_end: bool, out: _Output) -> int | None:
        run_end = index
        while run_end < len(text) and text[run_end] == "`":
            run_end += 1
        if run_end == len(text) and not at_end:
            return None
        ticks = run_end - index
        probe_from = run_end
        resume, self._resume_span_probe = self._resume_span_probe, None
        if index == 0 and resume is not None and resume[0] == ticks:
            probe_from = max(run_end, resume[1])
        span_end, settled = _find_code_span_end(text, probe_from, ticks, at_end)
        if isinstance(span_end, _Undecided):
            self._held_span_probe = (ticks, settled - index)
            return None
        stop = run_end if span_end is None else span_end
        self._route(text[index:stop], out)
        return stop

    def _step_angle(self, text: str, index: int, at_end: bool, out: _Output) -> int | None:
        tag = _TAG_RE.match(text, index)
        if tag is not None and len(tag.group(0)) <= _MAX_TAG_CHARS:
            self._apply_tag(tag, out)
            return tag.end()
        if not at_end and _could_be_partial_tag(text[index : index + _MAX_TAG_CHARS]):
            return None
        self._route("<", out)
        return index + 1

    def _apply_tag(self, tag: re.Match[str], out: _Output) -> None:
        closing = tag.group("close") == "/"
        self_closing = not closing and tag.group(0)[:-1].rstrip().endswith("/")
        if self_closing:
            return
        if tag.group("name").lower() != FINAL_TAG_NAME:
            self._apply_thinking_tag(closing)
        elif not self.in_thinking:
            # Final tags inside reasoning are dropped and never switch the answer on or off.
            self.in_final = not closing
            self.saw_final = self.saw_final or not closing

    def _apply_thinking_tag(self, closing: bool) -> None:
        # Not nesting-aware (SPEC §16): a second opener is dropped, the first closer ends it.
        if closing:
            if self.in_thinking:
                self.in_thinking = False
                self.open_block = []
            return
        if not self.in_thinking:
            self.in_thinking = True
            self.open_block = []
            self._separate_next_reasoning = self.reasoning_seen


@dataclass(frozen=True)
class StrippedDelta:
    """What one streamed delta contributed: user-visible text and removed reasoning text."""

    text: str
    reasoning: str


class ThinkTagStreamStripper:
    """Strips think/final tags from one assistant message streamed as text deltas.

    Use one instance per assistant message (or call `reset` between messages). `feed` returns
    only what can be decided so far; `finish` releases whatever was held back at message end.
    With `enforce_final_tag`, only text inside `<final>…</final>` is ever emitted.
    """

    def __init__(self, *, enforce_final_tag: bool = False) -> None:
        self._enforce_final_tag = enforce_final_tag
        self._scanner = _TagScanner(enforce_final_tag=enforce_final_tag)
        self._pending = ""
        self._text: list[str] = []
        self._reasoning: list[str] = []

    def feed(self, delta: str) -> StrippedDelta:
        self._pending += delta
        return self._scan(at_end=False)

    def finish(self) -> StrippedDelta:
        return self._scan(at_end=True)

    def reset(self) -> None:
        """Forget everything, ready for the next assistant message."""
        self._scanner = _TagScanner(enforce_final_tag=self._enforce_final_tag)
        self._pending = ""
        self._text = []
        self._reasoning = []

    def _scan(self, *, at_end: bool) -> StrippedDelta:
        consumed, out = self._scanner.scan(self._pending, at_end=at_end)
        self._pending = self._pending[consumed:]
        delta = StrippedDelta(text="".join(out.text), reasoning="".join(out.reasoning))
        if delta.text:
            self._text.append(delta.text)
        if delta.reasoning:
            self._reasoning.append(delta.reasoning)
        return delta

    @property
    def text(self) -> str:
        """All user-visible text emitted so far."""
        return "".join(self._text)

    @property
    def reasoning(self) -> str:
        """All reasoning removed so far; separate thinking blocks are joined by a blank line."""
        return "".join(self._reasoning)

    @property
    def held_back(self) -> str:
        """Raw text received but not yet decided (released by the next `feed` or `finish`)."""
        return self._pending

    @property
    def in_thinking(self) -> bool:
        return self._scanner.in_thinking

    @property
    def saw_final_tag(self) -> bool:
        return self._scanner.saw_final


def _trim(text: str, trim: TrimMode) -> str:
    if trim == "both":
        return text.strip()
    if trim == "start":
        return text.lstrip()
    return text


def strip_reasoning_tags_from_text(
    text: str, mode: StripMode = "strict", trim: TrimMode = "both"
) -> str:
    """Remove thinking blocks and final tags (outside code) from a complete text.

    An unclosed thinking block drops the rest of the text in `strict` mode and keeps it (without
    its opening tag) in `preserve` mode.
    """
    scanner = _TagScanner(enforce_final_tag=False)
    _, out = scanner.scan(text, at_end=True)
    visible = "".join(out.text)
    if scanner.in_thinking and mode == "preserve":
        visible += "".join(scanner.open_block)
    return _trim(visible, trim)


def split_reasoning_from_text(text: str) -> tuple[str, str]:
    """(reasoning, visible text) of a complete text, both untrimmed; strict on unclosed blocks."""
    scanner = _TagScanner(enforce_final_tag=False)
    _, out = scanner.scan(text, at_end=True)
    return "".join(out.reasoning), "".join(out.text)


class ReasoningMode(StrEnum):
    """`reasoningLevel` (SPEC §16): hidden, delivered as its own block, or streamed."""

    OFF = "off"
    ON = "on"
    STREAM = "stream"


REASONING_HEADER: Final = "Reasoning:"


def format_reasoning_message(reasoning: str) -> str | None:
    """Format reasoning for mode `on`: a `Reasoning:` line, then each non-empty line as `_line_`.

    Blank lines between paragraphs are kept as they are; None when there is no reasoning.
    """
    lines = reasoning.strip().splitlines()
    if not lines:
        return None
    rendered = [f"_{line.strip()}_" if line.strip() else "" for line in lines]
    return "\n".join([REASONING_HEADER, *rendered])


@dataclass(frozen=True)
class ReasoningDelivery:
    """What to deliver for one assistant message, in order."""

    reasoning_block: str | None
    """A block reply sent before the answer (mode `on`)."""
    reasoning_stream: str | None
    """Formatted reasoning for the reasoning stream (mode `stream`, when a consumer exists)."""
    answer: str | None

    def block_replies(self) -> list[str]:
        return [reply for reply in (self.reasoning_block, self.answer) if reply]


def plan_reasoning_delivery(
    mode: ReasoningMode | str,
    reasoning: str,
    answer: str,
    *,
    has_reasoning_stream: bool = True,
) -> ReasoningDelivery:
    """Decide what reasoning and answer text reach the user under a reasoning mode."""
    resolved = ReasoningMode(mode)
    formatted = format_reasoning_message(reasoning)
    stripped_answer = answer.strip() or None
    return ReasoningDelivery(
        reasoning_block=formatted if resolved is ReasoningMode.ON else None,
        reasoning_stream=(
            formatted if resolved is ReasoningMode.STREAM and has_reasoning_stream else None
        ),
        answer=stripped_answer,
    )


@dataclass(frozen=True)
class PromotedText:
    """A stored text block split into a thinking block and the text that follows it."""

    reasoning: str | None
    """None when the text did not start with a think tag and was left as it was."""
    text: str


def promote_thinking_tags_to_blocks(text: str) -> PromotedText:
    """Split a stored text block that starts with a think tag into (reasoning, text).

    Only a text that starts (after whitespace) with a thinking tag is rewritten; both parts are
    trimmed. Callers skip this when the message already carries a native thinking block.
    """
    if _LEADING_THINK_TAG_RE.match(text) is None:
        return PromotedText(reasoning=None, text=text)
    reasoning, visible = split_reasoning_from_text(text)
    return PromotedText(reasoning=reasoning.strip(), text=visible.strip())
