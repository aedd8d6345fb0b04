"""Tool-loop detection (SPEC §14): is the agent repeating tool calls without making progress?

Pure functions over the run's `LoopState`; no I/O and no Temporal import, so the run workflow
calls them directly and carries the state across continue-as-new. Hashes come from
`agentlane.tool_signatures` (activities hash outcomes, the workflow hashes calls).

How the workflow uses it, per tool call:

1. `check_call` before scheduling the call. A CRITICAL verdict blocks the call: the tool is not
   run, its result is an error carrying `verdict.message`, and the call is *not* recorded (as in
   the original, so the block stays in force while the history is unchanged). A WARNING is
   passed through `warning_to_emit`, which says whether this warning is new enough to show.
2. `record_call` for every call that goes ahead.
3. `record_outcome` once the tool has finished, with the activity's outcome hash.

Differences from the original: detection is on by default (an unattended 48 h run must not burn
its budget in a loop); call signatures and outcome hashes are truncated SHA-256 (see
`agentlane.tool_signatures`). Messages, warning keys, thresholds and the order of the checks are
the original's. As there, the global circuit breaker ignores the detector switches, and the
warning buckets mean a warning raised below a count of 10 (custom thresholds) is never emitted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from agentlane.loop_detection_config import (
    DEFAULT_BREAKER,
    DEFAULT_CRITICAL,
    DEFAULT_HISTORY_SIZE,
    DEFAULT_WARNING,
    LoopDetectionConfig,
)

__all__ = [
    "WARNING_BUCKET_SIZE",
    "MAX_WARNING_KEYS",
    "LoopDetectionConfig",
    "LoopDetector",
    "LoopLevel",
    "LoopState",
    "LoopVerdict",
    "ToolCallRecord",
    "check_call",
    "effective_history_size",
    "effective_thresholds",
    "record_call",
    "record_outcome",
    "warning_to_emit",
]

WARNING_BUCKET_SIZE = 10
MAX_WARNING_KEYS = 256

# The config is a contract (session settings carry it), so it lives in agentlane/.
_DEFAULT_HISTORY_SIZE = DEFAULT_HISTORY_SIZE
_DEFAULT_WARNING = DEFAULT_WARNING
_DEFAULT_CRITICAL = DEFAULT_CRITICAL
_DEFAULT_BREAKER = DEFAULT_BREAKER


def effective_thresholds(config: LoopDetectionConfig) -> tuple[int, int, int]:
    """(warning, critical, breaker), forced strictly increasing so every level is reachable."""
    warning = _positive_or(config.warning_threshold, _DEFAULT_WARNING)
    critical = _positive_or(config.critical_threshold, _DEFAULT_CRITICAL)
    breaker = _positive_or(config.global_circuit_breaker_threshold, _DEFAULT_BREAKER)
    if critical <= warning:
        critical = warning + 1
    if breaker <= critical:
        breaker = critical + 1
    return warning, critical, breaker


def effective_history_size(config: LoopDetectionConfig) -> int:
    return _positive_or(config.history_size, _DEFAULT_HISTORY_SIZE)


def _positive_or(value: int, default: int) -> int:
    return value if value > 0 else default


class ToolCallRecord(BaseModel):
    """One call in the sliding window. Only short hashes: the window rides in history."""

    model_config = ConfigDict(frozen=True)

    tool_name: str
    signature: str
    call_id: str | None = None
    result_hash: str | None = None
    # Informational (for inspection); detection takes the current call's flag as an argument.
    known_poll: bool = False

    @property
    def key(self) -> str:
        """Name and signature together identify a call, spelled as the original's args hash."""
        return _call_key(self.tool_name, self.signature)


