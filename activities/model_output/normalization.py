"""Text normalisation applied to every runtime's output (seed 004, "Text Normalization").

SPEC names no exact heartbeat or silent-reply tokens, so these are OpenClaw's own:
`HEARTBEAT_OK` (a heartbeat run with nothing to report) and `NO_REPLY` (the agent chose not to
answer). Tokens match case-sensitively, as whole words, and also when wrapped in Markdown or
HTML emphasis (`**HEARTBEAT_OK**`, `<b>NO_REPLY</b>`).

Rules, in the order they apply:

1. sanitize: CRLF/CR become LF; control characters other than tab and newline, and byte-order
   marks, are removed.
2. reasoning tags and thinking blocks are removed (strict: an unclosed block hides the rest).
3. silent reply: a reply that is, or starts with, `NO_REPLY` is no output (what follows the
   token is the agent explaining its silence); a trailing `NO_REPLY` is stripped from a reply
   that has content before it.
4. heartbeat: `HEARTBEAT_OK` is stripped from either edge; if nothing meaningful remains the
   reply is no output.
5. optional whitespace normalisation: runs of blank lines collapse to one.
6. empty or whitespace-only text is no output (None).

Seed 004 also lists compaction-handoff markers; SPEC defines no such marker, so none is stripped.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from activities.model_output.fences import fence_span_at, match_fence_opener, parse_fence_spans
from activities.model_output.think_tags import (
    ThinkTagStreamStripper,
    strip_reasoning_tags_from_text,
)

HEARTBEAT_TOKEN: Final = "HEARTBEAT_OK"
SILENT_REPLY_TOKEN: Final = "NO_REPLY"

_NBSP_ENTITY: Final = "&nbsp;"
_LEADING_MARKUP_RE = re.compile(r"(?:\s|[*_~`]|&nbsp;|</?[A-Za-z][^<>]*>)*")
_HTML_TAG_RE = re.compile(r"</?[A-Za-z][^<>]*>")
# Trailing characters that may follow a token without being content ("HEARTBEAT_OK.**").
_TRAILING_MARKUP_CHARS: Final = "*_~`.!"
_EMPHASIS_CHARS: Final = "*_~`"
_GLUED_CLOSING_MARKUP_RE = re.compile(r"(?:[*_~`]|</[A-Za-z][^<>]*>)*")
_GLUED_OPENING_MARKUP_RE = re.compile(r"(?:[*_~`]|<[A-Za-z][^<>]*>)*")
_CONTROL_CHARS_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufeff]")
_BLANK_LINE_RUN_RE = re.compile(r"\n(?:[ \t]*\n){2,}")
# Characters that carry no message on their own: markup and bare punctuation around a token.
_NOT_MEANINGFUL_RE = re.compile(r"(?:\s|[*_~`.,:;!?\-–—()\[\]{}'\"|#>]|&nbsp;|</?[A-Za-z][^<>]*>)+")


@dataclass(frozen=True)
class NormalizationOptions:
    strip_heartbeat: bool = True
    strip_thinking: bool = True
    strip_silent: bool = True
    sanitize: bool = True
    normalize_whitespace: bool = False
    heartbeat_token: str = HEARTBEAT_TOKEN
    silent_token: str = SILENT_REPLY_TOKEN


DEFAULT_NORMALIZATION: Final = NormalizationOptions()


def has_meaningful_content(text: str) -> bool:
    """Whether anything but whitespace, emphasis markup and bare punctuation is left."""
    return bool(_NOT_MEANINGFUL_RE.sub("", text))


def sanitize_text(text: str) -> str:
    return _CONTROL_CHARS_RE.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))


def collapse_blank_lines(text: str) -> str:
    return _BLANK_LINE_RUN_RE.sub("\n\n", text)


def _token_at_start(text: str, token: str) -> int | None:
    """Offset past `token` and the emphasis closing right after it, if the text opens with it."""
    lead = _LEADING_MARKUP_RE.match(text)
    start = lead.end() if lead else 0
    end = start + len(token)
    if not text.startswith(token, start) or (end < len(text) and text[end].isalnum()):
        return None
    glued = _GLUED_CLOSING_MARKUP_RE.match(text, end)
    return glued.end() if glued else end


def _trailing_markup_start(text: str) -> int:
    # Scanned backwards by hand: a `(markup)*$` regex backtracks quadratically on long texts.
    end = len(text)
    while end > 0:
        char = text[end - 1]
        if char.isspace() or char in _TRAILING_MARKUP_CHARS:
            end -= 1
        elif text.endswith(_NBSP_ENTITY, 0, end):
            end -= len(_NBSP_ENTITY)
        elif (
            char == ">"
            and (opening := text.rfind("<", 0, end)) != -1
            and (_HTML_TAG_RE.fullmatch(text, opening, end))
        ):
            end = opening
        else:
            break
    return end


def _glued_opening_markup_start(text: str, end: int) -> int:
    """Start of the emphasis run (`**`, `<b>`) written directly before offset `end`."""
    while end > 0:
        if text[end - 1] in _EMPHASIS_CHARS:
            end -= 1
        elif (
            text[end - 1] == ">"
            and (opening := text.rfind("<", 0, end)) != -1
            and (_HTML_TAG_RE.fullmatch(text, opening, end))
        ):
            end = opening
        else:
            break
    return end


def _token_at_end(text: str, token: str) -> int | None:
    """Offset where `token` (with emphasis glued before it) starts, if the text ends with it."""
    end = _trailing_markup_start(text)
    start = end - len(token)
    if start < 0 or text[start:end] != token or (start > 0 and text[start - 1].isalnum()):
        return None
    return _glued_opening_markup_start(text, start)


def strip_heartbeat_token(text: str, token: str = HEARTBEAT_TOKEN) -> str | None:
    """Remove the heartbeat token from the edges; None when nothing meaningful is left."""
    remaining = text
    stripped = False
    while True:
        after = _token_at_start(remaining, token)
        if after is not None:
            remaining = remaining[after:].lstrip()
        else:
            before = _token_at_end(remaining, token)
            if before is None:
                break
            remaining = remaining[:before].rstrip()
        stripped = True
    if not stripped:
        return text
    return remaining if has_meaningful_content(remaining) else None


def strip_silent_token(text: str, token: str = SILENT_REPLY_TOKEN) -> str | None:
    """None when the reply is (or opens with) the silent token; strip it from the reply's end."""
    if _token_at_start(text, token) is not None:
        return None
    before = _token_at_end(text, token)
    if before is None:
        return text
    remaining = text[:before].rstrip()
    return remaining if has_meaningful_content(remaining) else None


