"""The worker's request contexts (activities/context/context_cache): over random transcripts
grown request by request (turns with calls answered in and out of order, late, twice, never, by
orphans; invalid calls; partials answered later; compactions, truncations, resets; window
changes; prefixes that differ), every request built from the cache equals the one built whole,
and the counters say how many were built incrementally."""

from __future__ import annotations

import random
from typing import Any

import pytest

from activities.context.context_cache import ContextCache
from activities.context.request_context import PARTIAL_SUFFIX, context_for_request
from activities.providers.anthropic_request import THINKING_META_KEY
from agentlane.transcript import Role, ToolCall, TranscriptEntry

WINDOWS = [16_000, 32_000, 200_000]


class Session:
    """A stored transcript grown the way runs grow it (append-only, markers included), with
    the odd damage the repair exists for."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.entries: list[TranscriptEntry] = []
        self.pending: list[str] = []  # partial entries not answered yet
        self.owed: list[TranscriptEntry] = []  # results not written yet
        self.call_ids: list[str] = []
        self.n = 0

    def _id(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def add(self, id: str, role: Role, **fields: Any) -> None:
        self.entries.append(TranscriptEntry(id=id, role=role, ts=0, **fields))

    def _call(self) -> ToolCall:
        rng = self.rng
        kind = rng.choices(
            ["ok", "bad_name", "no_id", "reused", "spaced", "raw"], [20, 1, 1, 1, 1, 1]
        )[0]
        call_id = self._id("c")
        name = "write"
        if kind == "bad_name":
            name = rng.choice(["", "bad name!", "x" * 70])
        elif kind == "no_id":
            call_id = " "
        elif kind == "reused" and self.call_ids:
            call_id = rng.choice(self.call_ids)
        elif kind == "spaced":
            name = " write "
        self.call_ids.append(call_id)
        if kind == "raw":
            return ToolCall(id=call_id, name=name, raw_arguments="{not json")
        return ToolCall(id=call_id, name=name, arguments={"path": "é" * rng.randint(1, 9)})

    def _result(self, call_id: str | None) -> TranscriptEntry:
        rng = self.rng
        size = rng.choice([10, 300, 5_000, 90_000])  # sometimes far over the guard's cap
        return TranscriptEntry(
            id=self._id("r"),
            role=Role.TOOL,
            ts=0,
            tool_call_id=call_id,
            tool_name=rng.choice(["write", "write", " ", ""]),
            text="r" * size,
            meta={"images": [1]} if rng.random() < 0.1 else {},
        )

    def _turn(self) -> None:
        rng = self.rng
        calls = [self._call() for _ in range(rng.choice([1, 1, 2, 3]))]
        meta = {THINKING_META_KEY: "sig"} if rng.random() < 0.1 else {}
        stop = rng.choices([None, "tool_use", "error", "aborted"], [5, 5, 1, 1])[0]
        self.add(
            self._id("a"),
            Role.ASSISTANT,
            text="t" * rng.randint(0, 200),
            tool_calls=calls,
            stop_reason=stop,
            meta=meta,
        )
        results = [self._result(c.id) for c in calls if rng.random() < 0.9]
        if rng.random() < 0.2:
            rng.shuffle(results)
        if results and rng.random() < 0.1:
            results.append(results[0].model_copy(update={"id": self._id("dup")}))
        now = rng.randint(0, len(results)) if rng.random() < 0.3 else len(results)
        self.entries.extend(results[:now])
        self.owed.extend(results[now:])  # written by a later request (or after another turn)

    def step(self) -> None:
        """One random thing a run or an operator does to the transcript."""
        rng = self.rng
        chat = [e for e in self.entries if e.role in (Role.USER, Role.ASSISTANT, Role.TOOL)]
        kind = rng.choices(
            [
                "turn",
                "user",
                "owed",
                "reply",
                "orphan",
                "partial",
                "answer",
                "other",
                "compaction",
                "truncation",
                "reset",
            ],
            weights=[10, 3, 3, 2, 0.5, 2, 2, 0.5, 0.7, 0.7, 0.2],
        )[0]
        if kind == "turn":
            self._turn()
        elif kind == "owed" and self.owed:
            self.entries.append(self.owed.pop(rng.randrange(len(self.owed))))
        elif kind == "reply":
            self.add(self._id("a"), Role.ASSISTANT, text="reply", reasoning="r" * 20)
        elif kind == "orphan":
            self.entries.append(self._result(rng.choice([None, "nobody", *self.call_ids[-3:]])))
        elif kind == "partial":
            # A failed attempt's partial text, answered (or not) by a later step.
            answer = self._id("a")
            self.add(answer + PARTIAL_SUFFIX, Role.ASSISTANT, text="p" * 50)
            self.pending.append(answer)
        elif kind == "answer" and self.pending:
            answer = self.pending.pop(rng.randrange(len(self.pending)))
            self.add(answer, Role.ASSISTANT, text="done")
        elif kind == "other":
            role = rng.choice([Role.BRANCH, Role.DROPPED, Role.SYSTEM])
            self.add(self._id("o"), role, text="other")
        elif kind == "compaction" and chat:
            kept = rng.choice(chat)
            users = [e for e in chat if e.role == Role.USER]
            turn = rng.choice(users).id if users and rng.random() < 0.5 else None
            self.add(
                self._id("compaction"),
                Role.COMPACTION,
                text="summary " * rng.randint(1, 30),
                meta={"first_kept_id": kept.id, "turn_start_id": turn},
            )
        elif kind == "truncation":
            results = [e for e in chat if e.role == Role.TOOL] + self.owed[
                :1
            ]  # one not yet written
            if results:
                cut = rng.sample(results, k=min(len(results), rng.randint(1, 3)))
                self.add(
                    self._id("truncation"),
                    Role.TRUNCATION,
                    meta={"replacements": {e.id: e.text[: len(e.text) // 3] for e in cut}},
                )
        elif kind == "reset":
            self.add(self._id("reset"), Role.RESET)
        else:
            self.add(self._id("u"), Role.USER, text="q" * rng.randint(0, 400))


def _with_a_changed_entry(
    rng: random.Random, stored: list[TranscriptEntry]
) -> list[TranscriptEntry]:
    """The same ids, one entry's text different: not the prefix the cache processed."""
    index = rng.randrange(len(stored))
    changed = stored[index].model_copy(update={"text": stored[index].text + " edited"})
    return [*stored[:index], changed, *stored[index + 1 :]]


