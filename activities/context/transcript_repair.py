"""Transcript repair (SPEC §12.1, §12.2) and a tolerant loader for damaged transcript files.

Providers reject a conversation whose tool calls and results do not pair up ("unexpected
tool_use_id found in tool_result blocks", SPEC §19 "Transcript corruption"), and a session that
hits it stays broken until someone edits the file. Repair makes any entry list sendable:

§12.2 tool-call input repair (`repair_tool_call_inputs`), first:
* a call with no id, or an invalid name (empty, over 64 characters, characters outside letters,
  digits and `_:.-`, or outside the allowed tool set when one is given) is dropped; so is a call
  whose id an earlier call already used (providers reject duplicate ids, and one result could
  never answer both);
* names with surrounding whitespace are trimmed;
* an assistant entry left with no text, reasoning or calls is dropped;
* an assistant turn carrying signed thinking (`meta["anthropic_thinking"]`) must be replayed
  byte for byte, so if any of its calls needed repair the whole turn is dropped.
Our calls always carry an argument object (arguments that were not one are kept as
`raw_arguments` and answered with an error), so "no input" never applies here.

§12.1 pairing repair (`repair_tool_result_pairing`), then:
* a tool result outside the span of the assistant turn that called it is an orphan: dropped;
* after an assistant turn with calls, up to the next assistant turn: the first result per call
  id is kept (later ones are duplicates, dropped anywhere in the transcript), a blank tool name
  is restored from the call, results for other ids are dropped, other entries are kept as the
  remainder;
* output: the assistant turn, one result per call in call order (the real one or a synthetic
  error result, `SYNTHETIC_RESULT_TEXT`), then the remainder in its original order;
* a turn that ended with stop reason error, aborted or idle_timeout never gets synthetic results
  (its calls may be incomplete); its real results are kept, or dropped with
  `errored_turn_results="drop"` (what compaction uses, §11.4).
Both passes are idempotent and return their input list itself when nothing changed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence, Set
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from activities.providers.anthropic_request import THINKING_META_KEY
from agentlane.transcript import Role, ToolCall, TranscriptEntry

SYNTHETIC_RESULT_TEXT: Final = (
    "[agentlane] missing tool result in session history; inserted synthetic error result for "
    "transcript repair."
)
SYNTHETIC_META_KEY: Final = "synthetic"
SYNTHETIC_META_VALUE: Final = "transcript_repair"
# Turns that did not complete: their tool calls may be partial, so nothing is invented for them.
NO_SYNTHESIS_STOP_REASONS: Final = frozenset({"error", "aborted", "idle_timeout"})
TOOL_NAME_MAX_CHARS: Final = 64
_TOOL_NAME_RE: Final = re.compile(r"^[A-Za-z0-9_:.\-]+$")


class ErroredTurnResults(StrEnum):
    KEEP = "keep"
    DROP = "drop"


def _unchanged(before: Sequence[TranscriptEntry], after: list[TranscriptEntry]) -> bool:
    return len(before) == len(after) and all(a is b for a, b in zip(before, after, strict=True))


def _as_list(entries: Sequence[TranscriptEntry]) -> list[TranscriptEntry]:
    """The input itself when it is a list, so callers can tell "nothing changed" by identity."""
    return entries if isinstance(entries, list) else list(entries)


# -- §12.2 tool-call inputs ------------------------------------------------------------------


@dataclass(frozen=True)
class InputRepair:
    entries: list[TranscriptEntry]
    dropped_tool_calls: int = 0
    dropped_assistant_entries: int = 0
    trimmed_names: int = 0
    dropped_signed_turns: int = 0

    @property
    def changed(self) -> bool:
        return bool(
            self.dropped_tool_calls
            or self.dropped_assistant_entries
            or self.trimmed_names
            or self.dropped_signed_turns
        )


def is_valid_tool_name(name: str, allowed: frozenset[str] | None = None) -> bool:
    """A trimmed name the providers accept (and, with an allowed set, one of those, compared
    without case)."""
    if not name or len(name) > TOOL_NAME_MAX_CHARS or not _TOOL_NAME_RE.match(name):
        return False
    return allowed is None or name.lower() in allowed


def _normalize_allowed(names: Iterable[str] | None) -> frozenset[str] | None:
    if names is None:
        return None
    normalized = frozenset(n.strip().lower() for n in names if n.strip())
    return normalized or None


@dataclass
class CallInputRepairer:
    """§12.2 one entry at a time, in transcript order: what an entry becomes depends only on
    the call ids before it, so a transcript's prefix is repaired once (`context_cache`)."""

    allowed: frozenset[str] | None = None
    seen_ids: set[str] = field(default_factory=set)
    dropped_calls: int = 0
    dropped_entries: int = 0
    trimmed: int = 0
    dropped_signed: int = 0

    def repaired(self, entry: TranscriptEntry) -> TranscriptEntry | None:
        """The entry as sent (itself when it needs nothing), or None when it is dropped."""
        if entry.role != Role.ASSISTANT or not entry.tool_calls:
            return entry
        kept: list[ToolCall] = []
        dropped_here = trimmed_here = 0
        for call in entry.tool_calls:
            name = call.name.strip()
            if (
                not call.id.strip()
                or call.id in self.seen_ids
                or any(k.id == call.id for k in kept)
                or not is_valid_tool_name(name, self.allowed)
            ):
                dropped_here += 1
                continue
            if name != call.name:
                call = call.model_copy(update={"name": name})
                trimmed_here += 1
            kept.append(call)
        if not dropped_here and not trimmed_here:
            self.seen_ids.update(call.id for call in kept)
            return entry
        if entry.meta.get(THINKING_META_KEY):
            # A signed turn is replayed as it was signed or not at all.
            self.dropped_signed += 1
            self.dropped_calls += len(entry.tool_calls)
            return None
        self.dropped_calls += dropped_here
        self.trimmed += trimmed_here
        if not kept and not entry.text.strip() and not entry.reasoning.strip():
            self.dropped_entries += 1
            return None
        self.seen_ids.update(call.id for call in kept)
        return entry.model_copy(update={"tool_calls": kept})

    def report(self, entries: Sequence[TranscriptEntry], out: list[TranscriptEntry]) -> InputRepair:
        """The repair of `entries` whose repaired entries are `out`."""
        changed = bool(
            self.dropped_calls or self.dropped_entries or self.trimmed or self.dropped_signed
        )
        return InputRepair(
            entries=out if changed else _as_list(entries),
            dropped_tool_calls=self.dropped_calls,
            dropped_assistant_entries=self.dropped_entries,
            trimmed_names=self.trimmed,
            dropped_signed_turns=self.dropped_signed,
        )


