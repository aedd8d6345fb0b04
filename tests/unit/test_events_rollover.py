"""What an event stream carries into its next segment: the newest items, within a byte budget."""

from __future__ import annotations

from temporalio.contrib.workflow_streams import WorkflowStreamState
from temporalio.contrib.workflow_streams._types import _WorkflowStreamWireItem

from workflows.session_events import carried_from


def state(base: int, sizes: list[int]) -> WorkflowStreamState:
    return WorkflowStreamState(
        log=[_WorkflowStreamWireItem(topic="events", data="x" * n) for n in sizes],
        base_offset=base,
    )


def test_the_newest_items_within_the_budget_are_kept() -> None:
    # Each item costs its data plus 64 bytes of framing.
    s = state(100, [436] * 10)  # 500 bytes each
    assert carried_from(s, keep_items=1000, budget=1500) == 107  # the last 3
    assert carried_from(s, keep_items=2, budget=10_000) == 108  # the count bound
    assert carried_from(s, keep_items=1000, budget=100_000) == 100  # everything


def test_an_item_over_the_budget_alone_is_not_carried() -> None:
    assert carried_from(state(5, [10, 5000]), keep_items=10, budget=1000) == 7


def test_an_empty_stream_carries_nothing_and_keeps_its_offset() -> None:
    assert carried_from(state(42, []), keep_items=10, budget=1000) == 42