@pytest.mark.parametrize("seed", range(40))
def test_every_request_is_the_whole_build(seed: int) -> None:
    rng = random.Random(seed)
    session = Session(rng)
    cache = ContextCache()
    window = 32_000
    for _ in range(120):
        for _ in range(rng.randint(1, 4)):
            session.step()
        if rng.random() < 0.05:
            window = rng.choice(WINDOWS)  # a fallback model's window
        stored = list(session.entries)
        if stored and rng.random() < 0.03:
            stored = _with_a_changed_entry(rng, stored)
            session.entries = list(stored)
        whole = context_for_request(stored, window)
        cached = context_for_request(stored, window, cache, "s1")
        # Every field: the entries sent, the repair notes, the guard's cuts and measure, the view.
        assert cached == whole
        # Reads may be fresh objects with equal contents (the store's cache dropped them).
        if rng.random() < 0.05:
            copies = [e.model_copy() for e in stored]
            assert context_for_request(copies, window, cache, "s1") == whole
    # Most requests extended the previous one; markers, windows and edits forced whole builds.
    assert cache.incremental > cache.whole > 0


def test_an_append_processes_only_what_was_added() -> None:
    session = Session(random.Random(1))
    cache = ContextCache()
    for _ in range(30):
        session._turn()
    processed: list[int] = []
    for _ in range(10):
        session.add(session._id("u"), Role.USER, text="more")
        session._turn()
        stored = list(session.entries)
        assert context_for_request(stored, 32_000, cache, "s1") == context_for_request(
            stored, 32_000
        )
        processed.append(cache.processed)
    assert cache.whole == 1 and cache.incremental == 9
    assert processed[0] == len(session.entries) - sum(processed[1:])
    assert all(n < 10 for n in processed[1:]), processed