def is_token_prefix(text: str, token: str) -> bool:
    """Whether a streamed partial could still be growing into exactly `token`."""
    core = text.strip()
    return bool(core) and len(core) < len(token) and token.startswith(core)


def _apply_token_rules(text: str, options: NormalizationOptions) -> str | None:
    result: str | None = text
    if options.strip_silent and result is not None:
        result = strip_silent_token(result, options.silent_token)
    if options.strip_heartbeat and result is not None:
        result = strip_heartbeat_token(result, options.heartbeat_token)
    return result


def normalize_text(
    text: str | None, options: NormalizationOptions = DEFAULT_NORMALIZATION
) -> str | None:
    """Normalise final reply text; None means there is nothing to deliver."""
    if not text:
        return None
    result = sanitize_text(text) if options.sanitize else text
    if options.strip_thinking:
        result = strip_reasoning_tags_from_text(result, mode="strict", trim="both")
    token_result = _apply_token_rules(result.strip(), options)
    if token_result is None:
        return None
    if options.normalize_whitespace:
        token_result = collapse_blank_lines(token_result)
    token_result = token_result.strip()
    return token_result or None


def _hold_back_partial_token(text: str, options: NormalizationOptions) -> str:
    """Drop a last word that may still grow into a token ("Done. NO_RE", "Done. **HEART").

    Shown now, it could not be taken back once the token completes and is stripped. A last
    word that is only emphasis markup, or ends in an unfinished HTML tag, is held too: it may
    open an emphasised token.
    """
    tokens = [
        token
        for token, enabled in (
            (options.silent_token, options.strip_silent),
            (options.heartbeat_token, options.strip_heartbeat),
        )
        if enabled
    ]
    start = len(text)
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    word = text[start:]
    if not word or not tokens:
        return text
    lead = _GLUED_OPENING_MARKUP_RE.match(word)
    core = word[lead.end() if lead else 0 :]
    partial_tag = core.startswith("<") and ">" not in core
    if (
        not core
        or partial_tag
        or any(len(core) < len(token) and token.startswith(core) for token in tokens)
    ):
        return text[:start]
    return text


def normalize_streaming_text(
    text: str | None, options: NormalizationOptions = DEFAULT_NORMALIZATION
) -> str | None:
    """Normalise the accumulated partial text of a streaming reply.

    Unlike `normalize_text`, trailing whitespace is kept (the next delta continues it), a
    possible partial tag or unfinished code span at the end is held back rather than shown, and
    a partial that may still become a heartbeat or silent token is withheld.
    """
    if not text:
        return None
    result = sanitize_text(text) if options.sanitize else text
    if options.strip_thinking:
        stripper = ThinkTagStreamStripper()
        stripper.feed(result)
        result = stripper.text
    return _streaming_rules(result, options)


