"""The context floor (agentlane/context_floor.py) and the windowed reads over it (issue 26): a
request built from what a worker keeps of a session (its live context) is exactly the request
built from the whole transcript, warm or read cold from the store, and lookups below the floor
still find what they found."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from activities.context.context_view import context_entries
from activities.context.request_context import PARTIAL_SUFFIX, context_for_request
from activities.transcript_store import TranscriptStore
from agentlane.context_floor import context_floor, marker_floor
from agentlane.settings import Settings
from agentlane.transcript import Role, ToolCall, TranscriptEntry
from store.open import open_store


def e(eid: str, role: Role = Role.USER, **meta: object) -> TranscriptEntry:
    return TranscriptEntry(id=eid, role=role, ts=1.0, text=eid, meta=dict(meta))


def test_no_marker_no_floor() -> None:
    assert context_floor([]) == 0
    assert context_floor([e("u1"), e("a1", Role.ASSISTANT), e("t", Role.TRUNCATION)]) == 0


def test_a_reset_keeps_itself() -> None:
    entries = [e("u1"), e("r1", Role.RESET), e("u2"), e("r2", Role.RESET), e("u3")]
    assert context_floor(entries) == 3


def test_a_compaction_keeps_its_first_kept_and_turn_start() -> None:
    head = [e("u1"), e("a1", Role.ASSISTANT), e("u2"), e("a2", Role.ASSISTANT), e("a3")]
    kept = e("c", Role.COMPACTION, first_kept_id="a3")
    assert context_floor([*head, kept]) == 4
    turn = e("c", Role.COMPACTION, first_kept_id="a3", turn_start_id="u2")
    assert context_floor([*head, turn]) == 2
    # A turn start after the first kept entry adds nothing (context_view ignores it).
    late = e("c", Role.COMPACTION, first_kept_id="a1", turn_start_id="u2")
    assert context_floor([*head, late]) == 1
    # Nothing kept, or a name not found: the marker itself.
    assert context_floor([*head, e("c", Role.COMPACTION)]) == 5
    assert context_floor([*head, e("c", Role.COMPACTION, first_kept_id="gone")]) == 5


def test_only_the_latest_compaction_after_the_latest_reset_counts() -> None:
    entries = [
        e("u1"),
        e("c1", Role.COMPACTION, first_kept_id="u1"),
        e("u2"),
        e("r", Role.RESET),
        e("u3"),
        # Names an entry before the reset: not found, as in context_entries.
        e("c2", Role.COMPACTION, first_kept_id="u2"),
        e("u4"),
    ]
    assert context_floor(entries) == 5
    assert context_floor(entries[:5]) == 3
    assert context_floor(entries[:3]) == 0


def test_marker_floor_by_seq_and_what_sets_none() -> None:
    marker = e("c", Role.COMPACTION, first_kept_id="k", turn_start_id="t")
    assert marker_floor(marker, 50, 0, {"k": 40, "t": 30}) == 30
    assert marker_floor(marker, 50, 35, {"k": 40, "t": 30}) == 40
    assert marker_floor(e("r", Role.RESET), 7, 0, {}) == 7
    with pytest.raises(ValueError, match="truncation entry sets no context floor"):
        marker_floor(e("t", Role.TRUNCATION), 3, 0, {})


# -- a request over the live window is the request over the whole transcript ----------------


class Script:
    """A session's transcript as runs write it: user turns, assistant steps (some with a
    failed attempt's partial first), tool calls and results, truncations of results in the
    context, compactions in the middle of runs (first kept and turn start chosen from the
    context, as the compaction activity does) and resets."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.whole: list[TranscriptEntry] = []
        self.n = 0
        self.run = ""

    def _id(self, kind: str) -> str:
        self.n += 1
        return f"{kind}{self.n}"

    def _entry(self, role: Role, **kw: object) -> TranscriptEntry:
        return TranscriptEntry.model_validate(
            {"role": role, "ts": float(self.n), "run_id": self.run or None, **kw}
        )

    def next_batch(self) -> list[TranscriptEntry]:
        rng = self.rng
        roll = rng.random()
        if not self.run or roll < 0.12:
            self.run = self._id("run")
            if rng.random() < 0.08:
                return [self._entry(Role.RESET, id=self._id("reset"))]
            return [self._entry(Role.USER, id=self._id("u"), text="ask " * rng.randint(1, 9))]
        if roll < 0.2:
            return [self._compaction()]
        if roll < 0.27:
            return [self._truncation()]
        aid = self._id("a")
        calls = [
            ToolCall(id=self._id("call"), name="read", arguments={"path": "x"})
            for _ in range(rng.choice([0, 0, 1, 2]))
        ]
        batch = []
        if rng.random() < 0.15:
            batch.append(self._entry(Role.ASSISTANT, id=aid + PARTIAL_SUFFIX, text="par"))
        if rng.random() < 0.05:
            return batch or [self._entry(Role.ASSISTANT, id=aid + PARTIAL_SUFFIX, text="p")]
        batch.append(self._entry(Role.ASSISTANT, id=aid, text="say", tool_calls=calls))
        for call in calls:
            batch.append(
                self._entry(
                    Role.TOOL,
                    id=f"{call.id}:result",
                    tool_call_id=call.id,
                    tool_name="read",
                    text="out " * rng.randint(1, 30),
                )
            )
        return batch

    def _body(self) -> list[TranscriptEntry]:
        return [
            x for x in context_entries(self.whole).entries if not x.meta.get("compaction_summary")
        ]

    def _compaction(self) -> TranscriptEntry:
        body = self._body()
        meta: dict[str, object] = {}
        if body and self.rng.random() < 0.9:
            cut = self.rng.randrange(len(body))
            meta["first_kept_id"] = body[cut].id
            users = [x for x in body[:cut] if x.role == Role.USER]
            if users and self.rng.random() < 0.6:
                meta["turn_start_id"] = self.rng.choice(users).id
        return self._entry(Role.COMPACTION, id=self._id("c"), text="summary", meta=meta)

    def _truncation(self) -> TranscriptEntry:
        results = [x.id for x in self._body() if x.role == Role.TOOL]
        named = self.rng.sample(results, min(len(results), 2))
        return self._entry(
            Role.TRUNCATION, id=self._id("t"), meta={"replacements": {i: "cut" for i in named}}
        )


