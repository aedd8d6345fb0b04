"""A command's output as the event stream shows it: redacted, a whole line (or a run of text
ending in whitespace) at a time.

The stream's events land in the events workflow's history and reach every watcher, and a command
inherits the worker's environment: `env` or a failing `curl -v` prints the provider keys. A chunk
is not a unit a secret respects (a key can arrive in two), so text is held back until a point no
secret crosses (keys hold no whitespace) and redacted up to there, known values included.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from agentlane.redaction import redact

# A line longer than this is let through at its last whitespace; one with none at all waits for
# its end (or the command's).
LONG_LINE_CHARS = 4096


class RedactedStream:
    def __init__(
        self, limit: int, secrets: Sequence[str], emit: Callable[[int, str], None]
    ) -> None:
        self.limit = limit  # raw characters shown at most (a preview: the transcript has all)
        self.secrets = secrets
        self.emit = emit  # (position in the shown text, text)
        self.held = ""
        self.taken = 0  # raw characters taken into the preview
        self.shown = 0  # characters emitted (redacted)

    def feed(self, chunk: str) -> None:
        room = self.limit - self.taken
        if room <= 0:
            return
        piece = chunk[:room]
        self.taken += len(piece)
        self.held += piece
        cut = self.held.rfind("\n") + 1
        if cut == 0 and len(self.held) > LONG_LINE_CHARS:
            cut = max(self.held.rfind(" "), self.held.rfind("\t")) + 1
        if cut > 0:
            self._send(self.held[:cut])
            self.held = self.held[cut:]
        if self.taken >= self.limit:
            self.flush()

    def flush(self) -> None:
        if self.held:
            self._send(self.held)
            self.held = ""

    def _send(self, text: str) -> None:
        shown = redact(text, self.secrets)
        if shown:
            self.emit(self.shown, shown)
            self.shown += len(shown)