class LoopState(BaseModel):
    """The run's loop-detection memory. Functions here return new states, never mutate one."""

    model_config = ConfigDict(frozen=True)

    records: list[ToolCallRecord] = Field(default_factory=list)
    # Warning key -> last bucket emitted, oldest key first (insertion order is the eviction
    # order, and re-emitting under a known key keeps its place, as with the original's Map).
    warned: dict[str, int] = Field(default_factory=dict)


class LoopLevel(StrEnum):
    NONE = "none"
    WARNING = "warning"
    CRITICAL = "critical"


class LoopDetector(StrEnum):
    GENERIC_REPEAT = "generic_repeat"
    KNOWN_POLL_NO_PROGRESS = "known_poll_no_progress"
    GLOBAL_CIRCUIT_BREAKER = "global_circuit_breaker"
    PING_PONG = "ping_pong"


class LoopVerdict(BaseModel):
    model_config = ConfigDict(frozen=True)

    level: LoopLevel = LoopLevel.NONE
    detector: LoopDetector | None = None
    count: int = 0
    message: str = ""
    warning_key: str | None = None
    # For ping-pong: the tool of the other side of the alternation.
    paired_tool_name: str | None = None

    @property
    def stuck(self) -> bool:
        return self.level != LoopLevel.NONE

    @property
    def blocked(self) -> bool:
        return self.level == LoopLevel.CRITICAL


NOT_STUCK = LoopVerdict()


# --- checking a call ----------------------------------------------------------------------


@dataclass(frozen=True)
class _Call:
    """Everything the detectors need about the call about to be made."""

    tool_name: str
    key: str
    known_poll: bool
    records: Sequence[ToolCallRecord]
    config: LoopDetectionConfig
    warning: int
    critical: int
    breaker: int
    streak: int
    latest_result: str | None


def check_call(
    state: LoopState,
    tool_name: str,
    signature: str,
    known_poll: bool,
    config: LoopDetectionConfig,
) -> LoopVerdict:
    """Verdict on calling `tool_name` with `signature` next; the first detector that fires wins,
    in SPEC §14's order."""
    if not config.enabled:
        return NOT_STUCK
    key = _call_key(tool_name, signature)
    streak, latest = _no_progress_streak(state.records, key)
    warning, critical, breaker = effective_thresholds(config)
    call = _Call(
        tool_name=tool_name,
        key=key,
        known_poll=known_poll,
        records=state.records,
        config=config,
        warning=warning,
        critical=critical,
        breaker=breaker,
        streak=streak,
        latest_result=latest,
    )
    for detector in _DETECTORS:
        verdict = detector(call)
        if verdict is not None:
            return verdict
    return NOT_STUCK


def _global_circuit_breaker(call: _Call) -> LoopVerdict | None:
    # Deliberately not behind any detector switch: the last line of defence for any tool.
    if call.streak < call.breaker:
        return None
    return LoopVerdict(
        level=LoopLevel.CRITICAL,
        detector=LoopDetector.GLOBAL_CIRCUIT_BREAKER,
        count=call.streak,
        message=(
            f"CRITICAL: {call.tool_name} has repeated identical no-progress outcomes "
            f"{call.streak} times. Session execution blocked by global circuit breaker to "
            "prevent runaway loops."
        ),
        warning_key=f"global:{call.tool_name}:{call.key}:{call.latest_result or 'none'}",
    )


def _known_poll_no_progress(call: _Call) -> LoopVerdict | None:
    if not (call.known_poll and call.config.known_poll_no_progress):
        return None
    key = f"poll:{call.tool_name}:{call.key}:{call.latest_result or 'none'}"
    if call.streak >= call.critical:
        return LoopVerdict(
            level=LoopLevel.CRITICAL,
            detector=LoopDetector.KNOWN_POLL_NO_PROGRESS,
            count=call.streak,
            message=(
                f"CRITICAL: Called {call.tool_name} with identical arguments and no progress "
                f"{call.streak} times. This appears to be a stuck polling loop. Session "
                "execution blocked to prevent resource waste."
            ),
            warning_key=key,
        )
    if call.streak >= call.warning:
        return LoopVerdict(
            level=LoopLevel.WARNING,
            detector=LoopDetector.KNOWN_POLL_NO_PROGRESS,
            count=call.streak,
            message=(
                f"WARNING: You have called {call.tool_name} {call.streak} times with identical "
                "arguments and no progress. Stop polling and either (1) increase wait time "
                "between checks, or (2) report the task as failed if the process is stuck."
            ),
            warning_key=key,
        )
    return None


