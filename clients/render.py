"""Renders a session's events on a terminal: text as it streams, one line per tool call."""

from __future__ import annotations

import sys
from typing import TextIO

from agentlane.events import AgentEvent, EventKind
from clients.api import MessageView
from clients.terminal_text import printable
from clients.tool_line import tool_input_preview

DIM = "\033[2m"
RESET = "\033[0m"


class TerminalRenderer:
    def __init__(self, out: TextIO = sys.stdout, color: bool | None = None) -> None:
        self.out = out
        self.color = out.isatty() if color is None else color
        self.view = MessageView()
        self.at_line_start = True
        # Reasoning is being shown: the answer starts on a line of its own after it.
        self.in_reasoning = False

    def _dim(self, text: str) -> str:
        return f"{DIM}{text}{RESET}" if self.color else text

    def _line(self, text: str) -> None:
        if not self.at_line_start:
            self.out.write("\n")
        self.out.write(self._dim(printable(text)) + "\n")
        self.at_line_start = True

    def render(self, event: AgentEvent) -> None:
        kind = event.kind
        if kind == EventKind.TEXT_DELTA:
            fresh = self.view.apply(event)
            if fresh:
                if self.in_reasoning:
                    self.in_reasoning = False
                    if not self.at_line_start:
                        self.out.write("\n")
                self.out.write(printable(fresh))
                self.at_line_start = fresh.endswith("\n")
        elif kind == EventKind.REASONING_DELTA:
            # Only present in reasoning mode "stream"; shown dimmed, apart from the answer.
            if event.text and event.event_id not in self.view.seen_ids:
                self.view.apply(event)
                if not self.in_reasoning:
                    self.in_reasoning = True
                    if not self.at_line_start:
                        self.out.write("\n")
                    if not self.color:  # without dimming, say what it is
                        self.out.write("(thinking) ")
                self.out.write(self._dim(printable(event.text)))
                self.at_line_start = event.text.endswith("\n")
        elif kind == EventKind.BLOCK_REPLY and event.data.get("reasoning"):
            # Reasoning mode `on`: the reasoning as one block before the answer (the answer's
            # own blocks repeat its deltas, shown above).
            if event.text and event.event_id not in self.view.seen_ids:
                self.view.apply(event)
                self._line(event.text)
        elif kind == EventKind.MESSAGE_RESET:
            self.view.apply(event)
            # Not its attempt number: a call the run makes again is a new activity (attempt 1).
            self._line("↻ model call made again; its reply restarts:")
        elif kind in (EventKind.WARNING, EventKind.TOOL_LOOP, EventKind.STREAM_GAP):
            if event.event_id not in self.view.seen_ids:
                self.view.apply(event)
                self._line(f"⚠ {event.text or ''}")
        elif kind in (EventKind.APPROVAL_REQUESTED, EventKind.APPROVAL_DECIDED):
            if event.event_id not in self.view.seen_ids:
                self.view.apply(event)
                self._line(_approval_line(event))
        elif kind == EventKind.AGENT_START:
            if event.event_id not in self.view.seen_ids:  # a repeat is the same start
                self.view.apply(event)
                self._line(f"▶ {event.run_id} started ({event.data.get('model', '')})")
        elif kind == EventKind.TOOL_EXECUTION_START:
            if event.event_id not in self.view.seen_ids:
                self.view.apply(event)
                self._line(f"⚙ {event.tool_name} {_input_line(event)}")
        elif kind == EventKind.TOOL_EXECUTION_END:
            if event.event_id not in self.view.seen_ids:
                self.view.apply(event)
                mark = "✓" if event.success else "✗"
                took = f" ({event.duration_ms} ms)" if event.duration_ms is not None else ""
                self._line(f"  {mark} {event.summary or ''}{took}")
        elif kind == EventKind.AGENT_END:
            if event.event_id not in self.view.seen_ids:
                self.view.apply(event)
                self._line(
                    f"■ {event.run_id} ended: {event.termination_reason} "
                    f"({event.data.get('total_turns', 0)} turns, "
                    f"{event.data.get('duration_ms', 0)} ms"
                    + (f", cost {event.data['cost']}" if event.data.get("cost") else "")
                    + ")"
                )
        elif kind == EventKind.SESSION_RESET and event.event_id not in self.view.seen_ids:
            self.view.apply(event)
            kept = int(event.data.get("queued_kept") or 0)
            queued = f"; {kept} queued message(s) answered in the fresh context" if kept else ""
            self._line(
                f"── reset ── ({event.data.get('entry_id', '')}): later messages start "
                f"afresh{queued}"
            )
        elif kind == EventKind.MESSAGE_DROPPED and event.event_id not in self.view.seen_ids:
            self.view.apply(event)
            self._line(f"── message #{event.data.get('seq', '?')} {event.text} ──")
        elif kind == EventKind.ERROR and event.event_id not in self.view.seen_ids:
            self.view.apply(event)
            self._line(f"! error: {event.text}")
        self.out.flush()


def _input_line(event: AgentEvent) -> str:
    return tool_input_preview(event.tool_name, event.data.get("input", {}))


def _approval_line(event: AgentEvent) -> str:
    """A call waiting for a person (with the command that decides it), or its outcome."""
    d = event.data
    if event.kind == EventKind.APPROVAL_REQUESTED:
        return (
            f"⏸ {d.get('tool', '')} waits for approval {d.get('id', '')}: "
            f"{d.get('args_preview', '')}  (agentlane approve {event.session_key} "
            f"{d.get('id', '')} [--deny])"
        )
    reason = f": {d['reason']}" if d.get("reason") else ""
    return f"  approval {d.get('id', '')} {d.get('outcome', '')}{reason}"
