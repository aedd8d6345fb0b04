"""How `agentlane schedule describe|list|create` print. Pure: views in, lines out; times in
UTC, as the schedules keep them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from clients.schedules import FiringView, ScheduleSummary, ScheduleView

SHOWN_NEXT = 3


def _at(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S UTC") if value is not None else "-"


def _firing(firing: FiringView) -> str:
    line = f"  {_at(firing.scheduled_at)}  {firing.workflow_id}"
    outcome = firing.outcome
    if outcome is not None:
        if outcome.run_id is None:
            return f"{line}  message {outcome.fate}" + (f": {outcome.note}" if outcome.note else "")
        end = f"{outcome.status} ({outcome.termination_reason})" if outcome.status else ""
        return f"{line}  -> {outcome.run_id} source={outcome.source or '?'} {end}".rstrip()
    return f"{line}  {firing.state}" if firing.state else line


def schedule_lines(view: ScheduleView) -> list[str]:
    preview = " ".join(view.message.split())
    if len(preview) > 80:
        preview = preview[:79] + "…"
    lines = [
        f"schedule   {view.id}" + ("  [paused]" if view.paused else ""),
        f"session    {view.session_key}",
        f"message    {preview}",
        f"timing     {view.timing}",
        f"overlap    {view.overlap}   catch-up window {view.catchup_window}",
    ]
    if view.note:
        lines.append(f"note       {view.note}")
    nexts = ", ".join(_at(t) for t in view.next_firings[:SHOWN_NEXT]) or "-"
    lines.append(f"next       {'(paused) ' if view.paused else ''}{nexts}")
    lines.append(
        f"firings    {view.firings} started, {view.skipped_overlap} skipped (overlap), "
        f"{view.missed_catchup} missed (catch-up window)"
    )
    lines.append(f"running    {', '.join(view.running) or '-'}")
    if view.recent:
        lines.append("recent")
        lines.extend(_firing(f) for f in view.recent)
    return lines


def summary_lines(rows: Sequence[ScheduleSummary]) -> list[str]:
    if not rows:
        return [
            "no schedules; `agentlane schedule create ID --session KEY --message TEXT "
            "--every 1h` makes one"
        ]
    out = ["id\tsession\ttiming\tstate\tnext firing\tlast firing"]
    for row in rows:
        state = "paused" if row.paused else "active"
        out.append(
            f"{row.id}\t{row.session_key}\t{row.timing}\t{state}\t"
            f"{_at(None if row.paused else row.next_firing)}\t{_at(row.last_firing)}"
        )
    return out
