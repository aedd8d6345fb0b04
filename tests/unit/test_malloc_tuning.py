"""glibc tuning for a long-lived worker (workers/malloc_tuning.py)."""

from __future__ import annotations

import pytest

from workers import malloc_tuning
from workers.malloc_tuning import MallocConfigError, limit_arenas, start_trimming, trim_now
from workers.memory_trace import rss_bytes


def test_trim_hands_free_heap_pages_back() -> None:
    if malloc_tuning._libc() is None:
        pytest.skip("not glibc")
    # Below the mmap threshold, so in the heap; the last one held keeps the heap's top in use,
    # so glibc's own trimming at the top cannot give the rest back.
    blocks = [bytearray(b"x" * (100_000 + i)) for i in range(400)]
    del blocks[:-1]
    before = rss_bytes()
    trim_now()
    released = before - rss_bytes()
    assert released > 10 * 2**20, f"{released / 2**20:.1f} MB"


def test_settings_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTLANE_MALLOC_ARENAS", "two")
    with pytest.raises(MallocConfigError, match="AGENTLANE_MALLOC_ARENAS='two'"):
        limit_arenas()
    monkeypatch.setenv("AGENTLANE_MALLOC_ARENAS", "0")
    assert limit_arenas() is None


async def test_trimming_off_when_set_to_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTLANE_MALLOC_TRIM_S", "0")
    assert start_trimming() is None
    monkeypatch.setenv("AGENTLANE_MALLOC_TRIM_S", "-1")
    with pytest.raises(MallocConfigError, match="0 or more"):
        start_trimming()
