"""Tool-result truncation (SPEC §10.1) and the live context guard (SPEC §10.2).

§10.1 primitives, used by overflow recovery (§4.5 step 3) and the preemptive check (§10.3):

* one result may hold `min(40 000, floor(window × 0.3) × 4)` characters (`max_tool_result_chars`);
* `truncate_tool_result_text` keeps the head, or head and tail when the last 2 000 characters
  look important (errors, exit codes, a closing `}`, totals and results), and says how much it
  removed: "[... N more characters truncated]";
* the session recovery plan (`plan_recovery_truncation`) first cuts every individually oversized
  result to the maximum, then, when two or more text results remain and together exceed the
  aggregate budget (the same maximum), reduces them newest first until they fit.

§10.2 live guard (`apply_live_guard`): before each model call, on a copy of the context (the
stored entries are never changed), a result whose estimate exceeds half the window (estimated
in characters, tool results counted double) is cut to half that many characters, and a context
estimated above 90 % of the window is reported as an overflow for the run loop to recover from.

Nothing here reads or writes the store: the plan lists replacement texts by entry id, and the
activity that owns the transcript writes them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from activities.context.token_estimate import (
    GUARD_TOOL_RESULT_WEIGHT,
    IMAGES_META_KEY,
    entry_chars,
    guard_context_chars,
    guard_entry_chars,
)
from agentlane.transcript import Role, TranscriptEntry

HARD_MAX_TOOL_RESULT_CHARS: Final = 40_000
MAX_TOOL_RESULT_CONTEXT_SHARE: Final = 0.3
CHARS_PER_TOKEN: Final = 4
LIVE_MIN_KEEP_CHARS: Final = 2_000
RECOVERY_MIN_KEEP_CHARS: Final = 0
IMPORTANT_TAIL_CHARS: Final = 2_000
TAIL_SHARE: Final = 0.3
MAX_TAIL_CHARS: Final = 4_000
# A cut moves to a newline only when that costs at most this share of what is kept.
NEWLINE_WINDOW: Final = 0.2
MIDDLE_MARKER: Final = "\n\n⚠️ [... middle content omitted — showing head and tail ...]\n\n"
# Where a rewritten result records its length before the first truncation.
TRUNCATED_META_KEY: Final = "truncated_from_chars"

_IMPORTANT_WORDS = re.compile(
    r"\b(error|exception|failed|fatal|traceback|panic|stack trace|errno|exit code)\b"
)
_SUMMARY_WORDS = re.compile(r"\b(total|summary|result|complete|finished|done)\b")


def truncation_notice(removed_chars: int) -> str:
    return f"\n\n[... {max(1, removed_chars)} more characters truncated]"


def max_tool_result_chars(context_window: int) -> int:
    """The most characters one tool result may keep (128k windows and above: 40 000)."""
    share_chars = math.floor(max(0, context_window) * MAX_TOOL_RESULT_CONTEXT_SHARE) * 4
    return max(1, min(HARD_MAX_TOOL_RESULT_CHARS, share_chars))


def has_important_tail(text: str) -> bool:
    """Whether the end of a result likely holds what the model needs (a failure, a verdict,
    the close of a JSON document), so truncation keeps it."""
    tail = text[-IMPORTANT_TAIL_CHARS:].lower()
    return bool(
        _IMPORTANT_WORDS.search(tail) or tail.strip().endswith("}") or _SUMMARY_WORDS.search(tail)
    )


def _bounded(
    text: str, head_end: int, tail_start: int | None, max_chars: int, floor_chars: int
) -> str:
    """Head (and tail) plus the notice. The notice's length depends on how much was removed,
    so the head gives back any overshoot, but never below `floor_chars`."""
    while True:
        removed = (tail_start if tail_start is not None else len(text)) - head_end
        kept = text[:head_end]
        if tail_start is not None:
            kept += MIDDLE_MARKER + text[tail_start:]
        result = kept + truncation_notice(removed)
        overshoot = len(result) - max_chars
        if overshoot <= 0 or head_end - overshoot < floor_chars:
            return result
        head_end -= overshoot


def truncate_tool_result_text(
    text: str, max_chars: int, *, min_keep: int = LIVE_MIN_KEEP_CHARS
) -> str:
    """`text` cut to about `max_chars` characters (§10.1); unchanged when it already fits.

    At least `min_keep` characters of the original stay, even past `max_chars` (live truncation
    keeps 2 000, recovery truncation 0).
    """
    if len(text) <= max_chars:
        return text
    budget = max(min_keep, max_chars - len(truncation_notice(len(text) - max_chars)))
    if has_important_tail(text) and budget > 2 * min_keep:
        tail_budget = min(math.floor(budget * TAIL_SHARE), MAX_TAIL_CHARS)
        head_budget = budget - tail_budget - len(MIDDLE_MARKER)
        if head_budget > min_keep:
            head_end = head_budget
            newline = text.rfind("\n", 0, head_budget + 1)
            if newline > head_budget * (1 - NEWLINE_WINDOW):
                head_end = newline
            tail_start = len(text) - tail_budget
            newline = text.find("\n", tail_start)
            if newline != -1 and newline < tail_start + tail_budget * NEWLINE_WINDOW:
                tail_start = newline + 1
            return _bounded(text, head_end, tail_start, max_chars, min_keep)
    head_end = budget
    newline = text.rfind("\n", 0, budget + 1)
    if newline > budget * (1 - NEWLINE_WINDOW):
        head_end = newline
    return _bounded(text, head_end, None, max_chars, min_keep)


def with_text(entry: TranscriptEntry, text: str) -> TranscriptEntry:
    """A copy of a tool result with new text, remembering its length before any truncation."""
    meta = dict(entry.meta)
    meta.setdefault(TRUNCATED_META_KEY, len(entry.text))
    return entry.model_copy(update={"text": text, "meta": meta})


# -- session recovery plan -------------------------------------------------------------------


@dataclass(frozen=True)
class Replacement:
    index: int
    entry_id: str
    original_chars: int
    text: str

    @property
    def reduction(self) -> int:
        return max(0, self.original_chars - len(self.text))


@dataclass(frozen=True)
class RecoveryPlan:
    """What a recovery truncation would rewrite, and how many characters it would free."""

    max_chars: int
    aggregate_budget_chars: int
    oversized: tuple[Replacement, ...]
    aggregate: tuple[Replacement, ...]

    @property
    def oversized_reducible_chars(self) -> int:
        return sum(r.reduction for r in self.oversized)

    @property
    def aggregate_reducible_chars(self) -> int:
        # Measured against the texts the oversized step left.
        after_oversized = {r.index: len(r.text) for r in self.oversized}
        return sum(
            max(0, after_oversized.get(r.index, r.original_chars) - len(r.text))
            for r in self.aggregate
        )

    @property
    def reducible_chars(self) -> int:
        return self.oversized_reducible_chars + self.aggregate_reducible_chars

    @property
    def replacements(self) -> tuple[Replacement, ...]:
        """One final replacement per rewritten entry, in transcript order."""
        final = {r.index: r for r in self.oversized}
        for r in self.aggregate:
            original = final[r.index].original_chars if r.index in final else r.original_chars
            final[r.index] = Replacement(r.index, r.entry_id, original, r.text)
        return tuple(final[i] for i in sorted(final))

    @property
    def changed(self) -> bool:
        return bool(self.oversized or self.aggregate)


def _aggregate_replacements(
    texts: dict[int, str],
    entries: Sequence[TranscriptEntry],
    budget: int,
    min_keep: int,
) -> list[Replacement]:
    candidates = [(index, text) for index, text in texts.items() if text]
    if len(candidates) < 2:
        return []
    total = sum(len(text) for _, text in candidates)
    if total <= budget:
        return []
    remaining = total - budget
    floor_chars = min_keep + len(truncation_notice(1))
    out: list[Replacement] = []
    # Newest first: older results were already read by the model, newer ones are likelier to be
    # re-read in full; ties (same index cannot happen) fall back to the larger text.
    for index, text in sorted(candidates, key=lambda c: (-c[0], -len(c[1]))):
        if remaining <= 0:
            break
        reducible = max(0, len(text) - floor_chars)
        if reducible == 0:
            continue
        target = max(floor_chars, len(text) - min(reducible, remaining))
        truncated = truncate_tool_result_text(text, target, min_keep=min_keep)
        freed = len(text) - len(truncated)
        if freed <= 0:
            continue
        out.append(Replacement(index, entries[index].id, len(text), truncated))
        remaining -= freed
    return out


def plan_recovery_truncation(
    entries: Sequence[TranscriptEntry],
    context_window: int,
    *,
    max_chars: int | None = None,
    min_keep: int = RECOVERY_MIN_KEEP_CHARS,
) -> RecoveryPlan:
    """The §10.1 session recovery plan: oversized results first, then the aggregate."""
    limit = max(1, max_chars if max_chars is not None else max_tool_result_chars(context_window))
    aggregate_budget = max(limit, len(truncation_notice(1)))
    oversized: list[Replacement] = []
    texts: dict[int, str] = {}
    for index, entry in enumerate(entries):
        if entry.role != Role.TOOL:
            continue
        text = entry.text
        if len(text) > limit:
            text = truncate_tool_result_text(text, limit, min_keep=min_keep)
            oversized.append(Replacement(index, entry.id, len(entry.text), text))
        texts[index] = text
    aggregate = _aggregate_replacements(texts, entries, aggregate_budget, min_keep)
    return RecoveryPlan(limit, aggregate_budget, tuple(oversized), tuple(aggregate))


def apply_replacements(
    entries: Sequence[TranscriptEntry], replacements: Sequence[Replacement]
) -> list[TranscriptEntry]:
    """A new list with the replaced entries copied (the input entries are left as they are)."""
    by_index = {r.index: r for r in replacements}
    return [
        with_text(entry, by_index[index].text) if index in by_index else entry
        for index, entry in enumerate(entries)
    ]


def reducible_tool_result_chars(entries: Sequence[TranscriptEntry], context_window: int) -> int:
    """How many characters a recovery truncation would free (the precheck's input, §10.3)."""
    return plan_recovery_truncation(entries, context_window).reducible_chars


# -- live guard (§10.2) ----------------------------------------------------------------------

LIVE_GUARD_OVERFLOW_TEXT: Final = (
    "Context overflow: estimated context size exceeds safe threshold during tool loop."
)
GUARD_MIN_CHARS: Final = 1_024
GUARD_SINGLE_RESULT_SHARE: Final = 0.5
GUARD_HIGH_WATER: Final = 0.9
GUARD_NEWLINE_WINDOW: Final = 0.3
# Meta a truncated clone leaves out: verbose payloads never reach the model (§12.3).
DETAILS_META_KEY: Final = "details"


def guard_single_result_cap(context_window: int) -> int:
    """Estimated characters one result may take: half the window at 2 characters a token."""
    return max(GUARD_MIN_CHARS, math.floor(context_window * 2 * GUARD_SINGLE_RESULT_SHARE))


def guard_context_cap(context_window: int) -> int:
    """Estimated characters of the whole context before the guard reports an overflow."""
    return max(GUARD_MIN_CHARS, math.floor(context_window * CHARS_PER_TOKEN * GUARD_HIGH_WATER))


def truncate_to_budget(text: str, max_chars: int) -> str:
    """The guard's head-only cut: at a newline in the last 30 %, with the notice, within
    `max_chars` (the notice's own length is taken from the budget)."""
    if len(text) <= max_chars:
        return text
    if max_chars <= 0:
        return truncation_notice(len(text))
    body = max_chars
    for _ in range(4):  # the notice's length depends on the body's; four rounds settle it
        body = max(0, max_chars - len(truncation_notice(len(text) - body)))
    cut = body
    newline = text.rfind("\n", 0, body + 1)
    if newline > body * (1 - GUARD_NEWLINE_WINDOW):
        cut = newline
    return text[:cut] + truncation_notice(len(text) - cut)


def _guard_clone(entry: TranscriptEntry, cap: int) -> TranscriptEntry:
    text_budget = cap // GUARD_TOOL_RESULT_WEIGHT
    meta = {k: v for k, v in entry.meta.items() if k not in (DETAILS_META_KEY, IMAGES_META_KEY)}
    meta.setdefault(TRUNCATED_META_KEY, len(entry.text))
    if entry.text:
        text = truncate_to_budget(entry.text, text_budget)
    else:
        text = truncation_notice((guard_entry_chars(entry) - cap) // GUARD_TOOL_RESULT_WEIGHT)
    # The clone carries its text only: images and details were what made it oversized.
    return entry.model_copy(update={"text": text, "meta": meta})


def _cut_values(value: Any, budget: int) -> Any:
    if isinstance(value, str):
        return truncate_to_budget(value, budget) if len(value) > budget else value
    if isinstance(value, list):
        return [_cut_values(v, budget) for v in value]
    if isinstance(value, dict):
        return {k: _cut_values(v, budget) for k, v in value.items()}
    return value


def _calls_clone(entry: TranscriptEntry, cap: int) -> TranscriptEntry:
    """The assistant entry with each long string in its calls' arguments cut as a result's
    text is: a call that wrote a 400 KB file made the context too big for good, since
    compaction keeps the latest turn whole and cutting results could not help."""
    budget = cap // GUARD_TOOL_RESULT_WEIGHT
    calls = [
        call.model_copy(
            update={
                "arguments": _cut_values(call.arguments, budget),
                "raw_arguments": _cut_values(call.raw_arguments, budget),
            }
        )
        for call in entry.tool_calls
    ]
    meta = {**entry.meta, TRUNCATED_META_KEY: entry_chars(entry)}
    return entry.model_copy(update={"tool_calls": calls, "meta": meta})


def guarded_entry(entry: TranscriptEntry, cap: int) -> TranscriptEntry:
    """One entry as the live guard sends it: a tool result over `cap`
    (`guard_single_result_cap`) cut on a copy, and so are the long arguments of an assistant
    entry's calls; any other entry itself."""
    if entry.role == Role.TOOL and guard_entry_chars(entry) > cap:
        return _guard_clone(entry, cap)
    if entry.role == Role.ASSISTANT and entry.tool_calls and guard_entry_chars(entry) > cap:
        clone = _calls_clone(entry, cap)
        return clone if guard_entry_chars(clone) < guard_entry_chars(entry) else entry
    return entry


@dataclass(frozen=True)
class LiveGuardResult:
    """The context to send (a copy where results were cut) and whether it still overflows."""

    entries: tuple[TranscriptEntry, ...]
    truncated_ids: tuple[str, ...]
    estimated_chars: int
    context_cap_chars: int

    @property
    def overflow(self) -> bool:
        return self.estimated_chars > self.context_cap_chars

    @property
    def overflow_message(self) -> str | None:
        """The prompt error for overflow recovery (§4.5), or None."""
        return LIVE_GUARD_OVERFLOW_TEXT if self.overflow else None


def apply_live_guard(
    entries: Sequence[TranscriptEntry],
    context_window: int,
    measure: Callable[[Sequence[TranscriptEntry]], int] = guard_context_chars,
) -> LiveGuardResult:
    """§10.2 on a copy: cut over-cap results, then check the whole context. Older results are
    not rewritten under aggregate pressure; an overflow goes to recovery instead. `measure`
    gives the whole context's `guard_context_chars`."""
    cap = guard_single_result_cap(context_window)
    out: list[TranscriptEntry] = []
    truncated: list[str] = []
    for entry in entries:
        guarded = guarded_entry(entry, cap) if entry.role == Role.TOOL else entry
        if guarded is not entry:
            truncated.append(entry.id)
        out.append(guarded)
    return LiveGuardResult(
        entries=tuple(out),
        truncated_ids=tuple(truncated),
        estimated_chars=measure(out),
        context_cap_chars=guard_context_cap(context_window),
    )
