"""What the next model request is built from, read off an append-only transcript (issue 10).

The transcript file is never rewritten; markers appended to it decide what a request sees:

* `reset`: the session starts afresh. Nothing before the latest reset is sent (that branch stays
  in the file, readable with `agentlane transcript --all`).
* `compaction`: everything before `meta["first_kept_id"]` is replaced by the marker's summary.
  The request starts with the summary (as a user message, as pi does), then the user message
  that started a turn the cut fell in (`meta["turn_start_id"]`, kept verbatim so the model never
  loses what it was asked), then every entry from the first kept one on. Only the latest
  compaction since the reset counts: each summary already holds the one before it.
* `truncation`: tool results cut to fit (`meta["replacements"]`: entry id -> the text to send),
  applied to the entries they name; the stored results stay whole.
* `branch`: where this session was branched from (informational: the copied history precedes it).

Pure: no I/O. `context_entries` is what the model-call activity, the compaction activity and the
token estimates all start from, so they agree on what "the context" is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from agentlane.transcript import CHAT_ROLES, Role, TranscriptEntry

SUMMARY_PREFIX: Final = (
    "The conversation history before this point was compacted into the following summary:\n\n"
    "<summary>\n"
)
SUMMARY_SUFFIX: Final = "\n</summary>"
# Marks the user message a compaction summary becomes, so nothing takes it for the user's words.
SUMMARY_META_KEY: Final = "compaction_summary"


@dataclass(frozen=True)
class ContextView:
    # The chat entries a request is built from, in order (the summary first when compacted).
    entries: list[TranscriptEntry]
    # The latest compaction in force, if any.
    compaction: TranscriptEntry | None = None
    # Index in the stored list where the current branch starts (after the latest reset).
    branch_start: int = 0
    # Entry ids whose text a truncation marker replaced.
    truncated_ids: frozenset[str] = field(default_factory=frozenset)
    # Index in `entries` of the first entry written after the latest compaction or truncation:
    # an assistant entry before it reported usage for a context that no longer exists, so only
    # entries from here on may calibrate token counts.
    fresh_from: int = 0

    @property
    def summary(self) -> str | None:
        return self.compaction.text if self.compaction is not None else None


def latest_index(entries: Sequence[TranscriptEntry], role: Role, start: int = 0) -> int | None:
    for index in range(len(entries) - 1, start - 1, -1):
        if entries[index].role == role:
            return index
    return None


def branch_start(entries: Sequence[TranscriptEntry]) -> int:
    """Where the current branch starts: just after the latest reset, else 0."""
    reset = latest_index(entries, Role.RESET)
    return 0 if reset is None else reset + 1


def summary_entry(compaction: TranscriptEntry) -> TranscriptEntry:
    """The compaction's summary as the user message that opens a request."""
    return TranscriptEntry(
        id=f"{compaction.id}/summary",
        role=Role.USER,
        ts=compaction.ts,
        text=SUMMARY_PREFIX + compaction.text + SUMMARY_SUFFIX,
        meta={SUMMARY_META_KEY: True},
    )


def is_summary(entry: TranscriptEntry) -> bool:
    return bool(entry.meta.get(SUMMARY_META_KEY))


def _replacements(entries: Sequence[TranscriptEntry]) -> dict[str, str]:
    out: dict[str, str] = {}
    for entry in entries:
        if entry.role == Role.TRUNCATION:
            replacements = entry.meta.get("replacements")
            if isinstance(replacements, dict):
                out.update({str(k): str(v) for k, v in replacements.items()})
    return out


def _kept_from(
    entries: Sequence[TranscriptEntry], start: int, compaction_index: int
) -> tuple[int, int | None]:
    """Index of the first kept entry, and of the kept turn-start user message (if any)."""
    meta = entries[compaction_index].meta
    first_kept = meta.get("first_kept_id")
    turn_start = meta.get("turn_start_id")
    ids = {entries[i].id: i for i in range(start, compaction_index)}
    first = ids.get(str(first_kept), compaction_index + 1) if first_kept else compaction_index + 1
    turn = ids.get(str(turn_start)) if turn_start else None
    return first, turn if turn is not None and turn < first else None


def shown_entry(entry: TranscriptEntry, replacements: dict[str, str]) -> TranscriptEntry:
    """A chat entry as requests show it: a tool result a truncation marker replaced carries the
    replacement text (and its stored length); any other entry is itself."""
    text = replacements.get(entry.id)
    if text is None or entry.role != Role.TOOL or text == entry.text:
        return entry
    meta = {**entry.meta, "truncated_from_chars": len(entry.text)}
    return entry.model_copy(update={"text": text, "meta": meta})


def context_entries(entries: Sequence[TranscriptEntry]) -> ContextView:
    """The entries a request is built from (before repair and the live guard)."""
    return context_view_and_replacements(entries)[0]


def context_view_and_replacements(
    entries: Sequence[TranscriptEntry],
) -> tuple[ContextView, dict[str, str]]:
    """`context_entries`, and the truncation markers' replacement texts in force (what an entry
    appended after them would show: `context_cache` extends a view by appends)."""
    start = branch_start(entries)
    compaction_index = latest_index(entries, Role.COMPACTION, start)
    head: list[TranscriptEntry] = []
    first = start
    compaction: TranscriptEntry | None = None
    if compaction_index is not None:
        compaction = entries[compaction_index]
        first, turn = _kept_from(entries, start, compaction_index)
        head.append(summary_entry(compaction))
        if turn is not None:
            head.append(entries[turn])
    replacements = _replacements(entries[start:])
    markers = [
        i
        for i in range(start, len(entries))
        if entries[i].role in (Role.COMPACTION, Role.TRUNCATION)
    ]
    last_marker = markers[-1] if markers else -1
    body: list[TranscriptEntry] = []
    truncated: set[str] = set()
    fresh_from: int | None = None
    for index in range(first, len(entries)):
        entry = entries[index]
        if entry.role not in CHAT_ROLES:
            continue
        if fresh_from is None and index > last_marker:
            fresh_from = len(head) + len(body)
        shown = shown_entry(entry, replacements) if entry.id in replacements else entry
        if shown is not entry:
            truncated.add(entry.id)
        body.append(shown)
    view = ContextView(
        entries=[*head, *body],
        compaction=compaction,
        branch_start=start,
        truncated_ids=frozenset(truncated),
        fresh_from=len(head) + len(body) if fresh_from is None else fresh_from,
    )
    return view, replacements
