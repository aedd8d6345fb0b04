"""The process's record of a run's delivered events stays bounded and vouches only for what it
holds whole."""

from __future__ import annotations

from activities.stream_delivered import DeliveredEvents
from agentlane.events import AgentEvent, EventKind


def _event(run: str, i: int, kind: EventKind = EventKind.TOOL_EXECUTION_END) -> AgentEvent:
    return AgentEvent(kind=kind, event_id=f"call{i}/{kind.value}", session_key="s", run_id=run)


def test_a_run_past_its_bound_is_never_vouched_for() -> None:
    record = DeliveredEvents(runs=4, per_run=3)
    record.delivered([_event("r", i) for i in range(3)])
    assert record.all_delivered("r", {"call0/tool_execution_end", "call2/tool_execution_end"})
    record.delivered([_event("r", 3)])
    assert not record.all_delivered("r", {"call0/tool_execution_end"})
    record.delivered([_event("r", 4)])  # stays unvouched, holds nothing more
    assert not record.all_delivered("r", {"call4/tool_execution_end"})


def test_old_runs_fall_out_and_a_retried_message_start_stands_for_the_first() -> None:
    record = DeliveredEvents(runs=2, per_run=10)
    for run in ("a", "b", "c"):
        record.delivered([_event(run, 0)])
    assert not record.all_delivered("a", {"call0/tool_execution_end"})
    assert record.all_delivered("c", {"call0/tool_execution_end"})
    retried = AgentEvent(
        kind=EventKind.MESSAGE_START,
        event_id="e1/message_start/act.a2",
        session_key="s",
        run_id="c",
    )
    record.delivered([retried])
    assert record.all_delivered("c", {"e1/message_start"})
    # Deltas and turn ends are not what the check asks for: not recorded.
    record.delivered([_event("c", 9, EventKind.TEXT_DELTA)])
    assert not record.all_delivered("c", {"call9/text_delta"})
