"""The worker's per-session caches keep a bounded number of sessions (issue 26: memory
plateaus), and what falls out is read again, whole."""

from __future__ import annotations

from pathlib import Path

import pytest

import activities.transcript_store as transcript_store
from activities.bounded_cache import BoundedCache
from activities.transcript_store import TranscriptStore
from tests.unit.transcript_factory import user


def test_the_least_recently_used_entry_goes_first() -> None:
    cache: BoundedCache[str, int] = BoundedCache(2)
    cache["a"] = 1
    cache["b"] = 2
    assert cache.get("a") == 1  # "a" is now the most recent
    cache["c"] = 3
    assert "b" not in cache and cache.get("a") == 1 and cache["c"] == 3
    assert len(cache) == 2
    assert cache.pop("a") == 1 and cache.pop("a", 0) == 0 and cache.get("zz") is None
    with pytest.raises(KeyError):
        cache["b"]
    with pytest.raises(ValueError, match="at least one entry"):
        BoundedCache[str, int](0)


async def test_the_transcript_store_keeps_a_bounded_number_of_sessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentlane.settings import Settings
    from store.open import open_store

    monkeypatch.setattr(transcript_store, "PARSED_SESSIONS_KEPT", 5)
    store = TranscriptStore(await open_store(Settings(data_dir=tmp_path)))
    for n in range(40):
        await store.append(f"s{n}", [user(f"s{n}.u1", f"hello {n}"), user(f"s{n}.u2", "again")])
        assert [e.text for e in await store.read_context(f"s{n}")] == [f"hello {n}", "again"]
    assert len(store._cache) == 5
    # A session that fell out is read again from the store, whole, and appends still chain.
    assert [e.id for e in await store.read_context("s0")] == ["s0.u1", "s0.u2"]
    await store.append("s0", [user("s0.u3", "more")])
    assert [e.id for e in await store.read_context("s0")] == ["s0.u1", "s0.u2", "s0.u3"]
    assert (await store.read_context("s0"))[-1].parent_id == "s0.u2"


def test_a_weight_budget_drops_the_least_recent_but_never_the_latest() -> None:
    cache: BoundedCache[str, list[int]] = BoundedCache(100)
    cache["a"], cache["b"], cache["c"] = [1] * 5, [1] * 5, [1] * 5
    cache.get("a")  # order now b, c, a
    assert cache.trim_weight(10, len) == 1 and "b" not in cache and len(cache) == 2
    cache["c"].extend([1] * 20)  # grew in place past the whole budget
    cache.get("c")
    assert cache.trim_weight(10, len) == 1 and "c" in cache and len(cache) == 1


def test_a_trim_weighs_again_only_the_entries_used_since_the_last() -> None:
    weighed: list[str] = []

    def weight(value: list[str]) -> int:
        weighed.append(value[0])
        return len(value)

    cache: BoundedCache[str, list[str]] = BoundedCache(100)
    for key in "abc":
        cache[key] = [key] * 5
    assert cache.trim_weight(100, weight) == 0 and sorted(weighed) == ["a", "b", "c"]
    weighed.clear()
    cache["b"].extend(["b"] * 10)
    assert cache.trim_weight(100, weight) == 0 and weighed == ["b"]
    weighed.clear()
    # 25 in all: the least recent go until 12 fit, weighing nothing again.
    assert cache.trim_weight(12, weight) == 2 and list(cache._items) == ["b"] and weighed == []
    assert cache._total == 15 and cache.pop("b") is not None and cache._total == 0