def _ping_pong(call: _Call) -> LoopVerdict | None:
    if not call.config.ping_pong:
        return None
    alternation = _alternation(call.records, call.key)
    if alternation is None:
        return None
    count = alternation.count
    key = "pingpong:" + "|".join(sorted((call.key, alternation.paired_key)))
    if count >= call.critical and alternation.no_progress:
        return LoopVerdict(
            level=LoopLevel.CRITICAL,
            detector=LoopDetector.PING_PONG,
            count=count,
            message=(
                "CRITICAL: You are alternating between repeated tool-call patterns "
                f"({count} consecutive calls) with no progress. This appears to be a stuck "
                "ping-pong loop. Session execution blocked to prevent resource waste."
            ),
            warning_key=key,
            paired_tool_name=alternation.paired_tool_name,
        )
    if count >= call.warning:
        return LoopVerdict(
            level=LoopLevel.WARNING,
            detector=LoopDetector.PING_PONG,
            count=count,
            message=(
                "WARNING: You are alternating between repeated tool-call patterns "
                f"({count} consecutive calls). This looks like a ping-pong loop; stop retrying "
                "and report the task as failed."
            ),
            warning_key=key,
            paired_tool_name=alternation.paired_tool_name,
        )
    return None


def _generic_repeat(call: _Call) -> LoopVerdict | None:
    # Warn only: identical arguments can be legitimate (re-reading a file that changes), and
    # repeats with identical outcomes are left to the global breaker.
    if call.known_poll or not call.config.generic_repeat:
        return None
    count = sum(1 for record in call.records if record.key == call.key)
    if count < call.warning:
        return None
    return LoopVerdict(
        level=LoopLevel.WARNING,
        detector=LoopDetector.GENERIC_REPEAT,
        count=count,
        message=(
            f"WARNING: You have called {call.tool_name} {count} times with identical arguments. "
            "If this is not making progress, stop retrying and report the task as failed."
        ),
        warning_key=f"generic:{call.tool_name}:{call.key}",
    )


_DETECTORS: tuple[Callable[[_Call], LoopVerdict | None], ...] = (
    _global_circuit_breaker,
    _known_poll_no_progress,
    _ping_pong,
    _generic_repeat,
)


def _call_key(tool_name: str, signature: str) -> str:
    return f"{tool_name}:{signature}"


def _no_progress_streak(records: Sequence[ToolCallRecord], key: str) -> tuple[int, str | None]:
    """How many of the latest finished calls with this key returned the latest outcome, and
    that outcome. Other calls in between do not break the streak; calls still running are
    skipped."""
    streak = 0
    latest: str | None = None
    for record in reversed(records):
        if record.key != key or not record.result_hash:
            continue
        if latest is None:
            latest = record.result_hash
        elif record.result_hash != latest:
            break
        streak += 1
    return streak, latest


@dataclass(frozen=True)
class _Alternation:
    count: int
    paired_key: str
    paired_tool_name: str
    no_progress: bool


def _alternation(records: Sequence[ToolCallRecord], current_key: str) -> _Alternation | None:
    """The A,B,A,B… tail ending with the last record (A), if the call about to be made is B
    and the tail holds at least two calls. Its count includes the call about to be made."""
    if not records:
        return None
    last = records[-1]
    other = next((r for r in reversed(records[:-1]) if r.key != last.key), None)
    if other is None or current_key != other.key:
        return None
    tail = _alternating_tail(records, last.key, other.key)
    if len(tail) < 2:
        return None
    return _Alternation(
        count=len(tail) + 1,
        paired_key=last.key,
        paired_tool_name=last.tool_name,
        no_progress=_each_side_repeats_one_outcome(tail),
    )


