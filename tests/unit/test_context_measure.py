"""The context's running size (activities/context/context_measure): over random sessions of
appends, compactions, truncations, resets, partial entries answered later and window changes,
the incremental total is the number the whole measure gives, and so is every decision on it."""

from __future__ import annotations

import random
from typing import Any

import pytest

from activities.context.context_measure import ContextMeasures, measure_basis
from activities.context.request_context import PARTIAL_SUFFIX, context_for_request
from agentlane.transcript import Role, ToolCall, TranscriptEntry


class Session:
    """A stored transcript grown the way runs grow it (append-only, markers included)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.entries: list[TranscriptEntry] = []
        self.pending: list[str] = []  # partial entries not answered yet
        self.n = 0

    def _id(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def add(self, id: str, role: Role, **fields: Any) -> None:
        self.entries.append(TranscriptEntry(id=id, role=role, ts=0, **fields))

    def step(self) -> None:
        """One random thing a run or an operator does to the transcript."""
        rng = self.rng
        chat = [e for e in self.entries if e.role in (Role.USER, Role.ASSISTANT, Role.TOOL)]
        kind = rng.choices(
            ["turn", "user", "partial", "answer", "compaction", "truncation", "reset"],
            weights=[10, 3, 2, 2, 1, 1, 0.3],
        )[0]
        if kind == "user" or not chat or (kind == "answer" and not self.pending):
            self.add(self._id("u"), Role.USER, text="q" * rng.randint(0, 400))
        elif kind == "turn":
            call = self._id("c")
            self.add(
                self._id("a"),
                Role.ASSISTANT,
                text="t" * rng.randint(0, 200),
                tool_calls=[
                    ToolCall(id=call, name="write", arguments={"path": "é" * rng.randint(1, 9)})
                ],
            )
            # Sometimes a result far over the guard's per-result cap (cut on a copy).
            size = rng.choice([10, 300, 5_000, 90_000])
            self.add(
                f"{call}:result",
                Role.TOOL,
                tool_call_id=call,
                tool_name="write",
                text="r" * size,
                meta={"images": [1]} if rng.random() < 0.1 else {},
            )
        elif kind == "partial":
            # A failed attempt's partial text, answered (or not) by a later step.
            answer = self._id("a")
            self.add(answer + PARTIAL_SUFFIX, Role.ASSISTANT, text="p" * 50)
            self.pending.append(answer)
        elif kind == "answer" and self.pending:
            # Answered later: the partial, already measured, drops out of the middle.
            answer = self.pending.pop(rng.randrange(len(self.pending)))
            self.add(answer, Role.ASSISTANT, text="done")
        elif kind == "compaction":
            kept = rng.choice(chat)
            self.add(
                self._id("compaction"),
                Role.COMPACTION,
                text="summary " * rng.randint(1, 30),
                meta={"first_kept_id": kept.id},
            )
        elif kind == "truncation":
            results = [e for e in chat if e.role == Role.TOOL]
            if results:
                cut = rng.sample(results, k=min(len(results), rng.randint(1, 3)))
                self.add(
                    self._id("truncation"),
                    Role.TRUNCATION,
                    meta={"replacements": {e.id: e.text[: len(e.text) // 3] for e in cut}},
                )
        elif kind == "reset":
            self.add(self._id("reset"), Role.RESET)


@pytest.mark.parametrize("seed", range(15))
def test_the_running_total_is_the_whole_measure(seed: int) -> None:
    rng = random.Random(seed)
    session = Session(rng)
    measures = ContextMeasures()
    window = 32_000
    for _ in range(100):
        for _ in range(rng.randint(1, 3)):
            session.step()
        if rng.random() < 0.05:
            window = rng.choice([16_000, 32_000, 200_000])  # a fallback model's window
        stored = list(session.entries)
        whole = context_for_request(stored, window)
        running = context_for_request(stored, window, measures, "s1")
        assert running.estimated_chars == whole.estimated_chars
        assert running.overflow == whole.overflow
        assert running.entries == whole.entries
    # Most requests only measured what was new; the markers forced whole measures.
    assert measures.incremental > measures.whole > 0


def test_only_new_entries_are_measured() -> None:
    session = Session(random.Random(1))
    measures = ContextMeasures()
    seen: list[int] = []
    lengths: list[int] = []
    for _ in range(5):
        session.step()
    for _ in range(10):
        session.add(session._id("u"), Role.USER, text="more")
        stored = list(session.entries)
        context = context_for_request(stored, 32_000)
        basis_measure = measures.for_session(
            "s1", measure_basis(stored, 32_000), measured=seen.append
        )
        assert basis_measure(context.entries) == context.estimated_chars
        lengths.append(len(context.entries))
    # The first request measures everything, each later one only the message added.
    assert seen == [lengths[0]] + [1] * 9


def test_sessions_are_kept_apart_and_the_oldest_is_dropped() -> None:
    measures = ContextMeasures(capacity=2)
    one = [TranscriptEntry(id="x", role=Role.USER, ts=0, text="a" * 40)]
    two = [TranscriptEntry(id="x", role=Role.USER, ts=0, text="b" * 80)]
    assert measures.guard_chars("s1", one, b"")[0] == 40
    assert measures.guard_chars("s2", two, b"")[0] == 80
    assert measures.guard_chars("s3", two, b"")[0] == 80
    # s1 was dropped: measured whole again.
    assert measures.guard_chars("s1", one, b"") == (40, 1)
    assert measures.guard_chars("s1", one, b"") == (40, 0)
