"""The live guard's measure of the whole context (SPEC §10.2), kept per session so that a
request measures only the entries added since the session's previous request on this worker.

Every model call checks the whole context against the window before it is sent. Measured from
scratch, that is a pass over every entry (each tool call's arguments serialized again) on every
step of a long run. Here the total of the previous request is kept beside a digest of the ids it
counted and of what else decides an entry's measured size (the window, and the reset, compaction
and truncation markers, which change what the entries say without changing the ids they count).
When the new context starts with exactly those entries, only the rest is measured and added;
otherwise (a compaction, a truncation, a dropped partial, another worker's cache, a restart) it
is measured whole. Transcript entries are immutable once written (the store ignores a second
write of an id), so equal ids under an equal basis are equal entries: the total is the same
number the whole measure gives, and so is every decision made on it.

In the worker's memory, not in the run's state: carried through the workflow, the figure would
add to every step's history twice (the call's input and its result), for a cache that any
worker can rebuild in one pass.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from activities.context.token_estimate import guard_context_chars
from agentlane.transcript import Role, TranscriptEntry

# Sessions remembered per worker (least recently measured dropped first): a few hundred bytes
# each.
DEFAULT_CAPACITY = 4096
_MARKER_ROLES = frozenset({Role.RESET, Role.COMPACTION, Role.TRUNCATION})


def measure_basis(stored: Sequence[TranscriptEntry], context_window: int) -> bytes:
    """What decides the measured size of an entry besides its own id: the window (the guard's
    per-result cap) and every marker that rewrites what the request shows."""
    digest = hashlib.blake2b(str(context_window).encode(), digest_size=16)
    for entry in stored:
        if entry.role in _MARKER_ROLES:
            digest.update(b"\0" + entry.id.encode())
    return digest.digest()


@dataclass(frozen=True)
class _Measured:
    basis: bytes
    count: int
    ids: bytes  # digest of the ids of the `count` entries measured, in order
    chars: int


@dataclass
class ContextMeasures:
    """Per-session running totals of `guard_context_chars`; `incremental` and `whole` count how
    each request was measured (the worker logs them, the tests read them)."""

    capacity: int = DEFAULT_CAPACITY
    incremental: int = 0
    whole: int = 0

    def __post_init__(self) -> None:
        self._by_session: OrderedDict[str, _Measured] = OrderedDict()

    def guard_chars(
        self, session_key: str, entries: Sequence[TranscriptEntry], basis: bytes
    ) -> tuple[int, int]:
        """`guard_context_chars(entries)`, and how many entries had to be measured for it."""
        ids = hashlib.blake2b(digest_size=16)
        known = self._by_session.get(session_key)
        start, chars = 0, 0
        if known is not None and known.basis == basis and known.count <= len(entries):
            for entry in entries[: known.count]:
                ids.update(entry.id.encode() + b"\0")
            if ids.digest() == known.ids:
                start, chars = known.count, known.chars
            else:
                ids = hashlib.blake2b(digest_size=16)
        for entry in entries[start:]:
            ids.update(entry.id.encode() + b"\0")
        chars += guard_context_chars(entries[start:])
        if start:
            self.incremental += 1
        else:
            self.whole += 1
        self._by_session[session_key] = _Measured(basis, len(entries), ids.digest(), chars)
        self._by_session.move_to_end(session_key)
        while len(self._by_session) > self.capacity:
            self._by_session.popitem(last=False)
        return chars, len(entries) - start

    def for_session(
        self, session_key: str, basis: bytes, measured: Callable[[int], None] | None = None
    ) -> Callable[[Sequence[TranscriptEntry]], int]:
        """The measure `apply_live_guard` takes, for one request of `session_key`."""

        def measure(entries: Sequence[TranscriptEntry]) -> int:
            chars, new = self.guard_chars(session_key, entries, basis)
            if measured is not None:
                measured(new)
            return chars

        return measure