def repair_tool_call_inputs(
    entries: Sequence[TranscriptEntry], *, allowed_tool_names: Iterable[str] | None = None
) -> InputRepair:
    repairer = CallInputRepairer(_normalize_allowed(allowed_tool_names))
    out: list[TranscriptEntry] = []
    for entry in entries:
        if entry.role != Role.ASSISTANT or not entry.tool_calls:
            out.append(entry)  # what `repaired` does, without the call (most entries)
            continue
        repaired = repairer.repaired(entry)
        if repaired is not None:
            out.append(repaired)
    return repairer.report(entries, out)


# -- §12.1 pairing ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PairingRepair:
    entries: list[TranscriptEntry]
    added: tuple[str, ...] = ()  # call ids answered with a synthetic error result
    dropped_duplicates: int = 0
    dropped_orphans: int = 0
    dropped_errored_results: int = 0
    names_restored: int = 0
    moved: bool = False

    @property
    def changed(self) -> bool:
        return bool(
            self.added
            or self.dropped_duplicates
            or self.dropped_orphans
            or self.dropped_errored_results
            or self.names_restored
            or self.moved
        )


def synthetic_result(assistant: TranscriptEntry, call: ToolCall) -> TranscriptEntry:
    """The error result that stands in for a missing one. Its id follows the store's rule for
    result ids, and its time is its turn's, so repairing twice builds the same entry."""
    return TranscriptEntry(
        id=f"{call.id}:result",
        role=Role.TOOL,
        ts=assistant.ts,
        run_id=assistant.run_id,
        tool_call_id=call.id,
        tool_name=call.name.strip() or "unknown",
        text=SYNTHETIC_RESULT_TEXT,
        is_error=True,
        meta={SYNTHETIC_META_KEY: SYNTHETIC_META_VALUE},
    )


def _with_call_name(result: TranscriptEntry, call_name: str) -> TranscriptEntry:
    raw = result.tool_name or ""
    trimmed = raw.strip()
    if trimmed:
        return result if raw == trimmed else result.model_copy(update={"tool_name": trimmed})
    return result.model_copy(update={"tool_name": call_name.strip() or "unknown"})


@dataclass(slots=True)  # not frozen: one is made per span, and a frozen one costs more to make
class SpanPairing:
    """One assistant turn with calls and what followed it up to the next assistant turn, paired:
    the entries to send (the turn, its results in call order, the remainder) and the counts."""

    entries: list[TranscriptEntry]
    answered: set[str]  # call ids this span answered (a later span never answers them)
    added: list[str]
    dropped_duplicates: int
    dropped_orphans: int
    dropped_errored_results: int
    names_restored: int
    moved: bool


