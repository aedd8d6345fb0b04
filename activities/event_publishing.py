"""What a retried model attempt may show, and the shapes of streamed text.

Publishing itself is `activities/stream_publishers.py`. A retried attempt avoids showing the user
the same text twice with `ResumeGuard`, fed by `published_message_text` (what the stream holds
of the message, i.e. what subscribers saw). That read-back is complete because a failed or
cancelled attempt flushes before it reports: none of its text can reach the stream after the
retry has looked.
"""

from __future__ import annotations

import base64

from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.contrib.workflow_streams import PollInput, PollResult
from temporalio.converter import PayloadConverter

from agentlane.events import EVENTS_TOPIC, AgentEvent, EventKind
from agentlane.ids import events_workflow_id

# Events a run announces once (they carry stable ids): a retry must not repeat them.
LIFECYCLE = frozenset(
    {
        EventKind.AGENT_START,
        EventKind.TURN_START,
        EventKind.TURN_END,
        EventKind.TOOL_LOOP,
        EventKind.WARNING,
        EventKind.COMPACTION_START,
        EventKind.COMPACTION_END,
    }
)

# The stream's poll and offset queries (the protocol the SDK's subscriber uses for closed runs).
POLL_QUERY = "__temporal_workflow_stream_poll"
OFFSET_QUERY = "__temporal_workflow_stream_offset"


def decode_events(result: PollResult, converter: PayloadConverter) -> list[AgentEvent]:
    """The events of one poll answer (items carry base64 payloads)."""
    events = []
    for item in result.items:
        payload = Payload()
        payload.ParseFromString(base64.b64decode(item.data))
        events.append(converter.from_payload(payload, AgentEvent))
    return events


class ResumeGuard:
    """Decides what a retried model attempt may show, given what earlier attempts showed.

    `prior_text` is read back from the stream itself (see `published_message_text`), so it is
    exactly what subscribers received. If the new attempt produces the same prefix (always, for
    a deterministic model) it continues after it and the user sees no repeat. If it diverges, a
    `message_reset` tells consumers to drop the earlier text, and the new text is shown from the
    start.
    """

    def __init__(self, prior_text: str) -> None:
        self.prior_text = prior_text
        self.decided = not prior_text
        self.reset = False
        self.publish_from = 0

    def decide(self, text: str, final: bool) -> bool:
        """Return True once a decision is made (then read `reset` and `publish_from`)."""
        if self.decided:
            return True
        if len(text) < len(self.prior_text) and not final:
            if not self.prior_text.startswith(text):
                self.reset = self.decided = True
            return self.decided
        if text.startswith(self.prior_text):
            self.publish_from = len(self.prior_text)
        else:
            self.reset = True
        self.decided = True
        return True


async def published_message_text(
    client: Client, session_key: str, from_offset: int, message_id: str
) -> str:
    """What subscribers have been shown of one message, read with a query (no history cost)."""
    text, _ = await published_so_far(client, session_key, from_offset, message_id, None)
    return text


async def published_so_far(
    client: Client,
    session_key: str,
    from_offset: int,
    message_id: str | None,
    run_id: str | None,
) -> tuple[str, set[str]]:
    """What subscribers have been shown of one message, and the ids of the run's lifecycle
    events already in the stream (a retried step must not announce them again)."""
    handle = client.get_workflow_handle(events_workflow_id(session_key))
    converter = client.data_converter.payload_converter
    text = ""
    announced: set[str] = set()
    offset = from_offset
    while True:
        result = await handle.query(
            POLL_QUERY,
            PollInput(topics=[EVENTS_TOPIC], from_offset=offset),
            result_type=PollResult,
        )
        for event in decode_events(result, converter):
            if run_id is not None and event.run_id == run_id and event.kind in LIFECYCLE:
                announced.add(event.event_id)
            if message_id is None or event.message_id != message_id:
                continue
            if event.kind == EventKind.MESSAGE_RESET:
                text = ""
            elif event.kind == EventKind.TEXT_DELTA and event.text and event.index is not None:
                text = text[: event.index] + event.text
        if not result.more_ready:
            return text, announced
        offset = result.next_offset


def text_delta_template(
    session_key: str,
    run_id: str,
    message_id: str,
    turn_index: int,
    attempt: int,
    kind: EventKind = EventKind.TEXT_DELTA,
    call: str = "",
) -> AgentEvent:
    """`call`: the activity id of the model call, for events a call made again by the run
    (a new activity, its attempt 1 again) must not share with the first call's."""
    suffix = "d" if kind == EventKind.TEXT_DELTA else "r"
    made = f"{call}." if call else ""
    return AgentEvent(
        kind=kind,
        event_id=f"{message_id}/{made}a{attempt}/{suffix}",
        session_key=session_key,
        run_id=run_id,
        attempt=attempt,
        turn_index=turn_index,
        message_id=message_id,
    )
