"""What a compaction keeps, what it summarises and in which pieces (SPEC §11.1, §11.2, §11.3
steps 6 and 8–10, §19 "Compaction and context overflow").

* Cut point (pi, §11.2): walk back from the newest entry summing estimated tokens; once the sum
  reaches `keep_recent_tokens`, cut at the nearest valid cut point at or after that entry. Any
  entry but a tool result is a valid cut point (a result stays with its call). When no cut point
  follows (the newest entries are one long tool batch), this cuts at the last one before it:
  pi would keep everything there, a compaction that frees nothing and triggers again.
* Split turn: when the first kept entry is not a user message, the user message that started its
  turn and the entries up to the cut are a turn prefix, summarised separately.
* Chunking: what is summarised goes to the summariser in chunks whose estimate (× 1.2) stays
  within `max_chunk_tokens`, at most half the summariser's window; a tool call and its results
  are never in different chunks, and an entry too large for any chunk is alone in its own.
* Baseline: after compaction the context holds the system prompt, the summary and the kept turns.
  If those alone exceed the window, compacting again cannot help (#13624, #126804, the "death
  spiral"): `check_baseline` says so, so the run stops and suggests /reset instead of retrying.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from activities.context.token_estimate import estimate_entry_tokens
from activities.context.transcript_repair import (
    NO_SYNTHESIS_STOP_REASONS,
)
from agentlane.transcript import Role, TranscriptEntry

# §11.1: pi's defaults, and OpenClaw's floor under the reserve.
DEFAULT_KEEP_RECENT_TOKENS: Final = 20_000
DEFAULT_RESERVE_TOKENS: Final = 16_384
RESERVE_TOKENS_FLOOR: Final = 20_000
# Estimates run low on code and non-English text.
SAFETY_MARGIN: Final = 1.2
# §11.3 step 8.
BASE_CHUNK_RATIO: Final = 0.4
MIN_CHUNK_RATIO: Final = 0.15
SUMMARIZATION_OVERHEAD_TOKENS: Final = 4_096
# §11.3 step 10: an entry over half the summariser's window cannot be summarised.
OVERSIZED_SHARE: Final = 0.5


def compaction_reserve_tokens(
    configured: int | None = None, floor: int = RESERVE_TOKENS_FLOOR
) -> int:
    """The reserve compaction works with: the configured one (pi's 16 384 by default), never
    below OpenClaw's 20 000 floor."""
    return max(DEFAULT_RESERVE_TOKENS if configured is None else configured, floor)


# -- cut point -------------------------------------------------------------------------------


def is_valid_cut_point(entry: TranscriptEntry) -> bool:
    return entry.role != Role.TOOL


@dataclass(frozen=True)
class CutPoint:
    first_kept_index: int
    # The user message that started the turn the cut falls in, when the cut splits a turn.
    turn_start_index: int | None
    kept_tokens: int

    @property
    def is_split_turn(self) -> bool:
        return self.turn_start_index is not None


def find_cut_point(
    entries: Sequence[TranscriptEntry], keep_recent_tokens: int = DEFAULT_KEEP_RECENT_TOKENS
) -> CutPoint:
    tokens = [estimate_entry_tokens(entry) for entry in entries]
    cut_points = [i for i, entry in enumerate(entries) if is_valid_cut_point(entry)]
    if not cut_points:
        return CutPoint(0, None, sum(tokens))
    cut = cut_points[0]  # the newest entries fit: everything is kept
    total = 0
    for index in range(len(entries) - 1, -1, -1):
        total += tokens[index]
        if total >= keep_recent_tokens:
            later = [c for c in cut_points if c >= index]
            cut = later[0] if later else max(c for c in cut_points if c < index)
            break
    turn_start = None
    if entries[cut].role != Role.USER:
        turn_start = next((i for i in range(cut - 1, -1, -1) if entries[i].role == Role.USER), None)
    return CutPoint(cut, turn_start, sum(tokens[cut:]))


@dataclass(frozen=True)
class CompactionSplit:
    cut: CutPoint
    to_summarize: tuple[TranscriptEntry, ...]
    turn_prefix: tuple[TranscriptEntry, ...]
    kept: tuple[TranscriptEntry, ...]

    @property
    def nothing_to_compact(self) -> bool:
        return not self.to_summarize and not self.turn_prefix


def split_for_compaction(
    entries: Sequence[TranscriptEntry], keep_recent_tokens: int = DEFAULT_KEEP_RECENT_TOKENS
) -> CompactionSplit:
    cut = find_cut_point(entries, keep_recent_tokens)
    first_kept = cut.first_kept_index
    summarize_end = cut.turn_start_index if cut.turn_start_index is not None else first_kept
    return CompactionSplit(
        cut=cut,
        to_summarize=tuple(entries[:summarize_end]),
        turn_prefix=tuple(entries[summarize_end:first_kept]),
        kept=tuple(entries[first_kept:]),
    )


# -- atomic groups and chunks ----------------------------------------------------------------


def tool_groups(entries: Sequence[TranscriptEntry]) -> Iterator[tuple[int, int]]:
    """(start, end) index ranges that must stay together: an assistant turn with calls runs on
    until every call has its result (a user message displaced into the batch goes with it);
    anything else is a group of one. Calls of unfinished turns are not waited for."""
    start = 0
    pending: set[str] = set()
    for index, entry in enumerate(entries):
        if entry.role == Role.ASSISTANT:
            pending = (
                set()
                if entry.stop_reason in NO_SYNTHESIS_STOP_REASONS
                else {call.id for call in entry.tool_calls}
            )
        elif entry.role == Role.TOOL and pending:
            if entry.tool_call_id is None:
                pending.clear()
            else:
                pending.discard(entry.tool_call_id)
        if not pending:
            yield start, index + 1
            start = index + 1
    if start < len(entries):
        yield start, len(entries)


def _chunk_groups(
    entries: Sequence[TranscriptEntry], max_tokens: float, max_chunks: float = math.inf
) -> list[list[TranscriptEntry]]:
    tokens = [estimate_entry_tokens(entry) for entry in entries]
    chunks: list[list[TranscriptEntry]] = []
    chunk_start = 0
    current = 0
    for start, end in tool_groups(entries):
        group_tokens = sum(tokens[start:end])
        if (
            start > chunk_start
            and len(chunks) < max_chunks - 1
            and current + group_tokens > max_tokens
        ):
            chunks.append(list(entries[chunk_start:start]))
            chunk_start = start
            current = 0
        current += group_tokens
    if chunk_start < len(entries):
        chunks.append(list(entries[chunk_start:]))
    return chunks


def adaptive_chunk_ratio(entries: Sequence[TranscriptEntry], context_window: int) -> float:
    """§11.3 step 8: smaller chunks when the average entry is over a tenth of the window."""
    if not entries or context_window <= 0:
        return BASE_CHUNK_RATIO
    average = sum(estimate_entry_tokens(e) for e in entries) / len(entries)
    ratio = average * SAFETY_MARGIN / context_window
    if ratio <= 0.1:
        return BASE_CHUNK_RATIO
    return max(
        MIN_CHUNK_RATIO, BASE_CHUNK_RATIO - min(2 * ratio, BASE_CHUNK_RATIO - MIN_CHUNK_RATIO)
    )


def max_summary_chunk_tokens(entries: Sequence[TranscriptEntry], summariser_window: int) -> int:
    """floor(window × adaptive ratio) − 4 096 (§11.3 step 8), kept between 1 token and half the
    summariser's window."""
    ratio = adaptive_chunk_ratio(entries, summariser_window)
    limit = math.floor(summariser_window * ratio) - SUMMARIZATION_OVERHEAD_TOKENS
    return max(1, min(limit, summariser_window // 2))


def chunk_for_summary(
    entries: Sequence[TranscriptEntry], max_chunk_tokens: int
) -> list[list[TranscriptEntry]]:
    """Chunks to summarise one after the other (§11.3 step 10), each estimated within
    `max_chunk_tokens` after the 1.2 margin, or a single group that cannot be split."""
    return _chunk_groups(entries, max(1, math.floor(max_chunk_tokens / SAFETY_MARGIN)))


def is_oversized_for_summary(entry: TranscriptEntry, summariser_window: int) -> bool:
    return estimate_entry_tokens(entry) * SAFETY_MARGIN > summariser_window * OVERSIZED_SHARE


@dataclass(frozen=True)
class OversizedPlan:
    """§11.3 step 10 fallback: what can still be summarised, and a note per entry left out."""

    small: tuple[TranscriptEntry, ...]
    notes: tuple[str, ...]


def plan_without_oversized(
    entries: Sequence[TranscriptEntry], summariser_window: int
) -> OversizedPlan:
    """Entries over half the window are left out with a note; a tool batch holding one is left
    out whole (a call without its result cannot be summarised faithfully), but user messages
    displaced into it stay."""
    small: list[TranscriptEntry] = []
    notes: list[str] = []
    for start, end in tool_groups(entries):
        group = entries[start:end]
        oversized = [e for e in group if is_oversized_for_summary(e, summariser_window)]
        left_out = {id(e) for e in oversized}
        for entry in oversized:
            thousands = round(estimate_entry_tokens(entry) / 1000)
            notes.append(f"[Large {entry.role.value} (~{thousands}K tokens) omitted from summary]")
        drop_batch = any(e.role in (Role.ASSISTANT, Role.TOOL) for e in oversized)
        small.extend(
            e
            for e in group
            if id(e) not in left_out
            and (not drop_batch or e.role not in (Role.ASSISTANT, Role.TOOL))
        )
    return OversizedPlan(tuple(small), tuple(notes))


# -- history share (§11.3 step 6) ------------------------------------------------------------


# -- baseline --------------------------------------------------------------------------------

BASELINE_TOO_LARGE_TEXT: Final = (
    "Context overflow: even after compaction the system prompt (~{system} tokens), the summary "
    "(up to {summary} tokens) and the turns kept verbatim (~{kept} tokens) need ~{total} tokens, "
    "more than {limit}. Try /reset (or /new) to start a fresh session, or use a "
    "larger-context model."
)


@dataclass(frozen=True)
class BaselineCheck:
    context_window: int
    system_prompt_tokens: int
    summary_tokens: int
    kept_tokens: int
    reserve_tokens: int = 0
    # The model's whole window when `context_window` is the prompt budget inside it (so the
    # message names both, not the budget as if it were the window); and whether the window is
    # the one the provider said it enforces (SPEC §5.6).
    full_window: int | None = None
    provider_stated: bool = False

    @property
    def baseline_tokens(self) -> int:
        return (
            self.system_prompt_tokens + self.summary_tokens + self.kept_tokens + self.reserve_tokens
        )

    @property
    def fits(self) -> bool:
        return self.baseline_tokens <= self.context_window

    @property
    def overflow_tokens(self) -> int:
        return max(0, self.baseline_tokens - self.context_window)

    @property
    def message(self) -> str | None:
        """The user-facing text when compaction cannot help, else None."""
        if self.fits:
            return None
        return BASELINE_TOO_LARGE_TEXT.format(
            system=self.system_prompt_tokens,
            summary=self.summary_tokens,
            kept=self.kept_tokens,
            total=self.baseline_tokens,
            limit=self._limit_text(),
        )

    def _limit_text(self) -> str:
        if self.full_window is not None and self.full_window > self.context_window:
            return (
                f"the {self.context_window} tokens the model's context window of "
                f"{self.full_window} leaves for the prompt"
            )
        if self.provider_stated:
            return f"the context window the provider enforces, {self.context_window} tokens"
        return f"the model's context window, {self.context_window} tokens"


def check_baseline(
    *,
    context_window: int,
    system_prompt_tokens: int,
    summary_tokens: int,
    kept_tokens: int,
    reserve_tokens: int = 0,
    full_window: int | None = None,
    provider_stated: bool = False,
) -> BaselineCheck:
    """Whether the context after a compaction (system prompt + summary budget + kept turns, plus
    any room reserved for the answer) can fit the window at all."""
    return BaselineCheck(
        context_window=context_window,
        system_prompt_tokens=max(0, system_prompt_tokens),
        summary_tokens=max(0, summary_tokens),
        kept_tokens=max(0, kept_tokens),
        reserve_tokens=max(0, reserve_tokens),
        full_window=full_window,
        provider_stated=provider_stated,
    )


# -- budgets ---------------------------------------------------------------------------------

KEEP_RECENT_SHARE: Final = 0.3


def keep_recent_budget(
    prompt_budget_tokens: int,
    attempt: int = 1,
    *,
    configured: int | None = None,
    underestimate: float = 1.0,
    unmeasured_overflow_body: int | None = None,
) -> int:
    """Tokens of recent context kept verbatim by a compaction.

    pi keeps 20 000 tokens, sized for 200 000-token windows; on a 32 000-token window that alone
    would overflow. So: the configured figure, else 30 % of the prompt budget (at most 20 000);
    halved on each further attempt of the same run (a compaction that did not make enough room
    must cut deeper, not repeat itself), and shrunk by how much the provider's own count of the
    prompt exceeded our estimate (`underestimate` ≥ 1). A provider that refused the prompt as
    too long without saying its figures (OpenAI's newer "Your input exceeds the context
    window"), though it fits the configured window, enforces less than we know: at most half of
    the conversation (`unmeasured_overflow_body` tokens, our estimate) is kept, so there is
    something to summarise."""
    base = configured or min(
        DEFAULT_KEEP_RECENT_TOKENS, int(prompt_budget_tokens * KEEP_RECENT_SHARE)
    )
    if unmeasured_overflow_body is not None:
        base = min(base, unmeasured_overflow_body // 2)
    scaled = base / (2 ** max(0, attempt - 1)) / max(1.0, underestimate)
    return max(1, int(scaled))
