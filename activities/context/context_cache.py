"""A session's request context kept per worker, so that a model call processes only the entries
appended since the session's previous call on that worker (issues 22, 26).

Built whole, every request passes over every entry of the session's context: the view
(`context_view`), the partials left out, the §12.2 and §12.1 repairs, the live guard's cuts and
its measure. A step's cost then grows with the session's age until a compaction. Here each
stage keeps what it made of the entries so far, and a request feeds it only the new ones:

* the view: without a new marker, new chat entries are appended as they show (a truncation's
  replacement text applied); nothing before them changes;
* the partials: a partial is left out once its answer appears *anywhere*, so an answer to a
  partial the cached context still holds would remove it from the middle: built whole then;
* the §12.2 repair decides each entry by the call ids before it (`CallInputRepairer`);
* the §12.1 pairing is final up to the latest assistant turn with calls: that turn's span may
  still gain results, so it is paired again on every request (`ResultPairer.open_span`);
* the live guard cuts and measures each entry on its own, at the window's cap.

The cache holds the stored entries it processed and is used only when the new transcript starts
with exactly those (list equality: the same objects when the store's cache served both reads,
else equal contents), under the same window, and the new entries carry no reset, compaction or
truncation marker. Anything else (a marker, another window, a different prefix, an answered
partial, a session dropped from the cache, a restart) builds the context whole: the result is
always the one `context_for_request` builds without a cache (`tests/unit/test_context_cache.py`
holds them equal over random transcripts). The repair counts in `RequestContext.repaired` are the
whole transcript's, as a whole build reports them: the cache keeps the counts of the final part
and adds the open span's.

In the worker's memory, never in a workflow's state: carried through the workflow, it would add
to every step's history, for a cache that any worker rebuilds in one pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from activities.bounded_cache import BoundedCache
from activities.context.context_view import (
    ContextView,
    context_view_and_replacements,
    shown_entry,
)
from activities.context.request_context import RequestContext, partial_of, repair_notes
from activities.context.token_estimate import guard_entry_chars
from activities.context.tool_result_truncation import (
    guard_context_cap,
    guard_single_result_cap,
    guarded_entry,
)
from activities.context.transcript_repair import CallInputRepairer, ResultPairer
from agentlane.transcript import CHAT_ROLES, Role, TranscriptEntry

# Sessions kept per worker (least recently used dropped first), and the stored entries they may
# hold together: the entries are mostly the ones the transcript store's cache holds too, but a
# session the store dropped stays alive here until it is dropped as well.
DEFAULT_SESSIONS = 256
DEFAULT_ENTRIES = 200_000
# Markers rewrite what earlier entries show (`context_view`): after one, the context is rebuilt.
_MARKER_ROLES = frozenset({Role.RESET, Role.COMPACTION, Role.TRUNCATION})


@dataclass
class _Processed:
    """One session's context built from `stored`, stage by stage."""

    window: int
    stored: list[TranscriptEntry]
    # The view (`ContextView`'s fields; `fresh_from` never moves on an append).
    view: list[TranscriptEntry]
    compaction: TranscriptEntry | None
    branch_start: int
    fresh_from: int
    view_truncated: set[str]
    replacements: dict[str, str]
    # Ids in the view, and the ids whose partial is still sent (their arrival rebuilds).
    ids: set[str]
    waiting: set[str] = field(default_factory=set)
    inputs: CallInputRepairer = field(default_factory=CallInputRepairer)
    pairer: ResultPairer = field(default_factory=ResultPairer)
    # The live guard over the pairing's final part: what is sent, the ids it cut, its measure.
    sent: list[TranscriptEntry] = field(default_factory=list)
    cut: list[str] = field(default_factory=list)
    chars: int = 0


def _build(stored: list[TranscriptEntry], window: int) -> _Processed:
    view, replacements = context_view_and_replacements(stored)
    state = _Processed(
        window=window,
        stored=list(stored),
        view=[],
        compaction=view.compaction,
        branch_start=view.branch_start,
        fresh_from=view.fresh_from,
        view_truncated=set(view.truncated_ids),
        replacements=replacements,
        ids={e.id for e in view.entries},
    )
    _take(state, view.entries)
    return state


