"""When a schedule fires, and its rules, from the words a user types (`--cron`, `--every`,
`--overlap`, `--catchup-window`), checked here so a typo gets a clear error before any round
trip. Pure functions; `clients/schedules.py` turns the result into a Temporal Schedule.

The server parses cron strings itself (5 fields, 6 with a year, 7 with seconds first, or
`@daily`-style names, optionally after `CRON_TZ=<zone>`); this check catches the usual mistakes
(wrong field count, a value out of range, words that are not cron) and the server's own error is
passed on for anything it still refuses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta

from temporalio.client import ScheduleOverlapPolicy

# A firing missed while the server was down still runs if the server is back within this long
# of its scheduled time (README "Scheduled runs"); older ones are counted as missed, not run.
DEFAULT_CATCHUP_WINDOW = timedelta(minutes=10)
# The server's own floor for the catch-up window.
MIN_CATCHUP_WINDOW = timedelta(seconds=10)
MIN_INTERVAL = timedelta(seconds=1)

OVERLAP_POLICIES: dict[str, ScheduleOverlapPolicy] = {
    "skip": ScheduleOverlapPolicy.SKIP,
    "buffer_one": ScheduleOverlapPolicy.BUFFER_ONE,
    "buffer_all": ScheduleOverlapPolicy.BUFFER_ALL,
    "allow_all": ScheduleOverlapPolicy.ALLOW_ALL,
}

_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
_CRON_NAMES = frozenset(
    {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
)
# (name, lowest, highest) of the fields of a 5-field cron string.
_FIELDS_5 = [("minute", 0, 59), ("hour", 0, 23), ("day of month", 1, 31), ("month", 1, 12)]
_DOW = ("day of week", 0, 7)
_SECOND = ("second", 0, 59)
_YEAR = ("year", 1970, 2199)
_FIELD_CHARS = re.compile(r"^[A-Za-z0-9*/,?#-]+$")


class ScheduleSpecError(ValueError):
    """A schedule's timing or rules cannot be used; the message says why and what would work."""


@dataclass(frozen=True)
class Timing:
    """Exactly one of the two; `text` is how it is shown back (`every 1h`, `cron 0 9 * * *`)."""

    cron: str | None
    every: timedelta | None
    text: str


def parse_duration(raw: str, what: str = "interval") -> timedelta:
    """`30s`, `15m`, `1h`, `1d`, or a sum such as `1h30m`."""
    word = raw.strip().lower().replace(" ", "")
    match = _DURATION.fullmatch(word)
    if not word or match is None or not any(match.groups()):
        raise ScheduleSpecError(
            f"invalid {what} {raw!r}: use a number and a unit (s, m, h, d), e.g. 30s, 15m, 1h, "
            "1d or 1h30m"
        )
    days, hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
    return timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)


def format_duration(value: timedelta) -> str:
    total = int(value.total_seconds())
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if total >= size:
            parts.append(f"{total // size}{unit}")
            total %= size
    return "".join(parts) or "0s"


def check_cron(raw: str) -> str:
    expr = " ".join(raw.split())
    body = expr
    if body.upper().startswith("CRON_TZ=") or body.upper().startswith("TZ="):
        _, _, body = body.partition(" ")
    if body.startswith("@"):
        name = body.split()[0].lower()
        if name in _CRON_NAMES and len(body.split()) == 1:
            return expr
        if name == "@every" and len(body.split()) == 2:
            parse_duration(body.split()[1].split("/")[0], "cron @every interval")
            return expr
        raise ScheduleSpecError(
            f"invalid cron {raw!r}: known names are {', '.join(sorted(_CRON_NAMES))} and "
            "`@every <interval>`"
        )
    fields = body.split()
    layout = {
        5: [*_FIELDS_5, _DOW],
        6: [*_FIELDS_5, _DOW, _YEAR],
        7: [_SECOND, *_FIELDS_5, _DOW, _YEAR],
    }.get(len(fields))
    if layout is None:
        raise ScheduleSpecError(
            f"invalid cron {raw!r}: it has {len(fields)} fields; use 5 (minute hour "
            "day-of-month month day-of-week, e.g. '0 9 * * 1-5'), 6 (plus year) or 7 "
            "(second first, plus year)"
        )
    for value, (name, low, high) in zip(fields, layout, strict=True):
        if not _FIELD_CHARS.fullmatch(value):
            raise ScheduleSpecError(f"invalid cron {raw!r}: {name} field {value!r} is not cron")
        for number in re.findall(r"\d+", value.split("/")[0]):
            if not low <= int(number) <= high:
                raise ScheduleSpecError(
                    f"invalid cron {raw!r}: {name} {number} is out of range ({low}-{high})"
                )
    return expr


def parse_timing(cron: str | None, every: str | None) -> Timing:
    if (cron is None) == (every is None):
        raise ScheduleSpecError("give exactly one of --cron or --every")
    if cron is not None:
        expr = check_cron(cron)
        return Timing(cron=expr, every=None, text=f"cron {expr}")
    assert every is not None
    interval = parse_duration(every)
    if interval < MIN_INTERVAL:
        raise ScheduleSpecError(f"invalid interval {every!r}: the shortest is 1s")
    return Timing(cron=None, every=interval, text=f"every {format_duration(interval)}")


def parse_overlap(raw: str) -> ScheduleOverlapPolicy:
    word = raw.strip().lower().replace("-", "_")
    if word not in OVERLAP_POLICIES:
        raise ScheduleSpecError(
            f"unknown overlap policy {raw!r}; valid: {', '.join(OVERLAP_POLICIES)}"
        )
    return OVERLAP_POLICIES[word]


def overlap_name(policy: ScheduleOverlapPolicy) -> str:
    for name, value in OVERLAP_POLICIES.items():
        if value == policy:
            return name
    return policy.name.lower()


def parse_catchup_window(raw: str | timedelta | None) -> timedelta:
    if raw is None:
        return DEFAULT_CATCHUP_WINDOW
    window = raw if isinstance(raw, timedelta) else parse_duration(raw, "catch-up window")
    if window < MIN_CATCHUP_WINDOW:
        raise ScheduleSpecError(
            f"catch-up window {format_duration(window)} is too short: the shortest is 10s"
        )
    return window