def test_markers_and_answered_partials_rebuild_whole() -> None:
    session = Session(random.Random(2))
    cache = ContextCache()
    session._turn()
    session.add("a1" + PARTIAL_SUFFIX, Role.ASSISTANT, text="half")
    context_for_request(list(session.entries), 32_000, cache, "s1")
    session.add("u-next", Role.USER, text="go on")
    context_for_request(list(session.entries), 32_000, cache, "s1")
    assert (cache.whole, cache.incremental) == (1, 1)
    # The answer removes the partial from the middle of what the cache built.
    session.add("a1", Role.ASSISTANT, text="whole answer")
    stored = list(session.entries)
    context = context_for_request(stored, 32_000, cache, "s1")
    assert context == context_for_request(stored, 32_000)
    assert "a1" + PARTIAL_SUFFIX not in [e.id for e in context.entries]
    assert (cache.whole, cache.incremental) == (2, 1)
    session.add("reset1", Role.RESET)
    context_for_request(list(session.entries), 32_000, cache, "s1")
    context_for_request(list(session.entries), 16_000, cache, "s1")  # another window
    assert (cache.whole, cache.incremental) == (4, 1)


def test_sessions_are_kept_apart_and_the_least_recent_is_dropped() -> None:
    cache = ContextCache(sessions=2)
    one = [TranscriptEntry(id="x", role=Role.USER, ts=0, text="a" * 40)]
    two = [TranscriptEntry(id="x", role=Role.USER, ts=0, text="b" * 80)]
    assert context_for_request(one, 32_000, cache, "s1").estimated_chars == 40
    assert context_for_request(two, 32_000, cache, "s2").estimated_chars == 80
    assert context_for_request(two, 32_000, cache, "s3").estimated_chars == 80
    assert "s1" not in cache
    # s1 was dropped: built whole again, the same context; then extended.
    assert context_for_request(one, 32_000, cache, "s1").estimated_chars == 40
    assert (cache.whole, cache.incremental) == (4, 0)
    assert context_for_request(one, 32_000, cache, "s1").estimated_chars == 40
    assert cache.incremental == 1 and cache.processed == 0


def test_the_entry_budget_drops_the_least_recent_sessions() -> None:
    cache = ContextCache(entries=5)
    three = [TranscriptEntry(id=f"u{i}", role=Role.USER, ts=0, text="q") for i in range(3)]
    context_for_request(three, 32_000, cache, "s1")
    context_for_request(three, 32_000, cache, "s2")
    assert "s1" not in cache and "s2" in cache


def test_a_different_prefix_is_built_whole() -> None:
    session = Session(random.Random(3))
    cache = ContextCache()
    for _ in range(5):
        session._turn()
    stored = list(session.entries)
    context_for_request(stored, 32_000, cache, "s1")
    # Same ids, one text changed (another session under the key, a rewritten file): not an
    # append to what the cache processed.
    edited = [stored[0].model_copy(update={"text": "another question"}), *stored[1:]]
    context = context_for_request(edited, 32_000, cache, "s1")
    assert context == context_for_request(edited, 32_000)
    assert context.entries[0].text == "another question"
    assert (cache.whole, cache.incremental) == (2, 0)
    # Shorter than what was processed: built whole too.
    context_for_request(edited[:-1], 32_000, cache, "s1")
    assert (cache.whole, cache.incremental) == (3, 0)