def _extend(state: _Processed, stored: list[TranscriptEntry], window: int) -> bool:
    """Extend `state` by the entries of `stored` after its prefix; False (and `state` is not to
    be used) when `stored` is not that prefix plus appends that leave the prefix as it was."""
    count = len(state.stored)
    if window != state.window or len(stored) < count:
        return False
    prefix = stored[:count]
    if prefix != state.stored:
        return False
    new = stored[count:]
    if any(entry.role in _MARKER_ROLES for entry in new):
        return False
    chat = [e for e in new if e.role in CHAT_ROLES]
    shown = [shown_entry(e, state.replacements) for e in chat]
    new_ids = {e.id for e in shown}
    if not state.waiting.isdisjoint(new_ids):
        return False  # a partial the context still sends was answered: it leaves the middle
    state.stored = prefix  # the objects just read: the next comparison is by identity
    state.stored.extend(new)
    state.view_truncated.update(s.id for e, s in zip(chat, shown, strict=True) if s is not e)
    state.ids |= new_ids
    _take(state, shown)
    return True


def _take(state: _Processed, view_entries: list[TranscriptEntry]) -> None:
    """Feed view entries (their ids already in `state.ids`) through the later stages."""
    state.view.extend(view_entries)
    for entry in view_entries:
        answers = partial_of(entry)
        if answers is not None:
            if answers in state.ids:
                continue
            state.waiting.add(answers)
        repaired = state.inputs.repaired(entry)
        if repaired is not None:
            state.pairer.feed(repaired)
    cap = guard_single_result_cap(state.window)
    for entry in state.pairer.out[len(state.sent) :]:
        guarded = guarded_entry(entry, cap)
        if guarded is not entry:
            state.cut.append(entry.id)
        state.sent.append(guarded)
        state.chars += guard_entry_chars(guarded)


def _request(state: _Processed) -> RequestContext:
    """The request context of `state`: its final part and its open span, paired now."""
    cap = guard_single_result_cap(state.window)
    pairer = state.pairer
    span = pairer.open_span()
    tail = [] if span is None else [guarded_entry(e, cap) for e in span.entries]
    cut = (
        []
        if span is None
        else [o.id for o, g in zip(span.entries, tail, strict=True) if o is not g]
    )
    return RequestContext(
        entries=[*state.sent, *tail],
        repaired=repair_notes(
            len(pairer.added) + (len(span.added) if span else 0),
            pairer.dropped_orphans + (span.dropped_orphans if span else 0),
            pairer.dropped_duplicates + (span.dropped_duplicates if span else 0),
            pairer.names_restored + (span.names_restored if span else 0),
            state.inputs.dropped_calls,
        ),
        truncated_results=len(state.cut) + len(cut),
        view=ContextView(
            entries=list(state.view),
            compaction=state.compaction,
            branch_start=state.branch_start,
            truncated_ids=frozenset(state.view_truncated),
            fresh_from=state.fresh_from,
        ),
        estimated_chars=state.chars + sum(guard_entry_chars(e) for e in tail),
        cap_chars=guard_context_cap(state.window),
    )


class ContextCache:
    """The worker's request contexts by session. `incremental` and `whole` count how requests
    were built (the worker logs them, the tests read them); `processed` is how many stored
    entries the latest request had to process."""

    def __init__(self, sessions: int = DEFAULT_SESSIONS, entries: int = DEFAULT_ENTRIES) -> None:
        self.entries = entries
        self.incremental = 0
        self.whole = 0
        self.processed = 0
        self._by_session: BoundedCache[str, _Processed] = BoundedCache(sessions)

    def context(
        self, session_key: str, stored: list[TranscriptEntry], context_window: int
    ) -> RequestContext:
        # Taken out while in use: a concurrent request of the session builds its own.
        state = self._by_session.pop(session_key)
        before = 0 if state is None else len(state.stored)
        if state is not None and _extend(state, stored, context_window):
            self.incremental += 1
            self.processed = len(stored) - before
        else:
            state = _build(stored, context_window)
            self.whole += 1
            self.processed = len(stored)
        self._by_session[session_key] = state
        self._by_session.trim_weight(self.entries, lambda s: len(s.stored))
        return _request(state)

    def __contains__(self, session_key: str) -> bool:
        return session_key in self._by_session
