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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
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


def repair_tool_call_inputs(
    entries: Sequence[TranscriptEntry], *, allowed_tool_names: Iterable[str] | None = None
) -> InputRepair:
    allowed = _normalize_allowed(allowed_tool_names)
    out: list[TranscriptEntry] = []
    seen_ids: set[str] = set()
    dropped_calls = dropped_entries = trimmed = dropped_signed = 0
    for entry in entries:
        if entry.role != Role.ASSISTANT or not entry.tool_calls:
            out.append(entry)
            continue
        kept: list[ToolCall] = []
        dropped_here = trimmed_here = 0
        for call in entry.tool_calls:
            name = call.name.strip()
            if (
                not call.id.strip()
                or call.id in seen_ids
                or any(k.id == call.id for k in kept)
                or not is_valid_tool_name(name, allowed)
            ):
                dropped_here += 1
                continue
            if name != call.name:
                call = call.model_copy(update={"name": name})
                trimmed_here += 1
            kept.append(call)
        if not dropped_here and not trimmed_here:
            out.append(entry)
            seen_ids.update(call.id for call in kept)
            continue
        if entry.meta.get(THINKING_META_KEY):
            # A signed turn is replayed as it was signed or not at all.
            dropped_signed += 1
            dropped_calls += len(entry.tool_calls)
            continue
        dropped_calls += dropped_here
        trimmed += trimmed_here
        if not kept and not entry.text.strip() and not entry.reasoning.strip():
            dropped_entries += 1
            continue
        seen_ids.update(call.id for call in kept)
        out.append(entry.model_copy(update={"tool_calls": kept}))
    changed = bool(dropped_calls or dropped_entries or trimmed or dropped_signed)
    return InputRepair(
        entries=out if changed else _as_list(entries),
        dropped_tool_calls=dropped_calls,
        dropped_assistant_entries=dropped_entries,
        trimmed_names=trimmed,
        dropped_signed_turns=dropped_signed,
    )


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


def repair_tool_result_pairing(
    entries: Sequence[TranscriptEntry],
    *,
    errored_turn_results: ErroredTurnResults = ErroredTurnResults.KEEP,
) -> PairingRepair:
    out: list[TranscriptEntry] = []
    answered: set[str] = set()
    added: list[str] = []
    duplicates = orphans = errored_dropped = names = 0
    moved = False
    i = 0
    while i < len(entries):
        entry = entries[i]
        if entry.role == Role.TOOL:
            orphans += 1  # not inside the span of the turn that called it
            i += 1
            continue
        if entry.role != Role.ASSISTANT or not entry.tool_calls:
            out.append(entry)
            i += 1
            continue
        call_names = {call.id: call.name for call in entry.tool_calls}
        found: dict[str, tuple[int, TranscriptEntry]] = {}  # call id → (input index, result)
        remainder: list[tuple[int, TranscriptEntry]] = []
        j = i + 1
        while j < len(entries) and entries[j].role != Role.ASSISTANT:
            nxt = entries[j]
            j += 1
            if nxt.role != Role.TOOL:
                remainder.append((j - 1, nxt))
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
            found[call_id] = (j - 1, fixed)
        out.append(entry)
        errored = entry.stop_reason in NO_SYNTHESIS_STOP_REASONS
        output_order: list[int] = []  # input indexes of the kept entries, in output order
        for call in entry.tool_calls:
            if call.id in answered:
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
                result = synthetic_result(entry, call)
                added.append(call.id)
            answered.add(call.id)
            out.append(result)
        out.extend(e for _, e in remainder)
        output_order.extend(index for index, _ in remainder)
        moved = moved or output_order != sorted(output_order)
        i = j
    if _unchanged(entries, out):
        return PairingRepair(entries=_as_list(entries))
    return PairingRepair(
        entries=out,
        added=tuple(added),
        dropped_duplicates=duplicates,
        dropped_orphans=orphans,
        dropped_errored_results=errored_dropped,
        names_restored=names,
        moved=moved,
    )


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
