"""The transcript as one model request sees it (SPEC §10.2, §12.4): what the store holds, made
fit to send, on a copy; the stored transcript is never rewritten here.

In order: the context markers decide which entries count (`context_view`: the latest reset,
compaction and truncations); a failed attempt's partial text is left out once its call was
answered in the end; tool calls and results are paired again (an orphan result, the
"unexpected tool_use_id" that providers refuse, is dropped; a duplicate too; a missing result
gets a synthetic one, §12.1);
and a tool result over the per-result share of the window is cut, head and tail kept (§10.2).

With a `ContextCache` (the worker's), the same context is built from the session's previous
request on that worker plus what was appended since (`context_cache`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from activities.context.context_view import ContextView, context_entries
from activities.context.token_estimate import guard_context_chars
from activities.context.tool_result_truncation import apply_live_guard
from activities.context.transcript_repair import repair_transcript
from agentlane.transcript import TranscriptEntry

if TYPE_CHECKING:
    from activities.context.context_cache import ContextCache

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


def partial_of(entry: TranscriptEntry) -> str | None:
    """The id of the entry whose failed attempt `entry` is, if it is a partial."""
    return entry.id[: -len(PARTIAL_SUFFIX)] if entry.id.endswith(PARTIAL_SUFFIX) else None


def without_answered_partials(entries: list[TranscriptEntry]) -> list[TranscriptEntry]:
    """A failed attempt's partial text is left out once the same call was answered (the user
    saw the answer replace it); kept when it was the last word of a run that ended there."""
    ids = {e.id for e in entries}
    cut = len(PARTIAL_SUFFIX)
    return [e for e in entries if not (e.id.endswith(PARTIAL_SUFFIX) and e.id[:-cut] in ids)]


def repair_notes(
    synthetic: int, orphans: int, duplicates: int, names: int, invalid_calls: int
) -> str:
    """The log's account of what repair changed (`RequestContext.repaired`)."""
    return ", ".join(
        f"{label} {count}"
        for label, count in (
            ("synthetic results", synthetic),
            ("orphan results dropped", orphans),
            ("duplicate results dropped", duplicates),
            ("tool names restored", names),
            ("invalid tool calls dropped", invalid_calls),
        )
        if count
    )


def context_for_request(
    entries: list[TranscriptEntry],
    context_window: int,
    measures: ContextCache | None = None,
    session_key: str = "",
) -> RequestContext:
    """`entries`: the session's stored transcript, as read. With `measures` (the worker's
    cache), the context is the session's previous one extended by what was appended since: the
    same request, built in time proportional to what was added."""
    if measures is not None:
        return measures.context(session_key, entries, context_window)
    view = context_entries(entries)
    visible = without_answered_partials(view.entries)
    repair = repair_transcript(visible)
    pairing, inputs = repair.pairing, repair.inputs
    guarded = apply_live_guard(repair.entries, context_window, guard_context_chars)
    return RequestContext(
        entries=list(guarded.entries),
        repaired=repair_notes(
            len(pairing.added),
            pairing.dropped_orphans,
            pairing.dropped_duplicates,
            pairing.names_restored,
            inputs.dropped_tool_calls,
        ),
        truncated_results=len(guarded.truncated_ids),
        view=view,
        estimated_chars=guarded.estimated_chars,
        cap_chars=guarded.context_cap_chars,
    )