def _alternating_tail(
    records: Sequence[ToolCallRecord], key_a: str, key_b: str
) -> list[ToolCallRecord]:
    tail: list[ToolCallRecord] = []
    for record in reversed(records):
        expected = key_a if len(tail) % 2 == 0 else key_b
        if record.key != expected:
            break
        tail.append(record)
    tail.reverse()
    return tail


def _each_side_repeats_one_outcome(tail: Sequence[ToolCallRecord]) -> bool:
    """No-progress evidence: every call in the tail finished, and each side always got the
    same outcome. A call still running is no evidence either way, so it cannot block."""
    outcomes: dict[str, set[str]] = {}
    for record in tail:
        if not record.result_hash:
            return False
        outcomes.setdefault(record.key, set()).add(record.result_hash)
    return len(outcomes) == 2 and all(len(seen) == 1 for seen in outcomes.values())


# --- recording ----------------------------------------------------------------------------


def record_call(
    state: LoopState,
    tool_name: str,
    signature: str,
    call_id: str | None = None,
    known_poll: bool = False,
    config: LoopDetectionConfig | None = None,
) -> LoopState:
    """`state` with the call appended to the sliding window (its outcome not yet known)."""
    record = ToolCallRecord(
        tool_name=tool_name, signature=signature, call_id=call_id, known_poll=known_poll
    )
    return _with_records(state, [*state.records, record], config)


def record_outcome(
    state: LoopState,
    call_id: str | None,
    tool_name: str,
    signature: str,
    result_hash: str,
    config: LoopDetectionConfig | None = None,
) -> LoopState:
    """`state` with `result_hash` attached to the most recent unresolved record of this call
    (with this call id, when one is given). When none is left (the window slid past it), the
    outcome is appended as a record of its own so the streak still sees it."""
    records = list(state.records)
    key = _call_key(tool_name, signature)
    for index in range(len(records) - 1, -1, -1):
        record = records[index]
        if call_id and record.call_id != call_id:
            continue
        if record.key != key or record.result_hash is not None:
            continue
        records[index] = record.model_copy(update={"result_hash": result_hash})
        return _with_records(state, records, config)
    records.append(
        ToolCallRecord(
            tool_name=tool_name, signature=signature, call_id=call_id, result_hash=result_hash
        )
    )
    return _with_records(state, records, config)


def _with_records(
    state: LoopState, records: list[ToolCallRecord], config: LoopDetectionConfig | None
) -> LoopState:
    size = effective_history_size(config or LoopDetectionConfig())
    return state.model_copy(update={"records": records[-size:]})


# --- warning de-duplication ---------------------------------------------------------------


def warning_to_emit(state: LoopState, verdict: LoopVerdict) -> tuple[bool, LoopState]:
    """Whether to show this warning, and the state that remembers it was shown.

    A warning key is shown once per bucket of `WARNING_BUCKET_SIZE` (at counts 10, 20, 30…),
    so a loop that keeps going is reported again as it grows rather than on every call. At
    most `MAX_WARNING_KEYS` keys are remembered; the oldest is forgotten first. Critical
    verdicts are not warnings: they block every time.
    """
    if verdict.level != LoopLevel.WARNING:
        return False, state
    key = verdict.warning_key or f"{verdict.detector}"
    bucket = verdict.count // WARNING_BUCKET_SIZE
    if bucket <= state.warned.get(key, 0):
        return False, state
    warned = dict(state.warned)
    warned[key] = bucket
    if len(warned) > MAX_WARNING_KEYS:
        del warned[next(iter(warned))]
    return True, state.model_copy(update={"warned": warned})
