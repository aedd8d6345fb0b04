"""Tool-loop detection (SPEC §14, §18.10 T62/T63) and the hashes it runs on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentlane.tool_signatures import (
    HASH_HEX_CHARS,
    call_signature,
    is_known_poll,
    outcome_hash,
    stable_json,
)
from tests.unit.import_probe import imported_with
from workflows.policy.loop_detection import (
    MAX_WARNING_KEYS,
    LoopDetectionConfig,
    LoopDetector,
    LoopLevel,
    LoopState,
    LoopVerdict,
    check_call,
    effective_thresholds,
    record_call,
    record_outcome,
    warning_to_emit,
)
from workflows.policy.run_limits import turn_limit_reached

REPO_ROOT = Path(__file__).resolve().parents[2]

ENABLED = LoopDetectionConfig()
WARNING, CRITICAL, BREAKER, HISTORY = 10, 20, 30, 30

READ = {"path": "/same.txt"}
POLL = {"action": "poll", "sessionId": "sess-1"}
POLL_TEXT = "(no new output)\n\nProcess still running."
POLL_DETAILS = {"status": "running", "aggregated": "steady"}


def check(
    state: LoopState, tool: str, params: dict[str, Any], config: LoopDetectionConfig = ENABLED
) -> LoopVerdict:
    return check_call(
        state, tool, call_signature(tool, params), is_known_poll(tool, params), config
    )


def call(
    state: LoopState,
    tool: str,
    params: dict[str, Any],
    index: int,
    config: LoopDetectionConfig = ENABLED,
) -> LoopState:
    """A call that is still running (no outcome yet)."""
    signature = call_signature(tool, params)
    known_poll = is_known_poll(tool, params)
    return record_call(state, tool, signature, f"{tool}-{index}", known_poll, config)


def finished(
    state: LoopState,
    tool: str,
    params: dict[str, Any],
    index: int,
    *,
    text: str,
    details: Any = None,
    config: LoopDetectionConfig = ENABLED,
) -> LoopState:
    state = call(state, tool, params, index, config)
    result = outcome_hash(tool, params, text=text, details=details)
    return record_outcome(
        state, f"{tool}-{index}", tool, call_signature(tool, params), result, config
    )


def repeated(
    tool: str,
    params: dict[str, Any],
    count: int,
    *,
    text: str = "same output",
    details: Any = None,
    state: LoopState | None = None,
    start: int = 0,
) -> LoopState:
    state = state or LoopState()
    for index in range(start, start + count):
        state = finished(state, tool, params, index, text=text, details=details)
    return state


def polls(count: int, state: LoopState | None = None, start: int = 0) -> LoopState:
    return repeated(
        "process", POLL, count, text=POLL_TEXT, details=POLL_DETAILS, state=state, start=start
    )


def ping_pong(count: int, text: Any = None, *, finish: bool = True) -> LoopState:
    """`count` calls alternating read /a.txt and list /workspace, starting with read."""
    state = LoopState()
    for index in range(count):
        tool, params = ("read", {"path": "/a.txt"}) if index % 2 == 0 else ("list", {"dir": "/w"})
        if not finish:
            state = call(state, tool, params, index)
            continue
        output = f"{tool} stable" if text is None else text(tool, index)
        state = finished(state, tool, params, index, text=output, details={"ok": True})
    return state


LIST = {"dir": "/w"}


# --- §18.10 T62 -----------------------------------------------------------------------------


def test_t62_disabled_never_stuck() -> None:
    state = LoopState()
    for index in range(20):
        state = call(state, "read", READ, index)
    assert not check(state, "read", READ, LoopDetectionConfig(enabled=False)).stuck


def test_t62_generic_repeat_warns_at_ten() -> None:
    state = LoopState()
    for index in range(WARNING):
        state = call(state, "read", READ, index)
    verdict = check(state, "read", READ)
    assert verdict.level == LoopLevel.WARNING
    assert verdict.detector == LoopDetector.GENERIC_REPEAT
    assert verdict.count == WARNING
    assert "WARNING" in verdict.message
    assert "10 times" in verdict.message


def test_t62_generic_repeat_stays_warning_below_breaker() -> None:
    verdict = check(repeated("read", READ, CRITICAL), "read", READ)
    assert verdict.level == LoopLevel.WARNING
    assert verdict.detector == LoopDetector.GENERIC_REPEAT
    verdict = check(repeated("read", READ, BREAKER - 1), "read", READ)
    assert verdict.level == LoopLevel.WARNING


def test_t62_global_circuit_breaker_at_thirty() -> None:
    verdict = check(repeated("read", READ, BREAKER), "read", READ)
    assert verdict.level == LoopLevel.CRITICAL
    assert verdict.blocked
    assert verdict.detector == LoopDetector.GLOBAL_CIRCUIT_BREAKER
    assert verdict.count == BREAKER
    assert "global circuit breaker" in verdict.message


# --- §18.10 T63 -----------------------------------------------------------------------------


def test_t63_known_poll_warns_at_ten() -> None:
    verdict = check(polls(WARNING), "process", POLL)
    assert verdict.level == LoopLevel.WARNING
    assert verdict.detector == LoopDetector.KNOWN_POLL_NO_PROGRESS
    assert verdict.count == WARNING
    assert "no progress" in verdict.message


def test_t63_known_poll_blocks_at_twenty() -> None:
    verdict = check(polls(CRITICAL), "process", POLL)
    assert verdict.level == LoopLevel.CRITICAL
    assert verdict.detector == LoopDetector.KNOWN_POLL_NO_PROGRESS
    assert "CRITICAL" in verdict.message


def test_t63_progressing_poll_is_not_stuck() -> None:
    state = LoopState()
    for index in range(CRITICAL + 5):
        line = f"line {index}"
        details = {"status": "running", "aggregated": line}
        state = finished(state, "process", POLL, index, text=line, details=details)
    assert not check(state, "process", POLL).stuck


def test_t63_custom_thresholds() -> None:
    config = LoopDetectionConfig(
        warning_threshold=2, critical_threshold=4, generic_repeat=False, ping_pong=False
    )
    state = polls(2)
    verdict = check(state, "process", POLL, config)
    assert verdict.level == LoopLevel.WARNING
    state = polls(2, state, start=2)
    verdict = check(state, "process", POLL, config)
    assert verdict.level == LoopLevel.CRITICAL
    assert verdict.detector == LoopDetector.KNOWN_POLL_NO_PROGRESS


def test_t63_all_detectors_disabled() -> None:
    config = LoopDetectionConfig(
        generic_repeat=False, known_poll_no_progress=False, ping_pong=False
    )
    assert not check(polls(CRITICAL), "process", POLL, config).stuck


# --- configuration ------------------------------------------------------------------------------


def test_enabled_by_default_unlike_the_original() -> None:
    assert LoopDetectionConfig().enabled


@pytest.mark.parametrize(
    ("thresholds", "expected"),
    [
        pytest.param((10, 20, 30), (10, 20, 30), id="defaults"),
        pytest.param((10, 10, 10), (10, 11, 12), id="equal"),
        pytest.param((5, 3, 4), (5, 6, 7), id="decreasing"),
        pytest.param((2, 4, 100), (2, 4, 100), id="custom"),
        pytest.param((0, -1, 0), (10, 20, 30), id="non-positive-means-default"),
        pytest.param((25, 0, 0), (25, 26, 30), id="warning-above-default-critical"),
    ],
)
def test_thresholds_forced_increasing(
    thresholds: tuple[int, int, int], expected: tuple[int, int, int]
) -> None:
    warning, critical, breaker = thresholds
    config = LoopDetectionConfig(
        warning_threshold=warning,
        critical_threshold=critical,
        global_circuit_breaker_threshold=breaker,
    )
    assert effective_thresholds(config) == expected


def test_generic_repeat_switch() -> None:
    state = LoopState()
    for index in range(WARNING):
        state = call(state, "read", READ, index)
    assert not check(state, "read", READ, LoopDetectionConfig(generic_repeat=False)).stuck


def test_known_poll_switch() -> None:
    # A known poll is never a generic repeat, so with its own detector off nothing fires.
    config = LoopDetectionConfig(known_poll_no_progress=False)
    assert not check(polls(CRITICAL), "process", POLL, config).stuck


def test_ping_pong_switch() -> None:
    assert not check(
        ping_pong(CRITICAL - 1), "list", LIST, LoopDetectionConfig(ping_pong=False)
    ).stuck


def test_global_breaker_ignores_detector_switches() -> None:
    config = LoopDetectionConfig(
        generic_repeat=False, known_poll_no_progress=False, ping_pong=False
    )
    verdict = check(polls(BREAKER), "process", POLL, config)
    assert verdict.detector == LoopDetector.GLOBAL_CIRCUIT_BREAKER


# --- detection ------------------------------------------------------------------------------


def test_empty_history_is_not_stuck() -> None:
    assert not check(LoopState(), "tool", {"arg": 1}).stuck


def test_unique_calls_are_not_stuck() -> None:
    state = LoopState()
    for index in range(15):
        state = call(state, "read", {"path": f"/file{index}.txt"}, index)
    assert not check(state, "read", {"path": "/new.txt"}).stuck


def test_changing_outcomes_never_block() -> None:
    state = LoopState()
    for index in range(3 * BREAKER):
        verdict = check(state, "read", READ)
        assert not verdict.blocked, index
        state = finished(state, "read", READ, index, text=f"content {index}")
    assert check(state, "read", READ).level == LoopLevel.WARNING


def test_streak_counts_only_the_latest_outcome() -> None:
    state = repeated("read", READ, BREAKER - 5, text="old")
    state = repeated("read", READ, 5, text="new", state=state, start=BREAKER)
    assert check(state, "read", READ).level == LoopLevel.WARNING


def test_streak_skips_other_calls_and_running_ones() -> None:
    state = LoopState()
    for index in range(BREAKER):
        state = finished(state, "read", READ, index, text="same")
        state = call(state, "read", READ, 1000 + index)  # never finishes
    # The window holds the last 30 records: 15 finished, 15 still running.
    assert len(state.records) == HISTORY
    config = LoopDetectionConfig(
        warning_threshold=5, critical_threshold=10, global_circuit_breaker_threshold=15
    )
    verdict = check(state, "read", READ, config)
    assert verdict.detector == LoopDetector.GLOBAL_CIRCUIT_BREAKER
    assert verdict.count == 15


def test_errors_with_one_message_are_no_progress() -> None:
    state = LoopState()
    signature = call_signature("read", READ)
    for index in range(BREAKER):
        state = record_call(state, "read", signature, f"r{index}")
        failure = outcome_hash(
            "read", READ, text="", is_error=True, error_message="ENOENT: no such file"
        )
        state = record_outcome(state, f"r{index}", "read", signature, failure)
    assert check(state, "read", READ).detector == LoopDetector.GLOBAL_CIRCUIT_BREAKER


def test_blocked_call_stays_blocked_while_history_is_unchanged() -> None:
    # The workflow records no call it blocked, so asking again gives the same verdict.
    state = polls(CRITICAL)
    assert check(state, "process", POLL).blocked
    assert check(state, "process", POLL).blocked


def test_ping_pong_warns_without_outcomes() -> None:
    verdict = check(ping_pong(WARNING - 1, finish=False), "list", LIST)
    assert verdict.level == LoopLevel.WARNING
    assert verdict.detector == LoopDetector.PING_PONG
    assert verdict.count == WARNING
    assert verdict.paired_tool_name == "read"
    assert "ping-pong loop" in verdict.message


def test_ping_pong_critical_needs_no_progress_evidence() -> None:
    verdict = check(ping_pong(CRITICAL - 1), "list", LIST)
    assert verdict.level == LoopLevel.CRITICAL
    assert verdict.detector == LoopDetector.PING_PONG
    assert verdict.count == CRITICAL
    assert "CRITICAL" in verdict.message
    assert "ping-pong loop" in verdict.message


def test_ping_pong_with_progress_stays_warning() -> None:
    verdict = check(ping_pong(CRITICAL - 1, lambda tool, i: f"{tool} {i}"), "list", LIST)
    assert verdict.level == LoopLevel.WARNING
    assert verdict.count == CRITICAL


def test_ping_pong_with_a_running_call_stays_warning() -> None:
    state = ping_pong(CRITICAL - 2)
    state = call(state, "read", {"path": "/a.txt"}, 999)
    verdict = check(state, "list", LIST)
    assert verdict.level == LoopLevel.WARNING
    assert verdict.count == CRITICAL


def test_ping_pong_requires_current_call_to_be_the_other_side() -> None:
    state = ping_pong(WARNING - 1)  # ends with read
    assert not check(state, "read", {"path": "/a.txt"}).stuck
    assert not check(state, "write", {"path": "/x"}).stuck


def test_ping_pong_broken_alternation() -> None:
    state = LoopState()
    state = call(state, "read", {"path": "/a.txt"}, 1)
    state = call(state, "list", LIST, 2)
    state = call(state, "read", {"path": "/a.txt"}, 3)
    state = call(state, "write", {"path": "/tmp/out.txt"}, 4)
    assert not check(state, "list", LIST).stuck


def test_ping_pong_needs_a_tail_of_two() -> None:
    state = call(LoopState(), "read", {"path": "/a.txt"}, 1)
    assert not check(state, "list", LIST, LoopDetectionConfig(warning_threshold=1)).stuck
    state = call(state, "list", LIST, 2)
    verdict = check(state, "read", {"path": "/a.txt"}, LoopDetectionConfig(warning_threshold=1))
    assert verdict.detector == LoopDetector.PING_PONG
    assert verdict.count == 3


def test_ping_pong_warning_key_is_the_same_from_both_sides() -> None:
    from_list = check(ping_pong(WARNING - 1), "list", LIST)
    from_read = check(ping_pong(WARNING), "read", {"path": "/a.txt"})
    assert from_list.warning_key is not None
    assert from_list.warning_key.startswith("pingpong:")
    assert from_list.warning_key == from_read.warning_key


def test_warning_keys_follow_the_original() -> None:
    signature = call_signature("read", READ)
    state = LoopState()
    for index in range(WARNING):
        state = call(state, "read", READ, index)
    assert check(state, "read", READ).warning_key == f"generic:read:read:{signature}"
    poll_signature = call_signature("process", POLL)
    poll_result = outcome_hash("process", POLL, text=POLL_TEXT, details=POLL_DETAILS)
    verdict = check(polls(WARNING), "process", POLL)
    assert verdict.warning_key == f"poll:process:process:{poll_signature}:{poll_result}"
    verdict = check(repeated("read", READ, BREAKER), "read", READ)
    assert verdict.warning_key is not None
    assert verdict.warning_key.startswith(f"global:read:read:{signature}:")


def test_messages_follow_the_original() -> None:
    assert check(repeated("read", READ, BREAKER), "read", READ).message == (
        "CRITICAL: read has repeated identical no-progress outcomes 30 times. Session "
        "execution blocked by global circuit breaker to prevent runaway loops."
    )
    assert check(polls(CRITICAL), "process", POLL).message == (
        "CRITICAL: Called process with identical arguments and no progress 20 times. This "
        "appears to be a stuck polling loop. Session execution blocked to prevent resource waste."
    )
    assert check(polls(WARNING), "process", POLL).message == (
        "WARNING: You have called process 10 times with identical arguments and no progress. "
        "Stop polling and either (1) increase wait time between checks, or (2) report the task "
        "as failed if the process is stuck."
    )
    assert check(ping_pong(CRITICAL - 1), "list", LIST).message == (
        "CRITICAL: You are alternating between repeated tool-call patterns (20 consecutive "
        "calls) with no progress. This appears to be a stuck ping-pong loop. Session execution "
        "blocked to prevent resource waste."
    )
    assert check(ping_pong(WARNING - 1, finish=False), "list", LIST).message == (
        "WARNING: You are alternating between repeated tool-call patterns (10 consecutive "
        "calls). This looks like a ping-pong loop; stop retrying and report the task as failed."
    )
    assert check(repeated("read", READ, WARNING), "read", READ).message == (
        "WARNING: You have called read 10 times with identical arguments. If this is not making "
        "progress, stop retrying and report the task as failed."
    )


# --- recording ------------------------------------------------------------------------------


def test_history_window_slides() -> None:
    state = LoopState()
    for index in range(HISTORY + 10):
        state = call(state, "tool", {"iteration": index}, index)
    assert len(state.records) == HISTORY
    assert state.records[0].signature == call_signature("tool", {"iteration": 10})


def test_history_size_is_configurable() -> None:
    config = LoopDetectionConfig(history_size=4)
    state = LoopState()
    for index in range(10):
        state = call(state, "tool", {"iteration": index}, index, config)
    assert [r.call_id for r in state.records] == ["tool-6", "tool-7", "tool-8", "tool-9"]


def test_old_repeats_slide_out_of_the_window() -> None:
    state = LoopState()
    for index in range(WARNING):
        state = call(state, "read", READ, index)
    for index in range(HISTORY - WARNING + 1):
        state = call(state, "read", {"path": f"/other{index}"}, 100 + index)
    assert check(state, "read", READ).count == 0


def test_recording_returns_new_states() -> None:
    before = LoopState()
    after = call(before, "read", READ, 1)
    assert before.records == []
    assert len(after.records) == 1


def test_outcome_goes_to_the_matching_call_id() -> None:
    signature = call_signature("read", READ)
    state = record_call(LoopState(), "read", signature, "a")
    state = record_call(state, "read", signature, "b")
    state = record_outcome(state, "a", "read", signature, "h1")
    assert [(r.call_id, r.result_hash) for r in state.records] == [("a", "h1"), ("b", None)]


def test_outcome_without_id_goes_to_the_latest_unresolved_call() -> None:
    signature = call_signature("read", READ)
    state = record_call(LoopState(), "read", signature, "a")
    state = record_call(state, "read", signature, "b")
    state = record_call(state, "list", call_signature("list", LIST), "c")
    state = record_outcome(state, None, "read", signature, "h1")
    state = record_outcome(state, None, "read", signature, "h2")
    assert [r.result_hash for r in state.records] == ["h2", "h1", None]


def test_unmatched_outcome_is_appended_and_trimmed() -> None:
    config = LoopDetectionConfig(history_size=2)
    signature = call_signature("read", READ)
    state = record_call(LoopState(), "list", call_signature("list", LIST), "x", config=config)
    state = record_call(state, "read", signature, "a", config=config)
    state = record_outcome(state, "a", "read", signature, "h1", config)
    state = record_outcome(state, "gone", "read", signature, "h2", config)
    assert [(r.call_id, r.result_hash) for r in state.records] == [("a", "h1"), ("gone", "h2")]


def test_state_survives_a_json_round_trip() -> None:
    state = polls(3)
    _, state = warning_to_emit(state, _warning("k2", 10))
    _, state = warning_to_emit(state, _warning("k1", 10))
    copy = LoopState.model_validate_json(state.model_dump_json())
    assert copy == state
    assert list(copy.warned) == ["k2", "k1"]


# --- warning de-duplication -------------------------------------------------------------------


def _warning(key: str, count: int) -> LoopVerdict:
    return LoopVerdict(
        level=LoopLevel.WARNING, detector=LoopDetector.GENERIC_REPEAT, count=count, warning_key=key
    )


def test_warnings_emit_once_per_bucket_of_ten() -> None:
    state = LoopState()
    emitted = []
    for count in range(1, 36):
        emit, state = warning_to_emit(state, _warning("k", count))
        if emit:
            emitted.append(count)
    assert emitted == [10, 20, 30]


def test_warning_buckets_in_a_real_loop() -> None:
    state = LoopState()
    emitted = []
    for index in range(40):
        verdict = check(state, "read", READ)
        emit, state = warning_to_emit(state, verdict)
        if emit:
            emitted.append(verdict.count)
        state = call(state, "read", READ, index)
    # The window holds 30 calls, so the count stops at 30.
    assert emitted == [10, 20, 30]


def test_warnings_below_ten_are_never_emitted() -> None:
    # The original's quirk with custom thresholds: count 2 falls in bucket 0.
    emit, _ = warning_to_emit(LoopState(), _warning("k", 2))
    assert not emit


def test_separate_keys_have_separate_buckets() -> None:
    emit_a, state = warning_to_emit(LoopState(), _warning("a", 10))
    emit_b, state = warning_to_emit(state, _warning("b", 10))
    emit_a_again, state = warning_to_emit(state, _warning("a", 15))
    assert (emit_a, emit_b, emit_a_again) == (True, True, False)


def test_critical_and_none_are_not_warnings() -> None:
    critical = LoopVerdict(level=LoopLevel.CRITICAL, count=20, warning_key="k")
    state = LoopState()
    assert warning_to_emit(state, critical) == (False, state)
    assert warning_to_emit(state, LoopVerdict()) == (False, state)


def test_at_most_256_warning_keys() -> None:
    state = LoopState()
    for index in range(MAX_WARNING_KEYS):
        _, state = warning_to_emit(state, _warning(f"k{index}", 10))
    # A repeat under a known key keeps the key's place in the eviction order.
    _, state = warning_to_emit(state, _warning("k0", 20))
    _, state = warning_to_emit(state, _warning("new", 10))
    assert len(state.warned) == MAX_WARNING_KEYS
    assert "k0" not in state.warned
    assert "k1" in state.warned
    assert state.warned["new"] == 1
    # The forgotten key is shown again.
    emit, _ = warning_to_emit(state, _warning("k0", 10))
    assert emit


# --- signatures and outcome hashes ----------------------------------------------------------


def test_signature_is_stable_and_key_order_independent() -> None:
    first = call_signature("tool", {"a": 1, "b": {"x": [1, 2], "y": None}})
    second = call_signature("tool", {"b": {"y": None, "x": [1, 2]}, "a": 1})
    assert first == second
    assert first == call_signature("tool", {"a": 1, "b": {"x": [1, 2], "y": None}})


def test_signature_differs_with_params() -> None:
    assert call_signature("read", {"path": "/1"}) != call_signature("read", {"path": "/2"})
    assert call_signature("read", {"x": [1, 2]}) != call_signature("read", {"x": [2, 1]})
    assert call_signature("read", {"x": 1}) != call_signature("read", {"x": "1"})


def test_same_params_on_different_tools_are_different_calls() -> None:
    state = LoopState()
    for index in range(WARNING):
        state = call(state, "read", READ, index)
    assert not check(state, "write", READ).stuck


def test_signature_is_short_and_fixed_size() -> None:
    signature = call_signature("read", {"data": "x" * 20_000})
    assert len(signature) == HASH_HEX_CHARS
    int(signature, 16)


def test_stable_json_is_compact_and_sorted() -> None:
    assert stable_json({"b": 1, "a": [1, {"d": 2, "c": "é"}]}) == '{"a":[1,{"c":"é","d":2}],"b":1}'
    assert stable_json((1, 2)) == "[1,2]"
    assert stable_json({1: "x"}) == '{"1":"x"}'


@pytest.mark.parametrize(
    ("tool", "params", "expected"),
    [
        ("command_status", {}, True),
        ("process", {"action": "poll"}, True),
        ("process", {"action": "log"}, True),
        ("process", {"action": "kill"}, False),
        ("process", {}, False),
        ("exec", {"action": "poll"}, False),
        ("read", {"path": "/x"}, False),
    ],
)
def test_known_polls(tool: str, params: dict[str, Any], expected: bool) -> None:
    assert is_known_poll(tool, params) is expected


def test_poll_outcome_hashes_only_progress_fields() -> None:
    base = {"status": "running", "aggregated": "steady", "exitCode": None}
    noisy = {**base, "sessionId": "s-2", "startedAt": 17, "pid": 42}
    assert outcome_hash("process", POLL, text="t", details=base) == outcome_hash(
        "process", POLL, text="t", details=noisy
    )
    for change in ({"status": "done"}, {"exitCode": 1}, {"exitSignal": "TERM"}):
        changed = {**base, **change}
        assert outcome_hash("process", POLL, text="t", details=base) != outcome_hash(
            "process", POLL, text="t", details=changed
        )
    assert outcome_hash("process", POLL, text="t", details={**base, "aggregated": "more"}) != (
        outcome_hash("process", POLL, text="t", details=base)
    )
    assert outcome_hash("process", POLL, text="a", details=base) != outcome_hash(
        "process", POLL, text="b", details=base
    )


def test_log_outcome_hashes_only_progress_fields() -> None:
    params = {"action": "log", "sessionId": "s"}
    base = {"status": "running", "totalLines": 3, "totalChars": 30, "truncated": False}
    noisy = {**base, "offset": 7, "sessionId": "other"}
    assert outcome_hash("process", params, text="t", details=base) == outcome_hash(
        "process", params, text="t", details=noisy
    )
    for change in ({"totalLines": 4}, {"totalChars": 31}, {"truncated": True}, {"exitCode": 0}):
        assert outcome_hash("process", params, text="t", details=base) != outcome_hash(
            "process", params, text="t", details={**base, **change}
        )


def test_poll_and_log_hash_differently() -> None:
    log = {"action": "log", "sessionId": "sess-1"}
    assert outcome_hash("process", POLL, text="t") != outcome_hash("process", log, text="t")


def test_other_outcomes_hash_details_and_text() -> None:
    assert outcome_hash("read", READ, text="x", details={"a": 1}) != outcome_hash(
        "read", READ, text="x", details={"a": 2}
    )
    assert outcome_hash("read", READ, text="x", details={"a": 1, "b": 2}) == outcome_hash(
        "read", READ, text="  x\n", details={"b": 2, "a": 1}
    )
    assert outcome_hash("read", READ, text="x") == outcome_hash("read", READ, text="x", details={})


def test_error_outcomes_hash_the_message_only() -> None:
    first = outcome_hash("read", READ, text="a", is_error=True, error_message="boom")
    second = outcome_hash("read", {"path": "/else"}, text="b", is_error=True, error_message="boom")
    assert first == second
    assert first.startswith("error:")
    assert first != outcome_hash("read", READ, text="a", is_error=True, error_message="other")
    assert outcome_hash("read", READ, text="boom", is_error=True) == first
    assert outcome_hash("read", READ, text="boom") != first


# --- turn limit -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("turns_done", "max_turns", "expected"),
    [
        (1000, None, False),
        (5, 0, False),
        (5, -1, False),
        (4, 5, False),
        (5, 5, True),
        (6, 5, True),
    ],
)
def test_turn_limit(turns_done: int, max_turns: int | None, expected: bool) -> None:
    assert turn_limit_reached(turns_done, max_turns) is expected


# --- sandbox --------------------------------------------------------------------------------


def test_modules_are_workflow_sandbox_safe() -> None:
    assert (
        imported_with(
            [
                "workflows.policy.loop_detection",
                "workflows.policy.run_limits",
                "agentlane.tool_signatures",
            ],
            ("activities", "httpx", "anthropic", "openai", "temporalio"),
        )
        == []
    )