class StreamingNormalizer:
    """`normalize_streaming_text` of one reply's text as it grows, delta by delta.

    The whole-text function sanitises and scans the accumulated text for think tags again at
    every delta: a reply of n deltas cost O(n^2) (a 300-token answer about 15 ms of CPU, a long
    one seconds). Here both keep their state between calls and see only what was added; the
    rules left (tokens at the edges, the last word held back) read the text's ends. Equal to
    `normalize_streaming_text(text)` at every call (tests/unit/test_normalization.py).
    """

    def __init__(self, options: NormalizationOptions = DEFAULT_NORMALIZATION) -> None:
        self.options = options
        self._fed = 0
        self._after_cr = False  # the last character fed was a CR, already shown as LF
        self._stripper = ThinkTagStreamStripper() if options.strip_thinking else None
        self._prepared = ""

    def __call__(self, text: str) -> str | None:
        if len(text) < self._fed:
            raise ValueError("a streaming text only grows; start a new normalizer")
        added, self._fed = text[self._fed :], len(text)
        if self.options.sanitize and added:
            if self._after_cr and added.startswith("\n"):
                added = added[1:]  # the LF of a CRLF split between deltas: one newline
            self._after_cr = added.endswith("\r")
            added = sanitize_text(added)
        if self._stripper is not None:
            self._prepared += self._stripper.feed(added).text
        else:
            self._prepared += added
        if not text:
            return None
        return _streaming_rules(self._prepared, self.options)


def _streaming_rules(result: str, options: NormalizationOptions) -> str | None:
    """normalize_streaming_text after sanitising and stripping think tags."""
    result = result.lstrip()
    if not result.strip():
        return None
    if options.strip_silent and is_token_prefix(result, options.silent_token):
        return None
    if options.strip_heartbeat and is_token_prefix(result, options.heartbeat_token):
        return None
    result = _hold_back_partial_token(result, options)
    if not result.strip():
        return None
    trailing = result[len(result.rstrip()) :]
    token_result = _apply_token_rules(result.rstrip(), options)
    if token_result is None:
        return None
    if options.normalize_whitespace:
        token_result = collapse_blank_lines(token_result)
    token_result = token_result.lstrip()
    if not token_result.strip():
        return None
    # Again after the token rules: stripping a token can leave an unfinished tag at the end.
    shown = _hold_back_partial_token(token_result + trailing, options)
    return shown if shown.strip() else None


def _is_fence_delimiter(line: str) -> bool:
    return match_fence_opener(line) is not None


def _content_skeleton(text: str) -> tuple[str, list[int]]:
    """Non-whitespace characters outside fence delimiter lines, with their offsets in `text`.

    Block chunks differ from the final text only in whitespace at the cuts and in fence lines
    added to close and reopen split code blocks, so comparing skeletons ignores exactly that.
    """
    chars: list[str] = []
    offsets: list[int] = []
    line_start = 0
    for line in text.split("\n"):
        if not _is_fence_delimiter(line):
            for column, char in enumerate(line):
                if not char.isspace():
                    chars.append(char)
                    offsets.append(line_start + column)
        line_start += len(line) + 1
    return "".join(chars), offsets


def undelivered_text(delivered_blocks: Sequence[str], final_text: str) -> str | None:
    """What of `final_text` the user has not yet seen, given the block replies already sent.

    None when the blocks already said everything. When the blocks are a prefix of the final text,
    the rest is returned (reopening a code fence the cut fell inside). When they diverge from it,
    the whole final text is returned: repeating is better than losing an answer.
    """
    final_skeleton, offsets = _content_skeleton(final_text)
    if not final_skeleton:
        return None
    delivered_skeleton, _ = _content_skeleton("\n".join(delivered_blocks))
    if final_skeleton in delivered_skeleton:
        return None
    if not final_skeleton.startswith(delivered_skeleton):
        return final_text.strip() or None
    return _remainder_from(final_text, offsets[len(delivered_skeleton)])


def _remainder_from(text: str, first_new: int) -> str | None:
    inside = fence_span_at(parse_fence_spans(text), first_new)
    if inside is None:
        return text[first_new:].strip() or None
    # The blocks already sent closed this fence: reopen it so the rest still renders as code,
    # keeping the indentation of the line the rest starts on.
    line_start = text.rfind("\n", 0, first_new) + 1
    start = line_start if not text[line_start:first_new].strip() else first_new
    return f"{inside.open_line}\n{text[start:].rstrip()}"
