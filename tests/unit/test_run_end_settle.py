"""The run's end and events still on their way: another worker's last batch lands a batch
interval after the step, and the end of the run reads the stream again until it has, instead of
waiting out the whole settle time (1.7 s before `agent_end` of every run whose last step ran on
another worker). What never lands is still published again once it has settled."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from activities.stream_republish import TAIL_WINDOW, Republisher, rebuild
from agentlane.transcript import TranscriptEntry
from tests.unit.test_stream_gaps_reads import FakeClient, FakeStream, event
from tests.unit.test_stream_republish import RUN, T1, everything_missing, transcript


class FakeStore:
    def __init__(self, entries: list[TranscriptEntry], start: int | None = None) -> None:
        self.entries = entries
        self.start = start

    async def read_run(self, session_key: str, run_id: str) -> list[TranscriptEntry]:
        return self.entries

    async def stream_start(self, session_key: str, run_id: str) -> int | None:
        return self.start


class FakePublishers:
    batch_interval_seconds = 0.2


def recent_transcript() -> list[TranscriptEntry]:
    """The test transcript as if its last message was written a moment ago."""
    entries = transcript()
    shift = time.time() - 0.05 - next(e.ts for e in entries if e.id == T1)
    return [e.model_copy(update={"ts": e.ts + shift}) for e in entries]


def split_by_last_message(
    entries: list[TranscriptEntry],
) -> tuple[list[Any], list[Any], set[str]]:
    """The run's events: those the stream holds already, those of its last message (still in
    another worker's batch), and the latter's ids."""
    missing = everything_missing(entries)
    events = rebuild("s", RUN, entries, [], missing)
    late_ids = {eid for eid, entry in missing.items() if entry == T1}
    assert late_ids
    return (
        [e for e in events if e.event_id not in late_ids],
        [e for e in events if e.event_id in late_ids],
        late_ids,
    )


async def test_the_end_waits_for_another_workers_batch_only_until_it_lands() -> None:
    entries = recent_transcript()
    present, late, _ = split_by_last_message(entries)
    stream = FakeStream(list(present))
    republisher = Republisher(FakeStore(entries), FakePublishers())  # type: ignore[arg-type]
    assert republisher.settle_seconds > 1.5

    async def land() -> None:
        await asyncio.sleep(0.3)
        stream.events.extend(late)

    landing = asyncio.create_task(land())
    started = time.monotonic()
    found = await republisher.lost(FakeClient(stream), "s", RUN, wait_to_settle=True)  # type: ignore[arg-type]
    took = time.monotonic() - started
    await landing
    # Well before the settle time (1.7 s) the code before waited out.
    assert 0.3 <= took < 1.4, took
    assert found.events == [] and found.missing == {}
    # Read again from where the first read ended, not from the run's start each time.
    first_end = len(present)
    later = stream.polled[stream.polled.index(0) + 1 :]
    assert later and all(offset >= first_end for offset in later), stream.polled


async def test_what_never_lands_is_published_again_once_settled() -> None:
    entries = recent_transcript()
    present, _, late_ids = split_by_last_message(entries)
    stream = FakeStream(list(present))
    republisher = Republisher(FakeStore(entries), FakePublishers(), settle_margin=0.3)  # type: ignore[arg-type]
    started = time.monotonic()
    found = await republisher.lost(FakeClient(stream), "s", RUN, wait_to_settle=True)  # type: ignore[arg-type]
    took = time.monotonic() - started
    # Until the youngest entry was settle_seconds (0.5 s) old, and not much longer.
    assert 0.4 <= took < 1.5, took
    assert {e.event_id for e in found.events} >= late_ids
    assert found.missing == {}


async def test_without_waiting_young_entries_are_left_for_later() -> None:
    entries = recent_transcript()
    present, _, late_ids = split_by_last_message(entries)
    stream = FakeStream(list(present))
    republisher = Republisher(FakeStore(entries), FakePublishers())  # type: ignore[arg-type]
    started = time.monotonic()
    found = await republisher.lost(FakeClient(stream), "s", RUN)  # type: ignore[arg-type]
    assert time.monotonic() - started < 0.2
    assert found.events == [] and set(found.missing) == late_ids


async def test_the_check_reads_the_run_from_its_recorded_start() -> None:
    # A long session: 3 000 events of earlier runs before this run's. With the run's start
    # recorded, only the run is read; without, the tail window (2 000 events) is.
    entries = recent_transcript()
    present, late, _ = split_by_last_message(entries)
    older = [event(i, f"old{i // 10}") for i in range(3_000)]
    total = len(older) + len(present) + len(late)
    for start, first_read in ((3_000, 3_000), (None, total - TAIL_WINDOW)):
        stream = FakeStream([*older, *present, *late])
        republisher = Republisher(FakeStore(entries, start), FakePublishers())  # type: ignore[arg-type]
        found = await republisher.lost(FakeClient(stream), "s", RUN)  # type: ignore[arg-type]
        assert found.events == [] and found.missing == {}
        assert stream.polled[0] == first_read, stream.polled
