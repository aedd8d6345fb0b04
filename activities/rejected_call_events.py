"""The stream's tool card for a call the model call itself answered (a tool not offered, a
policy refusal, arguments that are not a JSON object): it never reaches a tool activity, yet a
client watching the run should see the model called it and why it failed, as pi's loop shows
every call it answers (`tool_execution_start`, then an error `tool_execution_end`)."""

from __future__ import annotations

from collections.abc import Sequence

from agentlane.events import AgentEvent, EventKind
from agentlane.transcript import TranscriptEntry

# As the tool activity's end event (activities/tool_calls.py).
END_TEXT_CHARS = 2_000


def rejected_call_events(
    assistant: TranscriptEntry,
    answered: Sequence[TranscriptEntry],
    *,
    session_key: str,
    turn_index: int,
    attempt: int,
) -> list[AgentEvent]:
    from activities.tool_calls import preview_args, stream_text

    calls = {c.id: c for c in assistant.tool_calls}
    events: list[AgentEvent] = []
    for result in answered:
        call = calls.get(result.tool_call_id or "")
        if call is None:
            continue

        common = {
            "session_key": session_key,
            "run_id": assistant.run_id,
            "attempt": attempt,
            "turn_index": turn_index,
            "message_id": assistant.id,
            "tool_call_id": call.id,
            "tool_name": call.name,
        }
        raw = {"raw_arguments": call.raw_arguments} if call.raw_arguments is not None else {}
        events.append(
            AgentEvent(
                kind=EventKind.TOOL_EXECUTION_START,
                event_id=f"{call.id}/{EventKind.TOOL_EXECUTION_START.value}",
                **common,
                data={"input": preview_args({**call.arguments, **raw})},
            )
        )
        events.append(
            AgentEvent(
                kind=EventKind.TOOL_EXECUTION_END,
                event_id=f"{call.id}/{EventKind.TOOL_EXECUTION_END.value}",
                **common,
                success=False,
                summary=result.text.removeprefix("Error: ")[:120],
                text=stream_text(result.text, END_TEXT_CHARS),
                duration_ms=0,
            )
        )
    return events
