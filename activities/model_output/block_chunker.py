"""Block-streaming chunker, coalescer and block de-duplication (SPEC §15, cases T65 and T66).

Streamed answer text is appended to the chunker; `drain` cuts it into block replies of roughly
`min_chars`..`max_chars` characters, preferring paragraph, then line, then sentence, then word
boundaries, and never cutting strictly inside a fenced code block unless it must: a fenced block
longer than `max_chars` is cut, closed in this chunk and reopened in the next, so every chunk is
valid Markdown on its own.

Where this departs from the letter of SPEC §15 (each to keep chunks valid or less fragmented):

* A forced drain whose remainder fits in `max_chars` emits that remainder whole, exactly like a
  forced drain that fits from the start. The original searched it for its first break instead,
  splitting a message's tail into one block per paragraph that its coalescer then re-joined.
* A fenced block that must be split is cut at its last line end within `max_chars` (the original
  cut at `max_chars` exactly, splitting a code line in two). With no line end in reach, a fence
  that follows other text ends the chunk just before the fence, even below `min_chars`; only a
  fence that starts the buffer with a first line longer than the window is cut mid-line.
* When a cut inside a fence would leave only its closing line to reopen, the chunk ends after
  that closing line instead (the original then reopened an empty block in the next chunk). A
  split always keeps the opening line and at least one content character, so it makes progress
  and no chunk is an empty code block.
* A non-forced drain never cuts into the unfinished last line while it may still become a fence
  opener or closer (it waits for the line instead): splitting `` ``` `` as it streams in would
  hide the fence boundary for good.
* A blank paragraph break (`\\n`, spaces/tabs, `\\n`…) is skipped whole after a cut, not only its
  first newline, so the next chunk never starts with stray spaces; a chunk ending at a cut loses
  its trailing whitespace (a newline break inside a run of blank lines would otherwise leave it),
  and no chunk starts with a newline (text appended after the buffer emptied may carry the
  separator it followed).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from activities.model_output.fences import (
    FenceOpener,
    FenceSpan,
    fence_span_at,
    is_safe_break,
    may_become_fence_closer,
    may_become_fence_opener,
    parse_fence_spans,
)

DEFAULT_MIN_CHARS: Final = 800
DEFAULT_MAX_CHARS: Final = 1200
DEFAULT_COALESCE_IDLE_MS: Final = 1000

_PARAGRAPH_BREAK_RE = re.compile(r"\n(?:[ \t]*\n)+")
_SENTENCE_END_CHARS: Final = ".!?"

# Whether a buffer offset may end a chunk (within bounds and outside fences).
_IndexPredicate = Callable[[int], bool]


class BreakPreference(StrEnum):
    PARAGRAPH = "paragraph"
    NEWLINE = "newline"
    SENTENCE = "sentence"


@dataclass(frozen=True)
class BlockChunkingConfig:
    min_chars: int = DEFAULT_MIN_CHARS
    max_chars: int = DEFAULT_MAX_CHARS
    break_preference: BreakPreference = BreakPreference.PARAGRAPH
    flush_on_paragraph: bool = False


def resolve_block_chunking(
    *,
    text_limit: int | None = None,
    newline_chunk_mode: bool = False,
    min_chars: int = DEFAULT_MIN_CHARS,
    max_chars: int = DEFAULT_MAX_CHARS,
    break_preference: BreakPreference = BreakPreference.PARAGRAPH,
) -> BlockChunkingConfig:
    """Channel-aware config: max capped by the channel's text limit, min never above max."""
    capped_max = max(1, min(max_chars, text_limit) if text_limit else max_chars)
    return BlockChunkingConfig(
        min_chars=max(1, min(min_chars, capped_max)),
        max_chars=capped_max,
        break_preference=break_preference,
        flush_on_paragraph=newline_chunk_mode,
    )


@dataclass(frozen=True)
class _Break:
    index: int
    """Where the chunk ends in the buffer."""
    separator: int = 0
    """Characters after `index` that belong to neither chunk (a blank-line paragraph break)."""
    split_fence: FenceSpan | None = None
    """The fence this cut lands in: close it in this chunk, reopen it in the next."""