async def test_the_transcript_store_keeps_a_bounded_number_of_bytes(tmp_path: Path) -> None:
    """Few sessions whose transcripts grow run after run: the bytes bound them, the count
    does not."""
    from agentlane.settings import Settings
    from store.open import open_store

    budget = 100 * 1024  # room for one of the three 30-entry transcripts, not two
    store = TranscriptStore(await open_store(Settings(data_dir=tmp_path)), cache_bytes=budget)
    for run in range(30):
        for n in range(3):
            await store.append(f"s{n}", [user(f"s{n}.r{run}", "x" * 200)])
            assert len(await store.read_context(f"s{n}")) == run + 1
    held = sorted(p.size for p in store._cache._items.values())
    # Past the budget by at most the session in use (kept on probation for its next reads).
    assert sum(held[:-1]) <= budget and len(store._cache) < 3
    assert transcript_store.approx_entry_bytes(user("u", "x" * 200)) > 1500
    # What fell out is read again whole.
    assert [e.id for e in await store.read_context("s0")] == [f"s0.r{run}" for run in range(30)]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def round_robin_misses(cache: BoundedCache[str, list[int]], clock: Clock, *, active: bool) -> int:
    """Five sessions of weight 5 used in turn, a second apart, each twice (a step reads its
    session more than once), over a budget of 15 (room for three): how many uses miss."""
    misses = 0
    for turn in range(200):
        key = f"s{turn // 2 % 5}"
        clock.now += 0.5
        cold = cache.get(key) is None
        if cold:
            misses += 1
            cache[key] = [1] * 5
        if active:
            cache.trim_active(15, len, idle_after=60, current=key, newcomer=cold)
        else:
            cache.trim_weight(15, len)
    return misses


def test_round_robin_over_the_budget_keeps_the_working_set_instead_of_thrashing() -> None:
    clock = Clock()
    # Least recently used: every session's first use of its turn misses.
    assert round_robin_misses(BoundedCache(100, clock), clock, active=False) == 100
    # Three sessions stay; only the other two are read again, once a turn each.
    assert round_robin_misses(BoundedCache(100, clock), clock, active=True) == 3 + 2 * 20


def test_idle_entries_go_first_then_those_on_probation_then_the_least_recent() -> None:
    clock = Clock()
    cache: BoundedCache[str, list[int]] = BoundedCache(100, clock)
    cache["idle"] = [1] * 5
    clock.now = 100
    cache["b"], cache["c"] = [1] * 5, [1] * 5
    cache["new"] = [1] * 5
    assert cache.trim_active(15, len, idle_after=60, current="new", newcomer=True) == ["idle"]
    clock.now = 110
    # Every entry active: the newcomer is kept on probation, past the budget, for its next
    # uses; the next newcomer takes its place.
    cache["late"] = [1] * 5
    assert cache.trim_active(15, len, idle_after=60, current="late", newcomer=True) == []
    assert cache.get("late") is not None
    assert cache.trim_active(15, len, idle_after=60, current="late", newcomer=False) == []
    cache["later"] = [1] * 5
    assert cache.trim_active(15, len, idle_after=60, current="later", newcomer=True) == ["late"]
    # Active entries grown past the budget: probation first, then the least recently used;
    # the one in use stays.
    cache["c"].extend([1] * 20)
    cache.get("c")
    gone = cache.trim_active(15, len, idle_after=60, current="c", newcomer=False)
    assert gone == ["later", "b", "new"] and list(cache._items) == ["c"]


async def test_the_transcript_store_rereads_only_the_sessions_it_cannot_keep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sessions used in turn past the byte budget: the ones kept stay kept (each use of them
    reads only what is new); only the others are read cold again."""
    from agentlane.settings import Settings
    from store.open import open_store

    backend = await open_store(Settings(data_dir=tmp_path))
    cold_reads: list[str] = []
    floor = backend.context_floor

    async def counted(key: str) -> int:
        cold_reads.append(key)
        return await floor(key)

    monkeypatch.setattr(backend, "context_floor", counted)
    size = transcript_store.approx_entry_bytes(user("s0.r0", "x" * 200))
    store = TranscriptStore(backend, cache_bytes=int(size * 3 * 10.5))  # 3 of 4 at 10 runs
    for run in range(10):
        for n in range(4):
            await store.append(f"s{n}", [user(f"s{n}.r{run}", "x" * 200)])
            assert len(await store.read_context(f"s{n}")) == run + 1
    # Once they outgrew the budget one session left the working set and is read cold on each
    # use (once a use, not once a read: it is kept on probation meanwhile); the three others
    # were read cold once, ever.
    counts = sorted(cold_reads.count(f"s{n}") for n in range(4))
    assert counts[:3] == [1, 1, 1] and 1 < counts[3] <= 10
