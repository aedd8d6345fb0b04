"""The AG-UI vocabulary of a session's events (https://docs.ag-ui.com, protocol 1.x).

`AguiTranslator.translate(offset, event)` turns one `AgentEvent` into the AG-UI events it stands
for, as JSON-ready dicts (camelCase, built and serialised by the `ag-ui-protocol` package's own
models, so every dict validates against them). One translator per stream: it is stateful.

| our kind               | AG-UI                                                                |
| ---------------------- | -------------------------------------------------------------------- |
| agent_start            | RUN_STARTED (threadId = session key, runId = run id), STATE_SNAPSHOT |
| turn_start / turn_end  | STEP_STARTED / STEP_FINISHED (stepName "turn N"), STATE_DELTA /turn  |
| message_start          | STATE_DELTA /model (the message itself opens with its first text)    |
| text_delta             | TEXT_MESSAGE_START (once, role assistant), TEXT_MESSAGE_CONTENT      |
|                        | (only characters the client does not have yet)                       |
| reasoning_delta        | REASONING_START + REASONING_MESSAGE_START (once), ..._CONTENT        |
| message_end            | TEXT_MESSAGE_END, REASONING_MESSAGE_END + REASONING_END (those open) |
| message_reset          | nothing at once; see "Retried attempts" below                        |
| tool_execution_start   | TOOL_CALL_START (parentMessageId = the assistant message),           |
|                        | TOOL_CALL_ARGS (the arguments' preview as JSON), TOOL_CALL_END       |
| tool_execution_update  | CUSTOM "tool_execution_update" {toolCallId, index, text}: new output |
| tool_execution_end     | TOOL_CALL_RESULT (content = the result text, else its summary;       |
|                        | metadata: summary, success, durationMs)                              |
| compaction_start/_end  | CUSTOM (name = kind, value = data), STATE_DELTA /phase               |
| error                  | RUN_ERROR (message = text, code = data.code); closes the run         |
| agent_end              | STATE_DELTA /phase idle, then RUN_FINISHED (outcome success, or      |
|                        | cancelled for an abort), or RUN_ERROR for a failed run that had no   |
|                        | `error` event; nothing if `error` closed the run already             |
| warning, tool_loop,    | CUSTOM (name = our kind, value = our data, with `text` when set)     |
| block_reply,           | (block_reply: {messageId, index, text})                              |
| session_reset,         |                                                                      |
| message_dropped,       |                                                                      |
| approval_requested,    |                                                                      |
| approval_decided       |                                                                      |

Stream shape: AG-UI wants every event inside a run (RUN_STARTED first, nothing after the run
closes). Events of a run whose `agent_start` this translator did not see (a stream read from
the middle) open that run implicitly; events that belong to no run (`session_reset`, run id
"") are wrapped in a run of their own (runId `<session key>:event:<offset>`) when no run is
open; events of a run that is already closed are dropped (an `error` becomes a late RUN_ERROR,
which AG-UI allows after RUN_FINISHED). Everything a run opened (messages, reasoning, steps) is
closed before its RUN_FINISHED. A second `agent_start` while a run is open closes the open one
as cancelled first (runs of one session do not overlap; an interrupted run is the only one that
could still be draining).

Retried attempts: the translator keeps, per assistant message, the text the client was sent
and the text the current attempt has produced (rebuilt from each delta's `index`). It sends
only what extends what the client has: a retried attempt that repeats the same prefix, a
re-published delta, or one that overlaps sends nothing twice. A `message_reset` sends nothing
at once: if the new attempt's text turns out to extend what was shown (a deterministic retry),
the client never knows. If it diverges, AG-UI cannot take text back (a closed message may only
be reopened to append), so the old message is ended, a CUSTOM "message_reset" {messageId,
replacedBy, attempt} says the client should drop it, and the new attempt's text streams as a
new message `<message id>~<n>`. A client that ignores CUSTOM keeps the abandoned partial text
as a separate, shorter message; it never sees the same text twice within a message. Tool calls
and results are sent once per tool call id (a retried tool activity publishes its start again).

Resuming (Last-Event-ID): the translator cannot know what a client got on an earlier
connection. Feed it the events before the resume point with `prime()` (from the run's
`agent_start` on is enough) and it carries on exactly where that connection stopped; without
priming, a run or message that was open is opened again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from agentlane.events import AgentEvent, EventKind

# CUSTOM event names of our own (besides our kinds).
MESSAGE_RESET = "message_reset"

# Kinds that carry no more than a CUSTOM event can say.
_CUSTOM_KINDS = frozenset(
    {
        EventKind.WARNING,
        EventKind.TOOL_LOOP,
        EventKind.COMPACTION_START,
        EventKind.COMPACTION_END,
        EventKind.SESSION_RESET,
        EventKind.MESSAGE_DROPPED,
        EventKind.APPROVAL_REQUESTED,
        EventKind.APPROVAL_DECIDED,
    }
)


@dataclass
class _Lane:
    """One streamed text of one assistant message (its answer, or its reasoning), as the
    client has it (`shown`) and as the current attempt has produced it (`text`)."""

    base_id: str
    agui_id: str
    reasoning: bool = False
    shown: str = ""
    text: str = ""
    open: bool = False
    generation: int = 1
    reset_pending: bool = False

    def apply(self, index: int, delta: str) -> None:
        current = self.text
        if index > len(current):
            # A gap: events before it were not seen (a stream read from the middle). Stand in
            # for what the client presumably has, so later positions line up.
            current = current.ljust(index, "\0")
            if not self.shown:
                self.shown = current
        self.text = current[:index] + delta


@dataclass
class _Run:
    run_id: str
    steps: set[str] = field(default_factory=set)
    lanes: list[_Lane] = field(default_factory=list)


class AguiTranslator:
    def __init__(self) -> None:
        self._run: _Run | None = None
        self._closed: set[str] = set()  # runs that ended (RUN_FINISHED or RUN_ERROR)
        self._errored: set[str] = set()  # ... of which with RUN_ERROR
        self._seen: set[str] = set()  # event ids of one-off events already translated
        self._text: dict[str, _Lane] = {}  # by our message id
        self._reasoning: dict[str, _Lane] = {}
        self._reasoning_spans: set[str] = set()  # open REASONING_START ids
        self._tool_calls: set[str] = set()  # tool call ids started
        self._results: set[str] = set()  # tool call ids answered
        self._tool_output: dict[str, _Lane] = {}

    # -- public -----------------------------------------------------------------------------

    def translate(self, offset: int, event: AgentEvent) -> list[dict[str, Any]]:
        """The AG-UI events for `event` (at `offset` in the session's stream), in order."""
        return [_dump(e) for e in self._translate(offset, event)]

    def prime(self, offset: int, event: AgentEvent) -> None:
        """Take in an event the client already had in AG-UI form (before a resume point)."""
        self._translate(offset, event)

    # -- dispatch ---------------------------------------------------------------------------

    def _translate(self, offset: int, event: AgentEvent) -> list[BaseEvent]:
        kind = event.kind
        streamed = kind in (
            EventKind.TEXT_DELTA,
            EventKind.REASONING_DELTA,
            EventKind.TOOL_EXECUTION_UPDATE,
        )
        if not streamed:
            if event.event_id in self._seen:
                return []  # re-published by a retried step: already translated
            self._seen.add(event.event_id)
        out: list[BaseEvent] = []
        if kind == EventKind.ERROR:
            return self._error(event)
        if kind == EventKind.AGENT_START:
            return self._agent_start(event)
        if not self._enter(offset, event, out):
            return out
        handler = {
            EventKind.TURN_START: self._turn_start,
            EventKind.TURN_END: self._turn_end,
            EventKind.MESSAGE_START: self._message_start,
            EventKind.TEXT_DELTA: self._text_delta,
            EventKind.REASONING_DELTA: self._reasoning_delta,
            EventKind.MESSAGE_RESET: self._message_reset,
            EventKind.MESSAGE_END: self._message_end,
            EventKind.BLOCK_REPLY: self._block_reply,
            EventKind.TOOL_EXECUTION_START: self._tool_start,
            EventKind.TOOL_EXECUTION_UPDATE: self._tool_update,
            EventKind.TOOL_EXECUTION_END: self._tool_end,
            EventKind.AGENT_END: self._agent_end,
        }.get(kind)
        if handler is not None:
            out.extend(handler(event))
        elif kind in _CUSTOM_KINDS:
            out.extend(self._custom(event))
        if self._run is not None and self._run.run_id.startswith(_WRAP):
            out.extend(self._finish(RunFinishedEvent(thread_id=event.session_key, run_id="")))
        return out

    def _enter(self, offset: int, event: AgentEvent, out: list[BaseEvent]) -> bool:
        """Make sure a run is open for `event`; False if it must be dropped."""
        run_id = event.run_id
        if run_id and run_id in self._closed:
            return False
        current = self._run
        if current is not None and (not run_id or current.run_id == run_id):
            return True
        if current is not None:
            # Another run's event while one is open: runs do not overlap, so the open one has
            # ended without saying so.
            out.extend(self._supersede(event.session_key))
        if not run_id:
            run_id = f"{_WRAP}{event.session_key}:event:{offset}"
        self._run = _Run(run_id)
        out.append(
            RunStartedEvent(
                thread_id=event.session_key,
                run_id=run_id.removeprefix(_WRAP),
                timestamp=_ms(event),
            )
        )
        return True

    # -- lifecycle --------------------------------------------------------------------------

    def _agent_start(self, event: AgentEvent) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        if event.run_id in self._closed:
            return out
        if self._run is not None and self._run.run_id == event.run_id:
            return out  # opened implicitly already
        if self._run is not None:
            out.extend(self._supersede(event.session_key))
        self._run = _Run(event.run_id)
        out.append(
            RunStartedEvent(thread_id=event.session_key, run_id=event.run_id, timestamp=_ms(event))
        )
        out.append(
            StateSnapshotEvent(
                snapshot={
                    "runId": event.run_id,
                    "phase": "running",
                    "turn": None,
                    "model": event.data.get("model"),
                    "thinking": event.data.get("thinking"),
                    "tools": event.data.get("tools"),
                }
            )
        )
        return out

    def _agent_end(self, event: AgentEvent) -> list[BaseEvent]:
        data = event.data
        reason = event.termination_reason or ""
        status = str(data.get("status") or "")
        out: list[BaseEvent] = []
        figures = {
            "terminationReason": reason,
            "totalTurns": data.get("total_turns"),
            "totalTokens": data.get("total_tokens"),
            "cost": data.get("cost"),
            "durationMs": data.get("duration_ms"),
        }
        meta = {k: v for k, v in figures.items() if v is not None}
        if status == "error" or (not status and reason not in ("no_tool_calls", "abort_signal")):
            out.extend(
                self._fail(
                    RunErrorEvent(
                        message=f"the run ended: {reason or 'error'}",
                        code=reason or None,
                        timestamp=_ms(event),
                        metadata=meta,
                    )
                )
            )
            return out
        outcome: RunFinishedSuccessOutcome | RunFinishedCancelledOutcome = (
            RunFinishedCancelledOutcome()
            if status == "aborted" or reason == "abort_signal"
            else RunFinishedSuccessOutcome()
        )
        out.extend(
            self._finish(
                RunFinishedEvent(
                    thread_id=event.session_key,
                    run_id=event.run_id,
                    outcome=outcome,
                    timestamp=_ms(event),
                    metadata=meta,
                )
            )
        )
        return out

    def _error(self, event: AgentEvent) -> list[BaseEvent]:
        if event.run_id in self._errored:
            return []
        error = RunErrorEvent(
            message=event.text or "error",
            code=str(event.data.get("code")) if event.data.get("code") else None,
            timestamp=_ms(event),
            metadata={"recoverable": event.recoverable} if event.recoverable is not None else None,
        )
        if event.run_id and event.run_id in self._closed:
            self._errored.add(event.run_id)
            return [error]  # a late failure of a run that reported success
        if self._run is not None and event.run_id and self._run.run_id != event.run_id:
            out = self._supersede(event.session_key)
            return out + [error]
        return self._fail(error, event.run_id)

    def _fail(self, error: RunErrorEvent, run_id: str | None = None) -> list[BaseEvent]:
        out = self._close_open()
        if self._run is not None:
            run_id = self._run.run_id
        self._run = None
        if run_id:
            self._closed.add(run_id)
            self._errored.add(run_id)
        out.append(error)
        return out

    def _finish(self, finished: RunFinishedEvent) -> list[BaseEvent]:
        out = self._close_open()
        assert self._run is not None
        run_id = self._run.run_id
        self._run = None
        self._closed.add(run_id)
        finished.run_id = run_id.removeprefix(_WRAP)
        out.append(finished)
        return out

    def _supersede(self, thread_id: str) -> list[BaseEvent]:
        assert self._run is not None
        return self._finish(
            RunFinishedEvent(
                thread_id=thread_id,
                run_id=self._run.run_id,
                outcome=RunFinishedCancelledOutcome(),
                metadata={"terminationReason": "superseded"},
            )
        )

    def _close_open(self) -> list[BaseEvent]:
        """Close what the open run opened (AG-UI: before RUN_FINISHED)."""
        out: list[BaseEvent] = []
        run = self._run
        if run is None:
            return out
        for lane in list(run.lanes):
            out.extend(self._close_lane(lane))
        run.lanes.clear()
        for step in sorted(run.steps):
            out.append(StepFinishedEvent(step_name=step))
        run.steps.clear()
        if not run.run_id.startswith(_WRAP):
            out.append(StateDeltaEvent(delta=[{"op": "add", "path": "/phase", "value": "idle"}]))
        return out

    # -- turns ------------------------------------------------------------------------------

    def _turn_start(self, event: AgentEvent) -> list[BaseEvent]:
        assert self._run is not None
        name = f"turn {event.turn_index}"
        out: list[BaseEvent] = []
        if name not in self._run.steps:
            self._run.steps.add(name)
            out.append(StepStartedEvent(step_name=name, timestamp=_ms(event)))
        out.append(
            StateDeltaEvent(delta=[{"op": "add", "path": "/turn", "value": event.turn_index}])
        )
        return out

    def _turn_end(self, event: AgentEvent) -> list[BaseEvent]:
        assert self._run is not None
        name = f"turn {event.turn_index}"
        if name not in self._run.steps:
            return []
        self._run.steps.discard(name)
        return [StepFinishedEvent(step_name=name, timestamp=_ms(event))]

    # -- messages ---------------------------------------------------------------------------

    def _message_start(self, event: AgentEvent) -> list[BaseEvent]:
        model = event.data.get("model")
        if not model:
            return []
        return [StateDeltaEvent(delta=[{"op": "add", "path": "/model", "value": model}])]

    def _lane(self, lanes: dict[str, _Lane], base_id: str, reasoning: bool = False) -> _Lane:
        lane = lanes.get(base_id)
        if lane is None:
            lane = lanes[base_id] = _Lane(base_id=base_id, agui_id=base_id, reasoning=reasoning)
        return lane

    def _text_delta(self, event: AgentEvent) -> list[BaseEvent]:
        if not event.message_id or event.text is None or event.index is None:
            return []
        lane = self._lane(self._text, event.message_id)
        lane.apply(event.index, event.text)
        return self._sync(lane, event)

    def _reasoning_delta(self, event: AgentEvent) -> list[BaseEvent]:
        if not event.message_id or event.text is None or event.index is None:
            return []
        lane = self._lane(self._reasoning, f"{event.message_id}/reasoning", reasoning=True)
        lane.apply(event.index, event.text)
        return self._sync(lane, event)

    def _sync(self, lane: _Lane, event: AgentEvent) -> list[BaseEvent]:
        """Send what the client lacks of `lane.text`, or replace the message if it diverged."""
        if _extends(lane.text, lane.shown):
            # (A placeholder for unseen text is never sent.)
            fresh = lane.text[len(lane.shown) :].replace("\0", "")
            lane.shown = lane.text
            lane.reset_pending = False
            if not fresh:
                return []
            out = self._open_lane(lane, event)
            out.append(
                ReasoningMessageContentEvent(message_id=lane.agui_id, delta=fresh)
                if lane.reasoning
                else TextMessageContentEvent(message_id=lane.agui_id, delta=fresh)
            )
            return out
        if _extends(lane.shown, lane.text):
            return []  # a retried attempt repeating what the client has: wait for more
        return self._replace(lane, event)

    def _replace(self, lane: _Lane, event: AgentEvent) -> list[BaseEvent]:
        """The current attempt's text is not what the client was shown: end that message and
        stream the new text as a new one (AG-UI cannot take text back)."""
        out = self._close_lane(lane)
        old = lane.agui_id
        text = lane.text.replace("\0", "")
        lane.generation += 1
        lane.agui_id = f"{lane.base_id}~{lane.generation}"
        lane.shown = ""
        lane.text = text
        lane.reset_pending = False
        out.append(
            CustomEvent(
                name=MESSAGE_RESET,
                value={
                    "messageId": old,
                    "replacedBy": lane.agui_id if text else None,
                    "attempt": event.attempt,
                    "reasoning": lane.reasoning,
                },
                timestamp=_ms(event),
            )
        )
        if text:
            out.extend(self._sync(lane, event))
        return out

    def _open_lane(self, lane: _Lane, event: AgentEvent) -> list[BaseEvent]:
        if lane.open:
            return []
        lane.open = True
        assert self._run is not None
        self._run.lanes.append(lane)
        if not lane.reasoning:
            return [TextMessageStartEvent(message_id=lane.agui_id, role="assistant")]
        out: list[BaseEvent] = []
        if lane.base_id not in self._reasoning_spans:
            self._reasoning_spans.add(lane.base_id)
            out.append(ReasoningStartEvent(message_id=lane.base_id))
        out.append(ReasoningMessageStartEvent(message_id=lane.agui_id))
        return out

    def _close_lane(self, lane: _Lane) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        if not lane.open:
            return out
        lane.open = False
        if self._run is not None and lane in self._run.lanes:
            self._run.lanes.remove(lane)
        if lane.reasoning:
            out.append(ReasoningMessageEndEvent(message_id=lane.agui_id))
            if lane.base_id in self._reasoning_spans:
                self._reasoning_spans.discard(lane.base_id)
                out.append(ReasoningEndEvent(message_id=lane.base_id))
        else:
            out.append(TextMessageEndEvent(message_id=lane.agui_id))
        return out

    def _message_reset(self, event: AgentEvent) -> list[BaseEvent]:
        if not event.message_id:
            return []
        lane = self._lane(self._text, event.message_id)
        lane.text = ""
        lane.reset_pending = True
        return []

    def _message_end(self, event: AgentEvent) -> list[BaseEvent]:
        if not event.message_id:
            return []
        out: list[BaseEvent] = []
        lane = self._text.get(event.message_id)
        if lane is not None:
            if lane.reset_pending and lane.text != lane.shown:
                # The final text is shorter than what was shown after a reset: replace it.
                out.extend(self._replace(lane, event))
            out.extend(self._close_lane(lane))
        thinking = self._reasoning.get(f"{event.message_id}/reasoning")
        if thinking is not None:
            out.extend(self._close_lane(thinking))
        return out

    def _block_reply(self, event: AgentEvent) -> list[BaseEvent]:
        return [
            CustomEvent(
                name=EventKind.BLOCK_REPLY.value,
                value={
                    "messageId": self._message_ref(event),
                    "index": event.index,
                    "text": event.text,
                },
                timestamp=_ms(event),
            )
        ]

    def _message_ref(self, event: AgentEvent) -> str | None:
        """The AG-UI id the client knows our message by (it changes when one is replaced)."""
        if not event.message_id:
            return None
        lane = self._text.get(event.message_id)
        return lane.agui_id if lane is not None else event.message_id

    # -- tools ------------------------------------------------------------------------------

    def _tool_start(self, event: AgentEvent) -> list[BaseEvent]:
        call = event.tool_call_id
        if not call or call in self._tool_calls:
            return []
        self._tool_calls.add(call)
        preview = event.data.get("input", {})
        return [
            ToolCallStartEvent(
                tool_call_id=call,
                tool_call_name=event.tool_name or "tool",
                parent_message_id=self._message_ref(event),
                timestamp=_ms(event),
            ),
            ToolCallArgsEvent(tool_call_id=call, delta=json.dumps(preview, ensure_ascii=False)),
            ToolCallEndEvent(tool_call_id=call),
        ]

    def _tool_update(self, event: AgentEvent) -> list[BaseEvent]:
        call = event.tool_call_id
        if not call or event.text is None or event.index is None or call in self._results:
            return []
        lane = self._tool_output.setdefault(call, _Lane(base_id=call, agui_id=call))
        before = lane.shown
        lane.apply(event.index, event.text)
        if not _extends(lane.text, before) or len(lane.text) == len(before):
            return []
        lane.shown = lane.text
        return [
            CustomEvent(
                name=EventKind.TOOL_EXECUTION_UPDATE.value,
                value={"toolCallId": call, "index": len(before), "text": lane.text[len(before) :]},
            )
        ]

    def _tool_end(self, event: AgentEvent) -> list[BaseEvent]:
        call = event.tool_call_id
        if not call or call in self._results:
            return []
        self._results.add(call)
        out: list[BaseEvent] = []
        if call not in self._tool_calls:
            # Its start was not seen (a stream read from the middle): a result needs a call.
            out.extend(self._tool_start(event.model_copy(update={"data": {}})))
        self._tool_output.pop(call, None)
        out.append(
            ToolCallResultEvent(
                message_id=f"{call}/result",
                tool_call_id=call,
                content=event.text or event.summary or "",
                role="tool",
                timestamp=_ms(event),
                metadata={
                    "summary": event.summary or "",
                    "success": bool(event.success),
                    "durationMs": event.duration_ms,
                },
            )
        )
        return out

    # -- the rest ---------------------------------------------------------------------------

    def _custom(self, event: AgentEvent) -> list[BaseEvent]:
        value: dict[str, Any] = dict(event.data)
        if event.text is not None:
            value["text"] = event.text
        out: list[BaseEvent] = [
            CustomEvent(name=event.kind.value, value=value, timestamp=_ms(event))
        ]
        phase = {
            EventKind.COMPACTION_START: "compacting",
            EventKind.COMPACTION_END: "running",
        }.get(event.kind)
        if phase is not None:
            out.append(StateDeltaEvent(delta=[{"op": "add", "path": "/phase", "value": phase}]))
        return out


# A run id of our own making, for events that belong to no run: closed after the event.
_WRAP = "\0wrap:"


def _extends(text: str, prefix: str) -> bool:
    """`text` starts with `prefix`, where a NUL in either (text the client got before this
    translator saw the stream) stands for any character."""
    if len(text) < len(prefix):
        return False
    if "\0" not in prefix and "\0" not in text:
        return text.startswith(prefix)
    return all(a == b or "\0" in (a, b) for a, b in zip(prefix, text, strict=False))


def _ms(event: AgentEvent) -> int | None:
    return int(event.ts * 1000) if event.ts else None


def _dump(event: BaseEvent) -> dict[str, Any]:
    dumped: dict[str, Any] = event.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped
