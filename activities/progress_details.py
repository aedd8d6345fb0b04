"""What a running activity reports in its heartbeats, so the Temporal UI's Pending Activities
shows progress (issue 25): how long it has run, and for a tool the output so far (bytes and the
last line, redacted), for a model call the text so far and the time since its last delta.

Heartbeat details cost no history event (only the last ones are kept with the pending activity)
and nothing reads them back: a retried attempt starts from its own state.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentlane.redaction import redact

LINE_CHARS = 200


def _elapsed(since: float) -> float:
    return round(time.monotonic() - since, 1)


@dataclass
class ToolProgress:
    tool: str
    what: str = ""
    secrets: Sequence[str] = ()
    started: float = field(default_factory=time.monotonic)
    output_bytes: int = 0
    last_line: str = ""
    # Output after the last line break: a line still being written (a progress bar).
    _partial: str = ""

    def feed(self, chunk: str) -> None:
        self.output_bytes += len(chunk.encode())
        lines = (self._partial + chunk).replace("\r", "\n").split("\n")
        self._partial = lines[-1][-LINE_CHARS:]
        complete = [line for line in lines[:-1] if line.strip()]
        if complete:
            self.last_line = complete[-1][-LINE_CHARS:]

    def details(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"tool": self.tool, "elapsed_s": _elapsed(self.started)}
        if self.what:
            shown["call"] = redact(self.what[:LINE_CHARS], self.secrets)
        if self.output_bytes:
            line = self._partial.strip() or self.last_line.strip()
            shown["output_bytes"] = self.output_bytes
            shown["last_line"] = redact(line[-LINE_CHARS:], self.secrets)
        return shown


# The usual characters per token for English text and code; only an indication while the
# call streams (the provider's count arrives with the last event).
CHARS_PER_TOKEN = 4


@dataclass
class ModelProgress:
    model: str
    started: float = field(default_factory=time.monotonic)
    deltas: int = 0
    chars: int = 0
    last_delta: float | None = None

    def delta(self, text: str) -> None:
        self.deltas += 1
        self.chars += len(text)
        self.last_delta = time.monotonic()

    def details(self) -> dict[str, Any]:
        shown: dict[str, Any] = {
            "model": self.model,
            "elapsed_s": _elapsed(self.started),
            "deltas": self.deltas,
            "approx_tokens": self.chars // CHARS_PER_TOKEN,
        }
        if self.last_delta is not None:
            shown["since_last_delta_s"] = _elapsed(self.last_delta)
        return shown
