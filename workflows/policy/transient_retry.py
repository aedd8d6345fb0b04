"""Making a call again after a transient server error (issue 24; SPEC §5.4, §5.7, §8.4).

The original survives a 500 three ways: the provider SDK makes the request again twice with
exponential backoff and jitter (honouring `Retry-After`), the run loop's table sends a
prompt-stage timeout to the next model, and the reply layer retries the whole chain once after
2.5 s (§8.4, `model_fallback.should_retry_transient_http`). Here the SDK clients are built with
`max_retries=0` so that every retry is a durable, abortable timer in the run workflow; this module
decides those retries: which failures qualify, how long to wait, and what the user reads.

Rules:
* a transient server error is an HTTP status of `TRANSIENT_STATUSES` classified `timeout` (or
  not at all): the server failed, not the request. An overload (503 with overload text, 529)
  is made again twice (the SDKs' default), then takes its own path (a profile cooldown, the
  table's rotation, after its Retry-After); a rate limit keeps its cooldown;
* the same call is made again on the same profile (the table never rotates a prompt-stage
  timeout, §4.4) after `Retry-After` when the server sent one, else after an exponential
  backoff (2 s, 4 s, 8 s, ... up to 60 s) with ±20 % jitter (the caller passes a deterministic
  draw: `workflow.random()`);
* every wait counts against the run's shared wait budget (`max_wait_seconds`); a wait that
  does not fit is not started and the failure goes on to the table (fallback, or the end).

Pure: no I/O, no clock, no Temporal import.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentlane.errors import FailoverReason
from workflows.policy.model_fallback import TRANSIENT_HTTP_RETRY_DELAY_SECONDS

__all__ = [
    "BASE_DELAY_SECONDS",
    "CHAIN_RETRY_DELAY_SECONDS",
    "CHAIN_RETRY_STATUSES",
    "MAX_DELAY_SECONDS",
    "MAX_OVERLOAD_RETRIES",
    "OVERLOAD",
    "SERVER",
    "TRANSIENT_STATUSES",
    "TransientRetry",
    "backoff_seconds",
    "chain_retry_text",
    "gave_up_text",
    "transient_kind",
    "plan_transient_retry",
    "retrying_text",
    "seconds_text",
    "too_long_text",
    "wait_bound_text",
]

# Statuses a server answers when it, not the request, failed (issue 24; SPEC §5.4 408, §5.7).
TRANSIENT_STATUSES = frozenset({408, 499, 500, 502, 503, 504, 521, 522, 523, 524, 529})
# The reply layer's one retry of the whole chain (SPEC §5.7 statuses, §8.4 delay).
CHAIN_RETRY_STATUSES = TRANSIENT_STATUSES - {408}
CHAIN_RETRY_DELAY_SECONDS = TRANSIENT_HTTP_RETRY_DELAY_SECONDS
BASE_DELAY_SECONDS = 2.0
SERVER = "server"
OVERLOAD = "overload"
# The provider SDKs' default: two more tries before the error reaches the caller.
MAX_OVERLOAD_RETRIES = 2
# A Retry-After of 0 still gets a timer of its own (a zero-length timer is not a wait).
MIN_DELAY_SECONDS = 0.1
MAX_DELAY_SECONDS = 60.0
# ±20 %: sessions that failed together do not all come back in the same second.
JITTER = 0.2


@dataclass(frozen=True)
class TransientRetry:
    """Wait `delay` seconds, then make the call again as its attempt number `attempt`."""

    delay: float
    attempt: int
    retry_after: bool  # the delay is the server's Retry-After


def transient_kind(status: int | None, reason: str, *, idle_timed_out: bool = False) -> str | None:
    """`SERVER` for a call worth making again as it was (the server's fault, not the
    request's); `OVERLOAD` for a server that said it is overloaded (made again
    `MAX_OVERLOAD_RETRIES` times, as the provider SDKs do, then its cooldown and the table's
    rotation); None for anything else (a rate limit has its cooldown, the idle watchdog its
    own retry)."""
    if idle_timed_out or status not in TRANSIENT_STATUSES:
        return None
    if reason in (FailoverReason.TIMEOUT.value, FailoverReason.UNKNOWN.value):
        return SERVER
    if reason == FailoverReason.OVERLOADED.value:
        return OVERLOAD
    return None


def backoff_seconds(retries_so_far: int, draw: float) -> float:
    """2 s · 2^retries, at most 60 s, times a factor in [0.8, 1.2] from `draw` in [0, 1)."""
    doubled: float = BASE_DELAY_SECONDS * 2.0 ** min(max(0, retries_so_far), 30)
    base = min(MAX_DELAY_SECONDS, doubled)
    return base * (1.0 - JITTER + 2 * JITTER * min(max(draw, 0.0), 1.0))


def plan_transient_retry(
    *,
    retries_so_far: int,
    retry_after: float | None,
    waited_seconds: float,
    budget_seconds: float,
    draw: float,
) -> TransientRetry | None:
    """The next wait, or None when it does not fit in what is left of the wait budget."""
    if retry_after is not None and retry_after >= 0:
        delay, told = max(MIN_DELAY_SECONDS, retry_after), True
    else:
        delay, told = backoff_seconds(retries_so_far, draw), False
    if waited_seconds + delay > budget_seconds:
        return None
    return TransientRetry(delay=delay, attempt=retries_so_far + 2, retry_after=told)


def chain_retry_text(status: int, provider: str, first: str) -> str:
    """The warning of the one retry of the whole chain (SPEC §8.4)."""
    return (
        f"HTTP {status} from {provider}; trying again once from {first} in "
        f"{seconds_text(CHAIN_RETRY_DELAY_SECONDS)}"
    )


def seconds_text(seconds: float) -> str:
    """1.8 s, 0.2 s, 14 s: a tenth below ten seconds, whole seconds above."""
    if seconds < 10:
        return f"{seconds:.1f}".removesuffix(".0") + " s"
    return f"{round(seconds)} s"


def wait_bound_text(budget_seconds: float) -> str:
    """'the 10-minute bound' for the default 600 s; 'the 3-second bound' for a small one."""
    if budget_seconds >= 60 and budget_seconds % 60 == 0:
        return f"the {int(budget_seconds // 60)}-minute bound"
    return f"the {seconds_text(budget_seconds).removesuffix(' s')}-second bound"


def retrying_text(status: int, provider: str, plan: TransientRetry) -> str:
    """The warning of one wait: 'HTTP 500 from anthropic; retrying in 1.8 s (attempt 2)'."""
    told = " as the server asked (Retry-After)" if plan.retry_after else ""
    return (
        f"HTTP {status} from {provider}; retrying in {seconds_text(plan.delay)}{told} "
        f"(attempt {plan.attempt})"
    )


def gave_up_text(
    *,
    status: int,
    provider: str,
    model: str,
    attempts: int,
    waited_seconds: float,
    budget_seconds: float,
    last_error: str,
    retry_after: float | None = None,
    run_waited_seconds: float = 0.0,
) -> str:
    """The run's end when the server kept failing and the next wait does not fit the budget:
    the status, the provider, the attempts, the time waited, and why it stopped."""
    tries = "1 attempt" if attempts == 1 else f"{attempts} attempts"
    if retry_after is not None:
        why = too_long_text(retry_after, budget_seconds, run_waited_seconds)
        why = why[0].lower() + why[1:]
    else:
        why = (
            f"the next wait would pass {wait_bound_text(budget_seconds)} on waiting (the "
            "session's `max_wait_seconds`)."
        )
    return (
        f"{model} kept failing: HTTP {status} from {provider} on {tries}, after waiting "
        f"{seconds_text(waited_seconds)} in all; {why} Last error: {last_error}"
    )


def too_long_text(retry_after: float, budget_seconds: float, waited_seconds: float) -> str:
    """A server's Retry-After that the run will not wait out, said as it is."""
    left = max(0.0, budget_seconds - waited_seconds)
    if retry_after > budget_seconds:
        return (
            f"The provider asked to wait {seconds_text(retry_after)} (Retry-After), more than "
            f"{wait_bound_text(budget_seconds)} on waiting (the session's `max_wait_seconds`)."
        )
    return (
        f"The provider asked to wait {seconds_text(retry_after)} (Retry-After), more than the "
        f"{seconds_text(left)} left of {wait_bound_text(budget_seconds)} on waiting (the "
        "session's `max_wait_seconds`)."
    )
