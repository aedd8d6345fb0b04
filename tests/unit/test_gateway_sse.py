"""SSE framing of session events: ids are offsets, gaps are said, the end is said."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from agentlane.events import AgentEvent, EventKind
from clients.api import StreamItem
from clients.gateway.sse import session_events


def item(offset: int, kind: EventKind = EventKind.TEXT_DELTA) -> StreamItem:
    return StreamItem(
        offset,
        AgentEvent(kind=kind, event_id=f"e{offset}", session_key="k", run_id="r", text="x"),
    )


async def source(offsets: list[int]) -> AsyncIterator[StreamItem]:
    for off in offsets:
        yield item(off)


async def frames(start: int, offsets: list[int], translate: object = None) -> list[object]:
    return [ev async for ev in session_events("k", source(offsets), start, translate)]  # type: ignore[arg-type]


async def test_ids_are_offsets_and_the_end_is_said() -> None:
    out = await frames(4, [4, 5, 6])
    assert [(e.id, e.event) for e in out] == [  # type: ignore[attr-defined]
        ("4", "text_delta"),
        ("5", "text_delta"),
        ("6", "text_delta"),
        (None, "closed"),
    ]
    assert json.loads(out[0].data)["event_id"] == "e4"  # type: ignore[attr-defined]
    assert json.loads(out[-1].data) == {"next_offset": 7}  # type: ignore[attr-defined]


async def test_a_truncated_start_is_a_gap_event_not_a_silent_skip() -> None:
    out = await frames(2, [10, 11])
    gap = out[0]
    assert gap.event == "gap" and gap.id is None  # type: ignore[attr-defined]
    info = json.loads(gap.data)  # type: ignore[attr-defined]
    assert info["requested"] == 2 and info["first_available"] == 10 and info["missed"] == 8
    assert "/v1/sessions/k/transcript" in info["advice"]
    assert out[1].id == "10"  # type: ignore[attr-defined]


async def test_a_stream_that_went_back_is_a_gap_too() -> None:
    out = await frames(50, [0, 1])
    assert out[0].event == "gap"  # type: ignore[attr-defined]
    assert json.loads(out[0].data)["missed"] is None  # type: ignore[attr-defined]


async def test_another_vocabulary_ids_only_the_last_message_of_an_item() -> None:
    # A client cut off after "A" resumes from the item before (its last id) and gets A and B
    # again; with the id on both it would resume after the item and never get B.
    def translate(offset: int, event: AgentEvent) -> list[dict[str, object]]:
        return [{"type": "A", "n": offset}, {"type": "B"}] if offset % 2 else []

    out = await frames(0, [0, 1], translate)
    assert [(e.id, e.event, json.loads(e.data)) for e in out[:2]] == [  # type: ignore[attr-defined]
        (None, None, {"type": "A", "n": 1}),
        ("1", None, {"type": "B"}),
    ]