class BlockChunker:
    """Accumulates streamed text and cuts it into block replies (SPEC §15 `drain`)."""

    def __init__(self, config: BlockChunkingConfig | None = None) -> None:
        self._config = config or BlockChunkingConfig()
        self._min = max(1, int(self._config.min_chars))
        self._max = max(self._min, int(self._config.max_chars))
        self._buffer = ""

    @property
    def config(self) -> BlockChunkingConfig:
        return self._config

    @property
    def buffered_text(self) -> str:
        return self._buffer

    def has_buffered(self) -> bool:
        return bool(self._buffer)

    def reset(self) -> None:
        self._buffer = ""

    def append(self, text: str) -> None:
        self._buffer += text

    def drain(self, force: bool = False) -> list[str]:
        """Cut what is ready into chunks; `force` (message end, before a tool) takes everything."""
        chunks: list[str] = []
        if len(self._buffer) < self._min and not force:
            return chunks
        if force:
            self._drain_forced(chunks)
        elif self._config.flush_on_paragraph:
            self._drain_paragraphs(chunks)
        else:
            self._drain_sized(chunks)
        return chunks

    def _drain_forced(self, chunks: list[str]) -> None:
        while self._buffer:
            if len(self._buffer) <= self._max:
                self._emit_all(chunks)
                return
            cut = self._pick_break(self._buffer, min_chars=1, final=True)
            if cut is None:
                self._emit_all(chunks)
                return
            self._take(cut, chunks)

    def _drain_sized(self, chunks: list[str]) -> None:
        while len(self._buffer) >= self._min:
            cut = self._pick_break(self._buffer, min_chars=self._min)
            if cut is None:
                return
            self._take(cut, chunks)
            if len(self._buffer) < self._max:
                return

    def _drain_paragraphs(self, chunks: list[str]) -> None:
        while len(self._buffer) >= self._min:
            paragraph = self._next_paragraph_break(self._buffer)
            if paragraph is not None and paragraph.index <= self._max:
                self._take(paragraph, chunks)
                continue
            if len(self._buffer) < self._max:
                return
            cut = self._pick_break(self._buffer, min_chars=self._min)
            if cut is None:
                return
            self._take(cut, chunks)

    def _emit_all(self, chunks: list[str]) -> None:
        if self._buffer.strip():
            chunks.append(self._buffer.lstrip("\n"))
        self._buffer = ""

    def _take(self, cut: _Break, chunks: list[str]) -> None:
        # Text appended after the buffer emptied may open with the separator it followed.
        chunk = self._buffer[: cut.index].lstrip("\n")
        rest = self._buffer[cut.index :]
        fence = cut.split_fence
        if fence is not None:
            if rest.startswith("\n"):
                rest = rest[1:]
            joiner = "" if chunk.endswith("\n") else "\n"
            chunks.append(f"{chunk}{joiner}{fence.opener.closing_line()}")
            self._buffer = f"{fence.open_line}\n{rest}"
            return
        if cut.separator:
            rest = rest[cut.separator :]
        elif rest[:1].isspace():
            rest = rest[1:]
        self._buffer = rest.lstrip("\n")
        if chunk.strip():
            chunks.append(chunk.rstrip())

    def _next_paragraph_break(self, buffer: str) -> _Break | None:
        spans = parse_fence_spans(buffer)
        for found in _PARAGRAPH_BREAK_RE.finditer(buffer):
            if found.start() >= self._min and is_safe_break(spans, found.start()):
                return _Break(found.start(), separator=len(found.group(0)))
        return None

    def _pick_break(self, buffer: str, *, min_chars: int, final: bool = False) -> _Break | None:
        """SPEC §15 search order within the first `max_chars`, then the hard cut."""
        if len(buffer) < min_chars:
            return None
        spans = parse_fence_spans(buffer)
        preference = self._config.break_preference
        limit = min(self._max, len(buffer))

        def usable(index: int) -> bool:
            return min_chars <= index <= limit and is_safe_break(spans, index)

        if preference is BreakPreference.PARAGRAPH:
            paragraph = _last_paragraph_break(buffer, usable)
            if paragraph is not None:
                return paragraph
        if preference in (BreakPreference.PARAGRAPH, BreakPreference.NEWLINE):
            newline = _last_index(buffer, limit, lambda i: buffer[i] == "\n" and usable(i))
            if newline is not None:
                return _Break(newline)
        if preference is not BreakPreference.NEWLINE:
            sentence = _last_sentence_break(buffer, limit, usable)
            if sentence is not None:
                return _Break(sentence)
        if preference is BreakPreference.NEWLINE and len(buffer) < self._max:
            return None
        space = _last_index(buffer, limit, lambda i: buffer[i].isspace() and usable(i))
        if space is not None:
            return _Break(space)
        if len(buffer) >= self._max:
            return self._hard_cut(buffer, spans, min_chars, final=final)
        return None

    def _hard_cut(
        self, buffer: str, spans: list[FenceSpan], min_chars: int, *, final: bool
    ) -> _Break | None:
        fence = fence_span_at(spans, self._max)
        if fence is None:
            if not final and _splits_growing_fence_line(buffer, self._max, None):
                return None
            return _Break(self._max)
        # Keep the opening line and at least one content character so every split progresses.
        first_content = fence.open_line_end + 2
        line_end = _last_index(
            buffer,
            self._max,
            lambda i: buffer[i] == "\n" and i >= max(min_chars, first_content),
        )
        if line_end is None and fence.start > 0 and buffer[: fence.start].strip():
            # A short chunk before the fence beats cutting a code line in two.
            return _Break(fence.start - 1)
        cut = line_end if line_end is not None else max(self._max, first_content)
        closes = fence.close_line_start
        if closes is not None and not buffer[cut:closes].strip():
            # Nothing but the closing line would be left to reopen: keep the fence whole.
            return _Break(fence.end)
        if cut >= len(buffer):
            return None
        if not final and _splits_growing_fence_line(buffer, cut, fence.opener):
            return None
        return _Break(cut, split_fence=fence)