def same_request(window: list[TranscriptEntry], whole: list[TranscriptEntry]) -> None:
    mine, theirs = context_entries(window), context_entries(whole)
    assert mine.entries == theirs.entries
    assert mine.compaction == theirs.compaction
    assert mine.truncated_ids == theirs.truncated_ids
    assert mine.fresh_from == theirs.fresh_from
    request, expected = context_for_request(window, 200_000), context_for_request(whole, 200_000)
    assert request.entries == expected.entries
    assert request.repaired == expected.repaired
    assert request.estimated_chars == expected.estimated_chars


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_the_window_builds_the_whole_transcripts_request(tmp_path: Path, seed: int) -> None:
    backend = await open_store(Settings(data_dir=tmp_path))
    warm = TranscriptStore(backend)
    key = "s"
    script = Script(seed)
    shrank = 0
    for step in range(160):
        batch = script.next_batch()
        script.whole.extend(batch)
        await warm.append(key, batch)
        whole = await warm.read_all(key)
        assert [x.id for x in whole] == [x.id for x in script.whole]
        window = await warm.read_context(key)
        assert window == whole[len(whole) - len(window) :]  # a suffix
        same_request(window, whole)
        cold = TranscriptStore(backend)
        cold_window = await cold.read_context(key)
        same_request(cold_window, whole)
        shrank += len(cold_window) < len(whole)
        if step % 10 == 0:
            for reader in (warm, cold):
                for run in {x.run_id for x in whole if x.run_id}:
                    assert await reader.read_run(key, run) == [x for x in whole if x.run_id == run]
                for x in whole:
                    assert await reader.get(key, x.id) == x
                    if x.role == Role.TOOL and x.tool_call_id:
                        assert await reader.tool_result(key, x.tool_call_id) == x
                assert await reader.get(key, "never") is None
                assert await reader.last_id(key) == whole[-1].id
    # The scripts compact and reset: most of the time the window is smaller than the whole.
    assert shrank > 80