def pair_span(
    assistant: TranscriptEntry,
    following: Sequence[TranscriptEntry],
    answered: Set[str],
    errored_turn_results: ErroredTurnResults,
) -> SpanPairing:
    """§12.1 for one span; `answered`: the call ids earlier spans answered (not changed)."""
    call_names = {call.id: call.name for call in assistant.tool_calls}
    found: dict[str, tuple[int, TranscriptEntry]] = {}  # call id → (index in span, result)
    remainder: list[tuple[int, TranscriptEntry]] = []
    duplicates = orphans = errored_dropped = names = 0
    for index, nxt in enumerate(following):
        if nxt.role != Role.TOOL:
            remainder.append((index, nxt))
            continue
        call_id = nxt.tool_call_id
        if call_id is None or call_id not in call_names:
            orphans += 1
            continue
        if call_id in answered or call_id in found:
            duplicates += 1
            continue
        fixed = _with_call_name(nxt, call_names[call_id])
        names += fixed is not nxt
        found[call_id] = (index, fixed)
    out = [assistant]
    added: list[str] = []
    here: set[str] = set()
    errored = assistant.stop_reason in NO_SYNTHESIS_STOP_REASONS
    output_order: list[int] = []  # span indexes of the kept entries, in output order
    for call in assistant.tool_calls:
        if call.id in answered or call.id in here:
            continue  # an earlier turn used this id and was answered; never answer twice
        if call.id in found:
            index, result = found[call.id]
            if errored and errored_turn_results is ErroredTurnResults.DROP:
                errored_dropped += 1
                continue
            output_order.append(index)
        elif errored:
            continue
        else:
            result = synthetic_result(assistant, call)
            added.append(call.id)
        here.add(call.id)
        out.append(result)
    out.extend(e for _, e in remainder)
    output_order.extend(index for index, _ in remainder)
    return SpanPairing(
        entries=out,
        answered=here,
        added=added,
        dropped_duplicates=duplicates,
        dropped_orphans=orphans,
        dropped_errored_results=errored_dropped,
        names_restored=names,
        moved=output_order != sorted(output_order),
    )


@dataclass
class ResultPairer:
    """§12.1 fed one entry at a time. Everything before the latest assistant turn with calls is
    final (`out`): a span ends at the next assistant turn, and nothing after it changes what
    came before. The open span (`open_span`) is paired again whenever it is read, since a later
    entry may still answer its calls."""

    errored_turn_results: ErroredTurnResults = ErroredTurnResults.KEEP
    out: list[TranscriptEntry] = field(default_factory=list)
    answered: set[str] = field(default_factory=set)
    added: list[str] = field(default_factory=list)
    dropped_duplicates: int = 0
    dropped_orphans: int = 0
    dropped_errored_results: int = 0
    names_restored: int = 0
    moved: bool = False
    span: TranscriptEntry | None = None
    following: list[TranscriptEntry] = field(default_factory=list)

    def feed(self, entry: TranscriptEntry) -> None:
        if self.span is not None:
            if entry.role != Role.ASSISTANT:
                self.following.append(entry)
                return
            self._commit(self.open_span())
        if entry.role == Role.TOOL:
            self.dropped_orphans += 1  # not inside the span of the turn that called it
        elif entry.role != Role.ASSISTANT or not entry.tool_calls:
            self.out.append(entry)
        else:
            self.span, self.following = entry, []

    def open_span(self) -> SpanPairing | None:
        if self.span is None:
            return None
        return pair_span(self.span, self.following, self.answered, self.errored_turn_results)

    def _commit(self, span: SpanPairing | None) -> None:
        if span is None:
            return
        self.out.extend(span.entries)
        self.answered |= span.answered
        self.added.extend(span.added)
        self.dropped_duplicates += span.dropped_duplicates
        self.dropped_orphans += span.dropped_orphans
        self.dropped_errored_results += span.dropped_errored_results
        self.names_restored += span.names_restored
        self.moved = self.moved or span.moved
        self.span, self.following = None, []

    def finish(self, entries: Sequence[TranscriptEntry]) -> PairingRepair:
        """The repair of `entries` (everything fed), closing the open span."""
        self._commit(self.open_span())
        if _unchanged(entries, self.out):
            return PairingRepair(entries=_as_list(entries))
        return PairingRepair(
            entries=self.out,
            added=tuple(self.added),
            dropped_duplicates=self.dropped_duplicates,
            dropped_orphans=self.dropped_orphans,
            dropped_errored_results=self.dropped_errored_results,
            names_restored=self.names_restored,
            moved=self.moved,
        )


def repair_tool_result_pairing(
    entries: Sequence[TranscriptEntry],
    *,
    errored_turn_results: ErroredTurnResults = ErroredTurnResults.KEEP,
) -> PairingRepair:
    pairer = ResultPairer(errored_turn_results)
    for entry in entries:
        if pairer.span is not None and entry.role != Role.ASSISTANT:
            pairer.following.append(entry)  # what `feed` does, without the call (most entries)
        else:
            pairer.feed(entry)
    return pairer.finish(entries)


# -- both, in order --------------------------------------------------------------------------


@dataclass(frozen=True)
class TranscriptRepair:
    entries: list[TranscriptEntry]
    inputs: InputRepair
    pairing: PairingRepair

    @property
    def changed(self) -> bool:
        return self.inputs.changed or self.pairing.changed


def repair_transcript(
    entries: Sequence[TranscriptEntry],
    *,
    allowed_tool_names: Iterable[str] | None = None,
    errored_turn_results: ErroredTurnResults = ErroredTurnResults.KEEP,
) -> TranscriptRepair:
    """§12.2 then §12.1: dropping a bad call first lets pairing drop its result as an orphan."""
    inputs = repair_tool_call_inputs(entries, allowed_tool_names=allowed_tool_names)
    pairing = repair_tool_result_pairing(inputs.entries, errored_turn_results=errored_turn_results)
    return TranscriptRepair(entries=pairing.entries, inputs=inputs, pairing=pairing)
