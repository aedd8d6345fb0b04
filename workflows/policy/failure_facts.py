"""A failed model call as the run-loop decisions see it (SPEC §4.3 steps 7-8, §4.4).

The model-call activity reports a classified `ModelFailure`; this says at which stage the run
loop handles it and with which facts. Here a failure is *assistant-stage* when the model had
started answering (its stream went silent past the idle limit, or failed after text was shown):
the original's "attempt completed with an error message". Anything else (the provider refused
the request) is *prompt-stage*. Pure: no I/O, no Temporal import.
"""

from __future__ import annotations

from agentlane.errors import FailoverReason, ModelFailure
from workflows.policy.failover import FailureFacts, Stage

# `ModelFailure.reason` values that are not failover reasons (SPEC §4.4.1 steps 3-4, §4.5, §6).
NON_FAILOVER_KINDS = frozenset(
    {"role_ordering", "image_size", "context_overflow", "thinking_unsupported"}
)


def failover_reason(failure: ModelFailure) -> FailoverReason | None:
    try:
        return FailoverReason(failure.reason)
    except ValueError:
        return None


def failure_stage(failure: ModelFailure) -> Stage:
    if failure.idle_timed_out or failure.produced_output:
        return Stage.ASSISTANT
    return Stage.PROMPT


def failure_facts(failure: ModelFailure) -> FailureFacts:
    reason = failover_reason(failure)
    timed_out = reason is FailoverReason.TIMEOUT
    return FailureFacts(
        reason=reason,
        message=failure.message,
        raw_message=failure.raw_message,
        status=failure.status,
        kind=failure.reason if failure.reason in NON_FAILOVER_KINDS else None,
        failover_failure=reason is not None,
        timed_out=timed_out and not failure.idle_timed_out,
        idle_timed_out=failure.idle_timed_out,
        produced_output=failure.produced_output,
    )


def profile_mark(failure: ModelFailure) -> FailoverReason | None:
    """The reason the failed profile is marked with before anything else is decided: none for
    a timeout of any kind (not an auth-health signal, SPEC §4.6.5, §7.7), an unclassified
    failure, or a call not sent because the profile was found cooling."""
    reason = failover_reason(failure)
    if reason is None or reason is FailoverReason.TIMEOUT or failure.idle_timed_out:
        return None
    if failure.preempted:
        return None  # found cooling, not failed: its window is already in the shared state
    return reason
