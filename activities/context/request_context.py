"""The transcript as one model request sees it (SPEC §10.2, §12.4): what the store holds, made
fit to send, on a copy; the stored transcript is never rewritten here.

In order: the context markers decide which entries count (`context_view`: the latest reset,
compaction and truncations); a failed attempt's partial text is left out once its call was
answered in the end; tool calls and results are paired again (an orphan result, the
"unexpected tool_use_id" that providers refuse, is dropped; a duplicate too; a missing result
gets a synthetic one, §12.1);
and a tool result over the per-result share of the window is cut, head and tail kept (§10.2).
"""

from __future__ import annotations

from dataclasses import dataclass

from activities.context.context_measure import ContextMeasures, measure_basis
from activities.context.context_view import ContextView, context_entries
from activities.context.token_estimate import guard_context_chars
from activities.context.tool_result_truncation import apply_live_guard
from activities.context.transcript_repair import repair_transcript
from agentlane.transcript import TranscriptEntry

# A failed attempt's partial text is written under `<entry id>` + this (activities/model_call).
PARTIAL_SUFFIX = "/partial"


@dataclass(frozen=True)
class RequestContext:
    entries: list[TranscriptEntry]
    # What had to change, for the log (never an error: the request goes out repaired).
    repaired: str = ""
    truncated_results: int = 0
    view: ContextView | None = None
    # The live guard's estimate of the whole context (characters, tool results double) and
    # its cap (90 % of the window): over the cap, the request would overflow.
    estimated_chars: int = 0
    cap_chars: int = 0

    @property
    def overflow(self) -> bool:
        return self.estimated_chars > self.cap_chars > 0


def without_answered_partials(entries: list[TranscriptEntry]) -> list[TranscriptEntry]:
    """A failed attempt's partial text is left out once the same call was answered (the user
    saw the answer replace it); kept when it was the last word of a run that ended there."""
    ids = {e.id for e in entries}
    return [
        e
        for e in entries
        if not (e.id.endswith(PARTIAL_SUFFIX) and e.id[: -len(PARTIAL_SUFFIX)] in ids)
    ]


def context_for_request(
    entries: list[TranscriptEntry],
    context_window: int,
    measures: ContextMeasures | None = None,
    session_key: str = "",
) -> RequestContext:
    """`entries`: the session's stored transcript, as read. With `measures`, the whole
    context's size is the session's running total plus what was added since (same figure)."""
    view = context_entries(entries)
    visible = without_answered_partials(view.entries)
    repair = repair_transcript(visible)
    pairing, inputs = repair.pairing, repair.inputs
    notes = [
        f"{label} {count}"
        for label, count in (
            ("synthetic results", len(pairing.added)),
            ("orphan results dropped", pairing.dropped_orphans),
            ("duplicate results dropped", pairing.dropped_duplicates),
            ("tool names restored", pairing.names_restored),
            ("invalid tool calls dropped", inputs.dropped_tool_calls),
        )
        if count
    ]
    measure = (
        guard_context_chars
        if measures is None
        else measures.for_session(session_key, measure_basis(entries, context_window))
    )
    guarded = apply_live_guard(repair.entries, context_window, measure)
    return RequestContext(
        entries=list(guarded.entries),
        repaired=", ".join(notes),
        truncated_results=len(guarded.truncated_ids),
        view=view,
        estimated_chars=guarded.estimated_chars,
        cap_chars=guarded.context_cap_chars,
    )
