"""The run's activity around an approval (issue 21): publish `approval_requested` /
`approval_decided` at once (the run is about to wait, or was just decided), and answer a call
that will not run (denied, expired) with a tool result in the transcript.

Idempotent: the result entry's id derives from the call id and the store keeps the first answer;
the events carry stable ids.
"""

from __future__ import annotations

from typing import Any

from temporalio import activity

from activities.stream_publishers import SessionPublishers
from activities.tool_calls import preview_args
from activities.transcript_store import TranscriptStore, tool_result_entry
from agentlane.approvals import APPROVAL_STEP, ApprovalStepInput
from agentlane.events import AgentEvent, EventKind


class ApprovalSteps:
    def __init__(self, store: TranscriptStore, publishers: SessionPublishers) -> None:
        self.store = store
        self.publishers = publishers

    @activity.defn(name=APPROVAL_STEP)
    async def approval_step(self, inp: ApprovalStepInput) -> None:
        answered = False
        if inp.answer:
            entry = tool_result_entry(
                inp.tool_call_id,
                inp.tool_name,
                inp.answer,
                inp.run_id,
                is_error=True,
                meta={"summary": inp.summary, "duration_ms": 0},
            )
            await self.store.append(inp.session_key, [entry])
            answered = True
        if inp.notify_session_key:
            # A sub-agent's approval: shown where its top-level session is watched.
            top = self.publishers.lease(
                activity.client(), inp.notify_session_key, wait_for_flush=True
            )
            async with top as publisher:
                for announcement in inp.announce:
                    publisher.publish(announcement.to_event(inp.notify_session_key, inp.run_id))
        lease = self.publishers.lease(activity.client(), inp.session_key, wait_for_flush=True)
        async with lease as publisher:
            for announcement in inp.announce:
                publisher.publish(announcement.to_event(inp.session_key, inp.run_id))
            if answered:
                # The call never started; its card still opens before it closes, with its
                # arguments, as every other call's does (the run's end would otherwise publish
                # the start it finds missing, after the end and the run's answer).
                asked = await self.store.get(inp.session_key, inp.assistant_entry_id)
                call = next(
                    (c for c in (asked.tool_calls if asked else []) if c.id == inp.tool_call_id),
                    None,
                )
                publisher.publish(
                    _call_event(
                        inp,
                        EventKind.TOOL_EXECUTION_START,
                        data={"input": preview_args(call.arguments)} if call is not None else {},
                    )
                )
                publisher.publish(
                    _call_event(
                        inp,
                        EventKind.TOOL_EXECUTION_END,
                        success=False,
                        summary=inp.summary,
                        text=inp.answer,
                    )
                )


def _call_event(inp: ApprovalStepInput, kind: EventKind, **fields: Any) -> AgentEvent:
    return AgentEvent(
        kind=kind,
        event_id=f"{inp.tool_call_id}/{kind.value}",
        session_key=inp.session_key,
        run_id=inp.run_id,
        turn_index=inp.turn_index,
        message_id=inp.assistant_entry_id,
        tool_call_id=inp.tool_call_id,
        tool_name=inp.tool_name,
        **fields,
    )
