"""What the run loop does after a failed attempt (SPEC §4.4, §4.4.1, §4.4.2, §4.5, §4.6.5, §4.7).

Three layers, all pure (no I/O, no clock, no Temporal import):

* `resolve_failover_action` is the decision table of §4.4 (`failover-policy.ts`): stage and flags
  in, one of five table actions out.
* `decide_prompt_failure` / `decide_assistant_failure` run the exact handling order of §4.4.1 and
  §4.4.2 around that table (profile marking, rate-limit/overload rotation caps, thinking fallback,
  the single same-model idle-timeout retry) and return a typed `Decision` plus the counters as
  they stand afterwards. The workflow performs the decision (mark the profile, advance it, sleep,
  call the next activity, raise to the model-fallback layer, or end with the message).
* `decide_context_overflow` (§4.5) and `decide_retry_limit` (§4.7) cover the two other ways a run
  stops iterating. Context overflow never falls back to another model (§20.4).

Invariants (§20.2, §20.5, §20.6): a timed-out attempt rotates profiles but never marks one (no
cooldown); prompt-stage timeouts do not rotate; the loop is bounded by
`min(160, max(32, 24 + 8·candidates))`; rate-limit and overload rotations are capped (default 1)
before escalating to model fallback, and only when fallbacks are configured.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from enum import StrEnum

from agentlane.errors import FAILOVER_STATUS, FailoverReason
from workflows.policy.thinking_fallback import pick_fallback_thinking_level

R = FailoverReason

__all__ = [
    "ESCALATION_TEXTS",
    "CONTEXT_OVERFLOW_TEXT",
    "IDLE_TIMEOUT_TEXT",
    "MAX_OVERFLOW_COMPACTION_ATTEMPTS",
    "MAX_SAME_MODEL_IDLE_TIMEOUT_RETRIES",
    "MAX_TIMEOUT_COMPACTION_ATTEMPTS",
    "OVERLOADED_ESCALATION_TEXT",
    "RATE_LIMIT_ESCALATION_TEXT",
    "RETRY_LIMIT_TEXT",
    "ROLE_ORDERING_TEXT",
    "RUN_TIMEOUT_TEXT",
    "Decision",
    "DecisionKind",
    "FailoverCounters",
    "FailoverSettings",
    "FailureFacts",
    "OverflowFacts",
    "Stage",
    "TableAction",
    "TableDecision",
    "decide_assistant_failure",
    "decide_context_overflow",
    "decide_overflow_after_failed_compaction",
    "decide_prompt_failure",
    "decide_retry_limit",
    "failover_status",
    "merge_retry_failover_reason",
    "resolve_failover_action",
    "retry_limit_message",
    "run_loop_iteration_limit",
    "timeout_payload_text",
]

# §4.1 step 7: per-run constants.
MAX_TIMEOUT_COMPACTION_ATTEMPTS = 2
MAX_OVERFLOW_COMPACTION_ATTEMPTS = 3
MAX_SAME_MODEL_IDLE_TIMEOUT_RETRIES = 1
_ITERATION_FLOOR = 32
_ITERATION_CEILING = 160
_ITERATION_BASE = 24
_ITERATIONS_PER_CANDIDATE = 8

# User-facing texts (exact, from the original).
RATE_LIMIT_ESCALATION_TEXT = (
    "The AI service is temporarily rate-limited. Please try again in a moment."
)
OVERLOADED_ESCALATION_TEXT = (
    "The AI service is temporarily overloaded. Please try again in a moment."
)
# Said with what they leave out (workflows/policy/failure_text.py `escalation_text`).
ESCALATION_TEXTS = frozenset({RATE_LIMIT_ESCALATION_TEXT, OVERLOADED_ESCALATION_TEXT})
RETRY_LIMIT_TEXT = (
    "Request failed after repeated internal retries. Please try again, or use /new to start a "
    "fresh session."
)
IDLE_TIMEOUT_TEXT = (
    "The model did not produce a response before the LLM idle timeout. Please try again, or "
    "increase `agents.defaults.llm.idleTimeoutSeconds` in your config (set to 0 to disable)."
)
RUN_TIMEOUT_TEXT = (
    "Request timed out before a response was generated. Please try again, or increase "
    "`agents.defaults.timeoutSeconds` in your config."
)
CONTEXT_OVERFLOW_TEXT = (
    "Context overflow: prompt too large for the model. Try /reset (or /new) to start a fresh "
    "session, or use a larger-context model."
)
ROLE_ORDERING_TEXT = (
    "Message ordering conflict - please try again. If this persists, use /new to start a fresh "
    "session."
)
_TIMED_OUT_TEXT = "LLM request timed out."
_RATE_LIMITED_TEXT = "LLM request rate limited."
_UNAUTHORIZED_TEXT = "LLM request unauthorized."
_FAILED_TEXT = "LLM request failed."
_BILLING_TEXT = (
    "⚠️ API provider returned a billing error — your API key has run out of credits or has an "
    "insufficient balance. Check your provider's billing dashboard and top up or switch to a "
    "different API key."
)

# §4.4 retry_limit row: reasons that are not worth another model after the loop gave up.
_NOT_ESCALATED_AT_RETRY_LIMIT = frozenset(
    {R.TIMEOUT, R.MODEL_NOT_FOUND, R.FORMAT, R.SESSION_EXPIRED}
)


def failover_status(reason: FailoverReason | None) -> int | None:
    """HTTP status carried by a FailoverError of `reason` (SPEC §5.1); unknown/None → None."""
    return FAILOVER_STATUS.get(reason) if reason is not None else None


def run_loop_iteration_limit(candidate_count: int) -> int:
    """MAX_RUN_LOOP_ITERATIONS = min(160, max(32, 24 + max(1, candidates) × 8)) (SPEC §4.1, §20.5).

    `candidate_count` is the number of auth-profile candidates of the run (1 → 32, 2 → 40, …,
    ≥17 → 160).
    """
    scaled = _ITERATION_BASE + max(1, candidate_count) * _ITERATIONS_PER_CANDIDATE
    return min(_ITERATION_CEILING, max(_ITERATION_FLOOR, scaled))


# --------------------------------------------------------------------------------------------
# §4.4 decision table
# --------------------------------------------------------------------------------------------


class Stage(StrEnum):
    PROMPT = "prompt"
    ASSISTANT = "assistant"
    RETRY_LIMIT = "retry_limit"


class TableAction(StrEnum):
    CONTINUE_NORMAL = "continue_normal"
    ROTATE_PROFILE = "rotate_profile"
    FALLBACK_MODEL = "fallback_model"
    SURFACE_ERROR = "surface_error"
    RETURN_ERROR_PAYLOAD = "return_error_payload"


@dataclass(frozen=True)
class TableDecision:
    """One row of the §4.4 table: the action and the reason it carries (None where the original
    carries none: continue_normal, return_error_payload, or a surfaced error without reason)."""

    action: TableAction
    reason: FailoverReason | None = None


def resolve_failover_action(
    stage: Stage,
    *,
    fallback_configured: bool,
    failover_reason: FailoverReason | None,
    failover_failure: bool = False,
    aborted: bool = False,
    external_abort: bool = False,
    timed_out: bool = False,
    timed_out_during_compaction: bool = False,
    profile_rotated: bool = False,
) -> TableDecision:
    """The failover decision table (SPEC §4.4); first matching row wins."""
    if stage is Stage.RETRY_LIMIT:
        return _retry_limit_row(fallback_configured, failover_reason)
    if external_abort:
        return TableDecision(TableAction.SURFACE_ERROR, failover_reason)
    if stage is Stage.PROMPT:
        return _prompt_row(fallback_configured, failover_reason, failover_failure, profile_rotated)
    should_rotate = (not aborted and (failover_failure or failover_reason is not None)) or (
        timed_out and not timed_out_during_compaction
    )
    if should_rotate and not profile_rotated:
        return TableDecision(TableAction.ROTATE_PROFILE, failover_reason)
    if should_rotate and fallback_configured:
        reason = R.TIMEOUT if timed_out else (failover_reason or R.UNKNOWN)
        return TableDecision(TableAction.FALLBACK_MODEL, reason)
    if not should_rotate:
        return TableDecision(TableAction.CONTINUE_NORMAL)
    return TableDecision(TableAction.SURFACE_ERROR, failover_reason)


def _retry_limit_row(fallback_configured: bool, reason: FailoverReason | None) -> TableDecision:
    if fallback_configured and reason is not None and reason not in _NOT_ESCALATED_AT_RETRY_LIMIT:
        return TableDecision(TableAction.FALLBACK_MODEL, reason)
    return TableDecision(TableAction.RETURN_ERROR_PAYLOAD)


def _prompt_row(
    fallback_configured: bool,
    reason: FailoverReason | None,
    failover_failure: bool,
    profile_rotated: bool,
) -> TableDecision:
    # A prompt-stage timeout never rotates profiles (§4.4 note, §20.2).
    if not profile_rotated and failover_failure and reason is not R.TIMEOUT:
        return TableDecision(TableAction.ROTATE_PROFILE, reason)
    if fallback_configured and failover_failure:
        return TableDecision(TableAction.FALLBACK_MODEL, reason or R.UNKNOWN)
    return TableDecision(TableAction.SURFACE_ERROR, reason)


def merge_retry_failover_reason(
    previous: FailoverReason | None,
    current: FailoverReason | None,
    timed_out: bool = False,
) -> FailoverReason | None:
    """`lastRetryFailoverReason` after a retry: current, else timeout if timed out, else
    previous (SPEC §4.4)."""
    if current is not None:
        return current
    return R.TIMEOUT if timed_out else previous


# --------------------------------------------------------------------------------------------
# Inputs and outputs of the handling order (§4.4.1, §4.4.2)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FailoverSettings:
    """Per-run configuration of the decisions (SPEC §4.1 step 7, §4.1 step 8)."""

    fallback_configured: bool = False
    rate_limit_rotation_cap: int = 1  # auth.cooldowns.rateLimitedProfileRotations
    overload_rotation_cap: int = 1  # auth.cooldowns.overloadedProfileRotations
    overload_backoff_ms: int = 0  # auth.cooldowns.overloadedBackoffMs (0 = no sleep)


@dataclass(frozen=True)
class FailoverCounters:
    """The §4.2 counters the decisions read and advance. Never mutated: decisions return a copy."""

    iterations: int = 0
    rate_limit_rotations: int = 0
    overload_rotations: int = 0
    same_model_idle_retries: int = 0
    overflow_compactions: int = 0
    tool_result_truncation_tried: bool = False
    last_retry_reason: FailoverReason | None = None
    attempted_thinking: frozenset[str] = field(default_factory=frozenset)

    def with_thinking(self, levels: Iterable[str]) -> FailoverCounters:
        """Rotating to a new profile resets `attemptedThinking` (SPEC §6); pass the new set."""
        return replace(self, attempted_thinking=frozenset(levels))


@dataclass(frozen=True)
class FailureFacts:
    """A classified failure of one attempt, as the model-call activity reported it.

    `reason` is the failover reason (§5) or None when unclassifiable; `failover_failure` says the
    message itself is failover-classifiable (`isFailoverErrorMessage`), which the assistant stage
    distinguishes from a reason merely inferred. `kind` carries the non-failover classes of
    `ModelFailure.reason` (role_ordering, image_size, context_overflow, thinking_unsupported).
    `message` is the user-readable text (§5.8) and `raw_message` the provider's own words.
    """

    reason: FailoverReason | None
    message: str = ""
    raw_message: str = ""
    status: int | None = None
    kind: str | None = None
    failover_failure: bool = False
    timed_out: bool = False
    idle_timed_out: bool = False
    timed_out_during_compaction: bool = False
    aborted: bool = False
    external_abort: bool = False
    produced_output: bool = False
    image_max_mb: int | None = None


class DecisionKind(StrEnum):
    ROTATE_PROFILE = "rotate_profile"
    LOWER_THINKING = "lower_thinking"
    RETRY_SAME = "retry_same"
    FALLBACK_MODEL = "fallback_model"
    COMPACT = "compact"
    TRUNCATE = "truncate"
    CONTINUE_NORMAL = "continue_normal"
    FAIL = "fail"


@dataclass(frozen=True)
class Decision:
    """What the workflow does next, and the counters as they stand after it.

    * `mark_profile`: mark the current auth profile failed with this reason before acting (None:
      do not mark; timeouts are never marked, §20.2).
    * ROTATE_PROFILE: advance to the next profile (the caller already knows one exists), sleep
      `backoff_ms` first, then retry.
    * LOWER_THINKING: retry with `thinking`.
    * RETRY_SAME: retry the same profile and model (single idle-timeout retry, or reuse of an
      in-attempt compaction after overflow).
    * FALLBACK_MODEL: end the run with a FailoverError of `reason`, `message`, `status` so the
      model-fallback layer (§8) tries the next candidate; sleep `backoff_ms` first.
    * COMPACT / TRUNCATE: overflow recovery (§4.5); retry afterwards if anything changed.
    * CONTINUE_NORMAL: no failover; build the payloads from the attempt (the error text, if any,
      becomes the reply).
    * FAIL: end the run with the user-readable `message`; `error_kind` names it
      (retry_limit, role_ordering, image_size, context_overflow, compaction_failure, timeout,
      or None for a rethrown provider error).
    """

    kind: DecisionKind
    counters: FailoverCounters
    reason: FailoverReason | None = None
    message: str = ""
    status: int | None = None
    mark_profile: FailoverReason | None = None
    thinking: str | None = None
    backoff_ms: int = 0
    error_kind: str | None = None


def _mark_reason(reason: FailoverReason | None) -> FailoverReason | None:
    # Run-loop callers never pass `timeout` and skip null reasons (§7.7, §20.2).
    return None if reason is None or reason is R.TIMEOUT else reason


def _backoff(settings: FailoverSettings, reason: FailoverReason | None) -> int:
    # The overload backoff sleep applies to `overloaded` only, and only when configured > 0.
    if reason is R.OVERLOADED and settings.overload_backoff_ms > 0:
        return settings.overload_backoff_ms
    return 0


# --------------------------------------------------------------------------------------------
# §4.4.1 prompt stage
# --------------------------------------------------------------------------------------------


def decide_prompt_failure(
    failure: FailureFacts,
    counters: FailoverCounters,
    settings: FailoverSettings,
    *,
    more_profiles: bool,
) -> Decision:
    """Prompt-stage handling in its exact order (SPEC §4.4.1 steps 3–11).

    Steps 1–2 (normalisation, runtime-credential refresh) belong to the activity and the auth
    layer. `more_profiles` says whether another auth profile could be activated now.
    """
    early = _prompt_terminal_kinds(failure, counters)
    if early is not None:
        return early
    reason = failure.reason
    mark = _mark_reason(reason)
    if reason is R.RATE_LIMIT:
        counters = replace(counters, rate_limit_rotations=counters.rate_limit_rotations + 1)
        if counters.rate_limit_rotations > settings.rate_limit_rotation_cap and (
            settings.fallback_configured
        ):
            return _escalate(counters, R.RATE_LIMIT, RATE_LIMIT_ESCALATION_TEXT, mark)
    table = _prompt_table(failure, settings, profile_rotated=False)
    if table.action is TableAction.ROTATE_PROFILE and more_profiles:
        return _rotate(counters, failure, settings, mark)
    if table.action is TableAction.ROTATE_PROFILE:
        table = _prompt_table(failure, settings, profile_rotated=True)
    thinking = _lower_thinking(failure, counters, mark)
    if thinking is not None:
        return thinking
    if table.action is TableAction.FALLBACK_MODEL:
        status = failure.status or failover_status(table.reason)
        return Decision(
            DecisionKind.FALLBACK_MODEL,
            counters,
            reason=table.reason,
            message=failure.message or failure.raw_message,
            status=status,
            mark_profile=mark,
            backoff_ms=_backoff(settings, reason),
        )
    return Decision(
        DecisionKind.FAIL, counters, reason=reason, message=failure.message, mark_profile=mark
    )


def _prompt_terminal_kinds(failure: FailureFacts, counters: FailoverCounters) -> Decision | None:
    # §4.4.1 steps 3–4: role ordering and image size end the run with a fixed text, unmarked.
    if failure.kind == "role_ordering":
        return Decision(
            DecisionKind.FAIL, counters, message=ROLE_ORDERING_TEXT, error_kind="role_ordering"
        )
    if failure.kind == "image_size":
        size = f"max {failure.image_max_mb} MB" if failure.image_max_mb else "max size"
        text = (
            f"Image too large for the model ({size}). Please compress or resize the image and "
            "try again."
        )
        return Decision(DecisionKind.FAIL, counters, message=text, error_kind="image_size")
    return None


def _prompt_table(
    failure: FailureFacts, settings: FailoverSettings, *, profile_rotated: bool
) -> TableDecision:
    return resolve_failover_action(
        Stage.PROMPT,
        fallback_configured=settings.fallback_configured,
        failover_reason=failure.reason,
        failover_failure=failure.failover_failure,
        aborted=failure.aborted,
        external_abort=failure.external_abort,
        profile_rotated=profile_rotated,
    )


def _lower_thinking(
    failure: FailureFacts, counters: FailoverCounters, mark: FailoverReason | None
) -> Decision | None:
    level = pick_fallback_thinking_level(
        failure.raw_message or failure.message, counters.attempted_thinking
    )
    if level is None:
        return None
    return Decision(DecisionKind.LOWER_THINKING, counters, thinking=level, mark_profile=mark)


def _rotate(
    counters: FailoverCounters,
    failure: FailureFacts,
    settings: FailoverSettings,
    mark: FailoverReason | None,
) -> Decision:
    last = merge_retry_failover_reason(
        counters.last_retry_reason, failure.reason, failure.timed_out or failure.idle_timed_out
    )
    return Decision(
        DecisionKind.ROTATE_PROFILE,
        replace(counters, last_retry_reason=last),
        reason=failure.reason,
        mark_profile=mark,
        backoff_ms=_backoff(settings, failure.reason),
    )


def _escalate(
    counters: FailoverCounters,
    reason: FailoverReason,
    text: str,
    mark: FailoverReason | None,
) -> Decision:
    return Decision(
        DecisionKind.FALLBACK_MODEL,
        counters,
        reason=reason,
        message=text,
        status=failover_status(reason),
        mark_profile=mark,
    )


# --------------------------------------------------------------------------------------------
# §4.4.2 assistant stage
# --------------------------------------------------------------------------------------------


def decide_assistant_failure(
    failure: FailureFacts,
    counters: FailoverCounters,
    settings: FailoverSettings,
    *,
    more_profiles: bool,
) -> Decision:
    """Assistant-stage handling (SPEC §4.4.2) of a completed attempt whose last message failed
    or timed out. Step 2 (runtime-credential refresh) belongs to the auth layer; step 3
    (image-dimension errors) is only logged."""
    if not failure.aborted:
        thinking = _lower_thinking(failure, counters, None)
        if thinking is not None:
            return thinking
    table = _assistant_table(failure, settings, profile_rotated=False)
    if table.action is TableAction.ROTATE_PROFILE:
        return _assistant_rotation(failure, counters, settings, more_profiles=more_profiles)
    return _assistant_after_table(table, failure, counters, settings)


def _assistant_table(
    failure: FailureFacts, settings: FailoverSettings, *, profile_rotated: bool
) -> TableDecision:
    return resolve_failover_action(
        Stage.ASSISTANT,
        fallback_configured=settings.fallback_configured,
        failover_reason=failure.reason,
        failover_failure=failure.failover_failure,
        aborted=failure.aborted,
        external_abort=failure.external_abort,
        timed_out=failure.timed_out or failure.idle_timed_out,
        timed_out_during_compaction=failure.timed_out_during_compaction,
        profile_rotated=profile_rotated,
    )


def _assistant_rotation(
    failure: FailureFacts,
    counters: FailoverCounters,
    settings: FailoverSettings,
    *,
    more_profiles: bool,
) -> Decision:
    # A timed-out attempt rotates but is never marked: no cooldown for a timeout (§20.2).
    timed_out = failure.timed_out or failure.idle_timed_out
    mark = None if timed_out else _mark_reason(failure.reason)
    capped = _assistant_rotation_cap(failure, counters, settings, mark)
    if isinstance(capped, Decision):
        return capped
    counters = capped
    if more_profiles:
        return _rotate(counters, failure, settings, mark)
    if _same_model_idle_retry_allowed(failure, counters, settings):
        return _retry_same_after_idle(failure, counters, mark)
    table = _assistant_table(failure, settings, profile_rotated=True)
    return _assistant_after_table(table, failure, counters, settings, mark)


def _assistant_rotation_cap(
    failure: FailureFacts,
    counters: FailoverCounters,
    settings: FailoverSettings,
    mark: FailoverReason | None,
) -> FailoverCounters | Decision:
    if failure.reason is R.OVERLOADED:
        counters = replace(counters, overload_rotations=counters.overload_rotations + 1)
        if counters.overload_rotations > settings.overload_rotation_cap and (
            settings.fallback_configured
        ):
            return _escalate(counters, R.OVERLOADED, OVERLOADED_ESCALATION_TEXT, mark)
    if failure.reason is R.RATE_LIMIT:
        counters = replace(counters, rate_limit_rotations=counters.rate_limit_rotations + 1)
        if counters.rate_limit_rotations > settings.rate_limit_rotation_cap and (
            settings.fallback_configured
        ):
            return _escalate(counters, R.RATE_LIMIT, RATE_LIMIT_ESCALATION_TEXT, mark)
    return counters


def _assistant_after_table(
    table: TableDecision,
    failure: FailureFacts,
    counters: FailoverCounters,
    settings: FailoverSettings,
    mark: FailoverReason | None = None,
) -> Decision:
    if table.action is TableAction.FALLBACK_MODEL:
        message = failure.message or failure.raw_message or _generic_text(failure)
        status = failover_status(table.reason) or (
            408 if "timed out" in message.lower() or "timeout" in message.lower() else None
        )
        return Decision(
            DecisionKind.FALLBACK_MODEL,
            counters,
            reason=table.reason,
            message=message,
            status=status,
            mark_profile=mark,
            backoff_ms=_backoff(settings, failure.reason),
        )
    if table.action is TableAction.SURFACE_ERROR:
        if not failure.external_abort and _same_model_idle_retry_allowed(
            failure, counters, settings
        ):
            return _retry_same_after_idle(failure, counters, mark)
        return _surface(failure, counters, mark)
    return Decision(DecisionKind.CONTINUE_NORMAL, counters, mark_profile=mark)


def _surface(
    failure: FailureFacts, counters: FailoverCounters, mark: FailoverReason | None
) -> Decision:
    # §4.6.5 / §4.8: a timeout that produced nothing ends with the timeout text; anything else
    # continues normally and the attempt's error text becomes the reply.
    timed_out = failure.timed_out or failure.idle_timed_out
    if timed_out and not failure.produced_output and not failure.timed_out_during_compaction:
        return Decision(
            DecisionKind.FAIL,
            counters,
            reason=R.TIMEOUT,
            message=timeout_payload_text(idle=failure.idle_timed_out),
            mark_profile=mark,
            error_kind="timeout",
        )
    return Decision(DecisionKind.CONTINUE_NORMAL, counters, mark_profile=mark)


def _same_model_idle_retry_allowed(
    failure: FailureFacts, counters: FailoverCounters, settings: FailoverSettings
) -> bool:
    """§4.4.2: idle watchdog fired, not during compaction, no fallback configured, nothing
    user-visible produced, and fewer than 1 such retry so far."""
    return (
        failure.idle_timed_out
        and not failure.timed_out_during_compaction
        and not settings.fallback_configured
        and not failure.produced_output
        and counters.same_model_idle_retries < MAX_SAME_MODEL_IDLE_TIMEOUT_RETRIES
    )


def _retry_same_after_idle(
    failure: FailureFacts, counters: FailoverCounters, mark: FailoverReason | None
) -> Decision:
    last = merge_retry_failover_reason(counters.last_retry_reason, failure.reason, True)
    return Decision(
        DecisionKind.RETRY_SAME,
        replace(
            counters,
            same_model_idle_retries=counters.same_model_idle_retries + 1,
            last_retry_reason=last,
        ),
        reason=R.TIMEOUT,
        mark_profile=mark,
    )


def _generic_text(failure: FailureFacts) -> str:
    # §4.4.2 fallback_model: the generic texts when neither a formatted nor a raw error exists.
    if failure.timed_out or failure.idle_timed_out:
        return _TIMED_OUT_TEXT
    return {
        R.RATE_LIMIT: _RATE_LIMITED_TEXT,
        R.BILLING: _BILLING_TEXT,
        R.AUTH: _UNAUTHORIZED_TEXT,
    }.get(failure.reason or R.UNKNOWN, _FAILED_TEXT)


def timeout_payload_text(*, idle: bool) -> str:
    """The error payload of a timed-out attempt without payloads (SPEC §4.6.5)."""
    return IDLE_TIMEOUT_TEXT if idle else RUN_TIMEOUT_TEXT


# --------------------------------------------------------------------------------------------
# §4.5 context overflow (never falls back to another model, §8.3, §20.4)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OverflowFacts:
    """What §4.5 recovery needs to know about an overflowing attempt."""

    compaction_failure: bool = False  # the error text is a compaction-failure text (§5.5)
    compacted_in_attempt: bool = False  # the SDK already auto-compacted during the attempt
    oversized_tool_results: bool = False  # the snapshot likely has oversized tool results


def decide_context_overflow(facts: OverflowFacts, counters: FailoverCounters) -> Decision:
    """The first applicable overflow-recovery step (SPEC §4.5 steps 1–4).

    RETRY_SAME reuses a compaction the attempt already did; COMPACT asks the context activity
    for a forced compaction (retry if it compacted, else `decide_overflow_after_failed_compaction`);
    TRUNCATE asks for the one-shot tool-result truncation; FAIL gives up. Every step counts as a
    loop iteration, and none of them is a model fallback.
    """
    attempts = counters.overflow_compactions
    if not facts.compaction_failure and attempts < MAX_OVERFLOW_COMPACTION_ATTEMPTS:
        counters = replace(counters, overflow_compactions=attempts + 1)
        if facts.compacted_in_attempt:
            return Decision(DecisionKind.RETRY_SAME, counters)
        return Decision(DecisionKind.COMPACT, counters)
    return _truncate_or_give_up(facts, counters)


def decide_overflow_after_failed_compaction(
    facts: OverflowFacts, counters: FailoverCounters
) -> Decision:
    """§4.5 steps 3–4 once a COMPACT request came back without compacting (the attempt still
    counts against the 3-compaction budget)."""
    return _truncate_or_give_up(facts, counters)


def _truncate_or_give_up(facts: OverflowFacts, counters: FailoverCounters) -> Decision:
    if not counters.tool_result_truncation_tried and facts.oversized_tool_results:
        # Tried once per run; the compaction budget is not reset.
        return Decision(DecisionKind.TRUNCATE, replace(counters, tool_result_truncation_tried=True))
    kind = "compaction_failure" if facts.compaction_failure else "context_overflow"
    return Decision(DecisionKind.FAIL, counters, message=CONTEXT_OVERFLOW_TEXT, error_kind=kind)


# --------------------------------------------------------------------------------------------
# §4.7 retry-limit exhaustion
# --------------------------------------------------------------------------------------------


def retry_limit_message(iterations: int, limit: int) -> str:
    """The FailoverError text of an exhausted loop (SPEC §4.7)."""
    return f"Exceeded retry limit after {iterations} attempts (max={limit})."


def decide_retry_limit(
    counters: FailoverCounters, settings: FailoverSettings, *, limit: int
) -> Decision | None:
    """None while `counters.iterations < limit` (the loop may go on; the caller increments).
    Otherwise FALLBACK_MODEL for replay-safe reasons when fallbacks are configured, else FAIL
    with the retry-limit payload (SPEC §4.3 step 0, §4.4 retry_limit row, §4.7)."""
    if counters.iterations < limit:
        return None
    table = resolve_failover_action(
        Stage.RETRY_LIMIT,
        fallback_configured=settings.fallback_configured,
        failover_reason=counters.last_retry_reason,
    )
    if table.action is TableAction.FALLBACK_MODEL:
        return Decision(
            DecisionKind.FALLBACK_MODEL,
            counters,
            reason=table.reason,
            message=retry_limit_message(counters.iterations, limit),
            status=failover_status(table.reason),
        )
    return Decision(
        DecisionKind.FAIL,
        counters,
        reason=counters.last_retry_reason,
        message=RETRY_LIMIT_TEXT,
        error_kind="retry_limit",
    )
