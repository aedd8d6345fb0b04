"""What a run's and a session's page in the Temporal UI says they do now (issue 25): the text of
`workflow.set_current_details`, rewritten at every step (no history event).

A run: "turn 3: calling anthropic/claude-sonnet-4-5", "turn 3: exec `pytest -q` since
12:53:24", a wait with the time it ends, and at the end its outcome with the reason and message;
below it, which run on which model. Turns are numbered as the CLI counts them, from 1. Times are
UTC, as the UI's own clock shows by default. A session: idle since when, or which run it runs
since when, and how many messages wait.

Markdown: the UI renders current details as markdown.

Pure: no I/O, no clock (the caller passes workflow time), no Temporal import.
"""

from __future__ import annotations

# The message of an error that ends a run, on the page: the first part (all of it is in the
# run's result and its event stream).
MESSAGE_CHARS = 300


def clock(ts: float) -> str:
    """HH:MM:SS (UTC) of a Unix time, by arithmetic: no calendar or time zone is consulted."""
    seconds = int(ts) % 86_400
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def turn_label(turn_index: int) -> str:
    """The turn being made, counted from 1 (the run's own index counts from 0)."""
    return f"turn {turn_index + 1}"


def code(text: str) -> str:
    """`text` as inline code that stays one span whatever backticks it holds."""
    text = " ".join(text.split())
    fence = "`"
    while fence in text:
        fence += "`"
    padded = f" {text} " if text.startswith("`") or text.endswith("`") else text
    return f"{fence}{padded}{fence}"


def calling(turn_index: int, model: str) -> str:
    return f"{turn_label(turn_index)}: calling {model}"


def running_tool(turn_index: int, tool: str, summary: str, since: float) -> str:
    """`summary` is the call's one-line summary ("exec pytest -q"): its name, then what it is
    about."""
    detail = summary[len(tool) :].strip() if summary.startswith(tool) else summary.strip()
    what = f"{tool} {code(detail)}" if detail else tool
    return f"{turn_label(turn_index)}: {what} since {clock(since)}"


def step(turn_index: int, text: str, until: float | None = None) -> str:
    """Something the run does or waits for in a turn; a wait says when it ends."""
    line = f"{turn_label(turn_index)}: {text}"
    return f"{line} (until {clock(until)})" if until is not None else line


def run_page(line: str, run_id: str, model: str) -> str:
    return f"{line}\n\nrun **{run_id}** on {model}"


def ended(
    run_id: str,
    status: str,
    reason: str,
    *,
    turns: int,
    tokens: int,
    cost: str,
    message: str | None = None,
) -> str:
    """The run's outcome: status, termination reason, and the error's message when it has one."""
    line = f"run **{run_id}** {status} ({reason}): {turns} turn{'s' if turns != 1 else ''}, "
    line += f"{tokens} tokens, cost {cost}"
    if message:
        text = " ".join(message.split())
        if len(text) > MESSAGE_CHARS:
            text = text[: MESSAGE_CHARS - 1] + "…"
        line += f"\n\n{text}"
    return line


def session_idle(since: float, last_run: str | None = None) -> str:
    line = f"idle since {clock(since)}"
    return f"{line}; last run {last_run}" if last_run else line


def session_running(run_number: int, run_id: str, since: float, queued: int) -> str:
    line = f"running run {run_number} (**{run_id}**) since {clock(since)}"
    if queued:
        line += f"; {queued} message{'s' if queued != 1 else ''} queued"
    return line
