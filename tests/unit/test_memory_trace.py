"""The worker's opt-in memory trace (workers/memory_trace.py) names the line that grew."""

from __future__ import annotations

import io
import tracemalloc

import pytest

from workers.memory_trace import MemoryTrace, MemoryTraceConfigError, start_from_env

kept: list[bytes] = []


def grow() -> None:
    kept.extend(bytes(1000) + bytes([i % 256]) for i in range(2000))  # the growing line


def test_the_growing_line_is_named_with_rss_and_malloc_figures() -> None:
    out = io.StringIO()
    tracemalloc.start(1)
    try:
        trace = MemoryTrace(out, frames=1)
        trace.dump()
        grow()
        trace.dump()
    finally:
        tracemalloc.stop()
        kept.clear()
    text = out.getvalue()
    assert text.count("=== ") == 2
    assert "malloc: " in text and "traced " in text
    since_first = text.split("-- top growth since the first dump")[1]
    top = since_first.splitlines()[1]
    assert "test_memory_trace.py:" in top and "KiB" in top, text
    # About 2 MB: the 2000 kept bytes objects.
    assert float(top.split()[0]) > 1500, top


def test_without_frames_only_counts_are_written() -> None:
    out = io.StringIO()
    trace = MemoryTrace(out, frames=0)
    trace.dump()
    trace.dump()
    text = out.getvalue()
    assert "traced" not in text and "top growth" not in text
    assert "-- object counts grown since the first dump" in text


async def test_bad_settings_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTLANE_TRACEMALLOC", "/tmp/x")
    monkeypatch.setenv("AGENTLANE_TRACEMALLOC_MINUTES", "soon")
    with pytest.raises(MemoryTraceConfigError, match="AGENTLANE_TRACEMALLOC_MINUTES"):
        start_from_env()
    monkeypatch.delenv("AGENTLANE_TRACEMALLOC")
    assert start_from_env() is None
