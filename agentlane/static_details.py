"""The static details a session's and a run's page in the Temporal UI shows (issue 25): set
once when the workflow starts (`static_details`), as markdown.

A session: its workspace, model, agent, channel and who created it. A run: its model, what
started it and who sent it, how many messages it takes and how many still wait behind it, and
the start of its prompt; a sub-agent's run also its depth and the run that spawned it.

Every value is one line, prompts are cut and redacted: the details sit in the start event of
every run (so in its history) and are shown to anyone who can open the UI.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentlane.redaction import redact
from agentlane.run import ExecutionRequest

# The run's static summary shows its first 80 characters already.
PROMPT_PREVIEW_CHARS = 120


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _rows(rows: Sequence[tuple[str, object]]) -> str:
    """A markdown list of `name: value`, rows without a value left out."""
    return "\n".join(
        f"- **{name}:** {_one_line(str(value))}" for name, value in rows if value not in (None, "")
    )


def prompt_preview(texts: Sequence[str], limit: int = PROMPT_PREVIEW_CHARS) -> str:
    text = redact(_one_line(" / ".join(texts)))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def session_details(
    *,
    workspace: str,
    model: str,
    agent: str,
    channel: str | None,
    created_by: str | None,
    sender: str | None,
) -> str:
    return _rows(
        [
            ("workspace", f"`{workspace}`"),
            ("model", model),
            ("agent", agent),
            ("channel", channel),
            ("created by", created_by),
            ("first sender", sender),
        ]
    )


def branch_details(*, parent: str, branch_point: str, created_by: str | None) -> str:
    return _rows(
        [
            ("branch of", f"**{parent}**"),
            ("at entry", f"`{branch_point}`"),
            ("settings", "the parent's"),
            ("created by", created_by),
        ]
    )


def run_details(req: ExecutionRequest, queued_behind: int = 0) -> str:
    senders = sorted({t.sender for t in req.prompt if t.sender})
    channels = sorted({t.routing.channel for t in req.prompt if t.routing.channel})
    rows: list[tuple[str, object]] = [
        ("model", req.model.label()),
        ("thinking", req.thinking if req.thinking != "off" else None),
        ("source", req.source.value),
        ("sender", ", ".join(senders)),
        ("channel", ", ".join(channels)),
        # One message is the usual case; more are a batch the queue collected.
        ("messages", len(req.prompt) if len(req.prompt) > 1 else None),
        ("queued behind it", queued_behind or None),
    ]
    if req.spawn_depth:
        rows += [("sub-agent depth", req.spawn_depth), ("spawned by", req.spawned_by)]
    preview = prompt_preview([t.text for t in req.prompt])
    return f"{_rows(rows)}\n\n> {preview}" if preview else _rows(rows)
