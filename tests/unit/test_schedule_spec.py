"""Schedule timing and rules as users type them (`clients/schedule_spec.py`): what is accepted,
and the error each usual mistake gets."""

from __future__ import annotations

from datetime import timedelta

import pytest
from temporalio.client import ScheduleOverlapPolicy

from agentlane.scheduled_runs import InvalidScheduleId, check_schedule_id, firing_workflow_id
from clients.schedule_spec import (
    DEFAULT_CATCHUP_WINDOW,
    ScheduleSpecError,
    check_cron,
    format_duration,
    parse_catchup_window,
    parse_duration,
    parse_overlap,
    parse_timing,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("30s", timedelta(seconds=30)),
        ("15m", timedelta(minutes=15)),
        ("1h", timedelta(hours=1)),
        ("1d", timedelta(days=1)),
        ("1h30m", timedelta(minutes=90)),
        (" 2H ", timedelta(hours=2)),
    ],
)
def test_intervals(raw: str, expected: timedelta) -> None:
    assert parse_duration(raw) == expected


@pytest.mark.parametrize("raw", ["", "1", "h", "1w", "-5m", "1.5h", "every hour", "30m1h"])
def test_bad_intervals_say_what_works(raw: str) -> None:
    with pytest.raises(ScheduleSpecError, match=r"use a number and a unit .*30s, 15m, 1h, 1d"):
        parse_duration(raw)


def test_zero_interval_is_refused() -> None:
    with pytest.raises(ScheduleSpecError, match="the shortest is 1s"):
        parse_timing(None, "0s")


def test_timing_is_shown_back_as_typed() -> None:
    assert parse_timing(None, "90m").text == "every 1h30m"
    assert parse_timing(None, "2s").every == timedelta(seconds=2)
    timing = parse_timing("0  9 * * 1-5", None)
    assert (timing.cron, timing.every, timing.text) == ("0 9 * * 1-5", None, "cron 0 9 * * 1-5")
    assert format_duration(timedelta(days=1, seconds=5)) == "1d5s"


def test_exactly_one_of_cron_and_every() -> None:
    for cron, every in ((None, None), ("@hourly", "1h")):
        with pytest.raises(ScheduleSpecError, match="exactly one of --cron or --every"):
            parse_timing(cron, every)


@pytest.mark.parametrize(
    "raw",
    [
        "*/5 * * * *",
        "0 9 * * MON-FRI",
        "0 0 1 1 * 2030",
        "30 0 9 * * * *",
        "@daily",
        "@every 15m",
        "CRON_TZ=Europe/Paris 0 9 * * *",
    ],
)
def test_cron_strings_the_server_takes(raw: str) -> None:
    assert check_cron(raw)


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ("* * *", "it has 3 fields; use 5"),
        ("every day", "it has 2 fields"),
        ("61 * * * *", "minute 61 is out of range"),
        ("0 24 * * *", "hour 24 is out of range"),
        ("0 9 * 13 *", "month 13 is out of range"),
        ("0 9 * * $", "day of week field '\\$' is not cron"),
        ("@fortnightly", "known names are"),
        ("@every soon", "invalid cron @every interval 'soon'"),
    ],
)
def test_bad_cron_strings_say_why(raw: str, words: str) -> None:
    with pytest.raises(ScheduleSpecError, match=words):
        parse_timing(raw, None)


def test_overlap_policies() -> None:
    assert parse_overlap("skip") == ScheduleOverlapPolicy.SKIP
    assert parse_overlap("buffer-one") == ScheduleOverlapPolicy.BUFFER_ONE
    assert parse_overlap("ALLOW_ALL") == ScheduleOverlapPolicy.ALLOW_ALL
    with pytest.raises(ScheduleSpecError, match="unknown overlap policy 'cancel'; valid: skip"):
        parse_overlap("cancel")


def test_catchup_window_default_and_floor() -> None:
    assert parse_catchup_window(None) == DEFAULT_CATCHUP_WINDOW == timedelta(minutes=10)
    assert parse_catchup_window("1h") == timedelta(hours=1)
    with pytest.raises(ScheduleSpecError, match="too short: the shortest is 10s"):
        parse_catchup_window("5s")


def test_schedule_ids() -> None:
    assert check_schedule_id("daily-report.v2") == "daily-report.v2"
    assert firing_workflow_id("nightly") == "schedule:nightly"
    for bad in ("", "-x", "a b", "a/b", "a..b", "x" * 129):
        with pytest.raises(InvalidScheduleId, match="invalid schedule id"):
            check_schedule_id(bad)