def _splits_growing_fence_line(buffer: str, cut: int, inside: FenceOpener | None) -> bool:
    """Whether `cut` falls in the unfinished last line while it may still become a fence line.

    Cutting there would split the marker run (`` `` `` + `` `js ``) before the line is whole,
    and the fence it opens or closes would then never be seen.
    """
    tail_start = buffer.rfind("\n") + 1
    if cut <= tail_start:
        return False
    tail = buffer[tail_start:]
    if inside is None:
        return may_become_fence_opener(tail)
    return may_become_fence_closer(tail, inside)


def _last_index(buffer: str, limit: int, accept: _IndexPredicate) -> int | None:
    for index in range(min(limit, len(buffer) - 1), -1, -1):
        if accept(index):
            return index
    return None


def _last_paragraph_break(buffer: str, usable: _IndexPredicate) -> _Break | None:
    chosen: _Break | None = None
    for found in _PARAGRAPH_BREAK_RE.finditer(buffer):
        if usable(found.start()):
            chosen = _Break(found.start(), separator=len(found.group(0)))
    return chosen


def _last_sentence_break(buffer: str, limit: int, usable: _IndexPredicate) -> int | None:
    for index in range(min(limit, len(buffer)), 0, -1):
        ends_sentence = buffer[index - 1] in _SENTENCE_END_CHARS and (
            index == len(buffer) or buffer[index].isspace()
        )
        if ends_sentence and usable(index):
            return index
    return None


def coalescer_joiner(preference: BreakPreference) -> str:
    """Text placed between coalesced blocks: blank line, newline or space (SPEC §15)."""
    return {
        BreakPreference.PARAGRAPH: "\n\n",
        BreakPreference.NEWLINE: "\n",
        BreakPreference.SENTENCE: " ",
    }[preference]


class BlockCoalescer:
    """Joins small block replies before sending; the caller supplies the clock (milliseconds).

    A block is held until the held text reaches `min_chars`, until adding the next block would
    pass `max_chars`, or until `idle_ms` pass without a new block (`flush_due`).
    """

    def __init__(
        self,
        *,
        min_chars: int,
        max_chars: int,
        joiner: str,
        idle_ms: float = DEFAULT_COALESCE_IDLE_MS,
    ) -> None:
        self._min = max(1, min_chars)
        self._max = max(self._min, max_chars)
        self._joiner = joiner
        self._idle_ms = idle_ms
        self._held: list[str] = []
        self._last_added_ms: float | None = None

    @property
    def held_text(self) -> str:
        return self._joiner.join(self._held)

    def add(self, text: str, now_ms: float) -> list[str]:
        ready: list[str] = []
        if not text.strip():
            return ready
        if self._held and len(self.held_text) + len(self._joiner) + len(text) > self._max:
            ready.extend(self.flush())
        self._held.append(text)
        self._last_added_ms = now_ms
        if len(self.held_text) >= self._min:
            ready.extend(self.flush())
        return ready

    def flush_due(self, now_ms: float) -> list[str]:
        if self._last_added_ms is None or now_ms - self._last_added_ms < self._idle_ms:
            return []
        return self.flush()

    def flush(self) -> list[str]:
        if not self._held:
            return []
        text = self.held_text
        self._held = []
        self._last_added_ms = None
        return [text]


def _dedupe_key(text: str) -> str:
    return " ".join(text.split())


class BlockReplyDeduper:
    """Suppresses a block reply equal to the previous one or to text a messaging tool sent.

    Comparison ignores differences in whitespace only.
    """

    def __init__(self) -> None:
        self._previous: str | None = None
        self._sent_by_tool: set[str] = set()

    def note_messaging_tool_text(self, text: str) -> None:
        key = _dedupe_key(text)
        if key:
            self._sent_by_tool.add(key)

    def should_send(self, text: str) -> bool:
        key = _dedupe_key(text)
        if not key or key == self._previous or key in self._sent_by_tool:
            return False
        self._previous = key
        return True
