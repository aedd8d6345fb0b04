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
  does not fit is not started and the failure goes on to the table (fallback, or the end);
* a transport fault (a refused or broken connection, a stream cut short: `TRANSPORT`) is made
  again the same way, from 0.5 s doubling up to 10 s (the provider SDKs' own pace), inside the
  same budget; a host name that does not resolve is a mistake in the URL: tried once more only.

Pure: no I/O, no clock, no Temporal import.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentlane.errors import FailoverReason, TransportKind
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
    "TRANSPORT",
    "TransientRetry",
    "backoff_seconds",
    "chain_retry_text",
    "gave_up_text",
    "transient_kind",
    "plan_transient_retry",
    "transport_what",
    "unresolved_text",
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
TRANSPORT = "transport"
# A transport fault's backoff: the provider SDKs' pace (0.5 s doubling, here up to 10 s).
TRANSPORT_BASE_DELAY_SECONDS = 0.5
TRANSPORT_MAX_DELAY_SECONDS = 10.0
# A host name that does not resolve is a typo more often than an outage.
UNRESOLVED_HOST_CODE = "ENOTFOUND"
MAX_UNRESOLVED_RETRIES = 1
# An event the SDK could not parse: a byte garbled on the way is worth another try or two, a
# server or proxy that sends malformed events sends them every time (not ten minutes of them).
MALFORMED_CODE = "malformed_response"
MAX_MALFORMED_RETRIES = 2
# A stream the server closed cleanly but never said was finished (no stop reason). Some
# OpenAI-compatible servers and proxies always end so: the same whole answer came back 61 times
# in 10 minutes. Tried as often as a malformed stream.
INCOMPLETE_CODE = "stream_incomplete"
# No answer in the SDK client's own time (with the idle limit off, say).
TIMED_OUT_CODE = "ETIMEDOUT"
# The provider SDKs' default: two more tries before the error reaches the caller.
MAX_OVERLOAD_RETRIES = 2
# With a fallback model configured, a server error or transport fault is made again on the same
# model for at most this long (of waits) before the next model is tried: about what the
# providers' own SDKs retry (the original falls back after them), while the session's
# `max_wait_seconds` stays the bound for the last model of the chain.
FALLBACK_AFTER_SECONDS = 30.0
# Where the bound on waiting is set, as the texts that name it say.
WAIT_SETTING = "the session's `max_wait_seconds`, set for new sessions in `[agents.main]`"
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


def transient_kind(
    status: int | None,
    reason: str,
    *,
    idle_timed_out: bool = False,
    transport: TransportKind | None = None,
    overload_in_stream: bool = False,
    server_error_in_stream: bool = False,
) -> str | None:
    """`SERVER` for a call worth making again as it was (the server's fault, not the
    request's); `TRANSPORT` for a connection that failed or a stream cut short; `OVERLOAD` for
    a server that said it is overloaded (made again `MAX_OVERLOAD_RETRIES` times, as the
    provider SDKs do, then its cooldown and the table's rotation); None for anything else (a
    rate limit has its cooldown, the idle watchdog its own retry)."""
    if idle_timed_out:
        return None
    if transport is not None:
        return TRANSPORT
    if status is None and reason == FailoverReason.OVERLOADED.value and overload_in_stream:
        # An overload said inside a stream (Anthropic's `overloaded_error` event) is the same
        # server state as its 529 (`overload_in_stream` False: runs recorded before).
        return OVERLOAD
    if status is None and server_error_in_stream and reason == FailoverReason.TIMEOUT.value:
        # A server error said inside a stream (Anthropic's `api_error` event, an OpenAI
        # `server_error` chunk): its 500 without the status (False: runs recorded before).
        return SERVER
    if status not in TRANSIENT_STATUSES:
        return None
    if reason in (FailoverReason.TIMEOUT.value, FailoverReason.UNKNOWN.value):
        return SERVER
    if reason == FailoverReason.OVERLOADED.value:
        return OVERLOAD
    return None


def backoff_seconds(
    retries_so_far: int,
    draw: float,
    *,
    base_seconds: float = BASE_DELAY_SECONDS,
    max_seconds: float = MAX_DELAY_SECONDS,
) -> float:
    """2 s · 2^retries, at most 60 s (or the given base and cap), times a factor in
    [0.8, 1.2] from `draw` in [0, 1)."""
    doubled: float = base_seconds * 2.0 ** min(max(0, retries_so_far), 30)
    base = min(max_seconds, doubled)
    return base * (1.0 - JITTER + 2 * JITTER * min(max(draw, 0.0), 1.0))


def plan_transient_retry(
    *,
    retries_so_far: int,
    retry_after: float | None,
    waited_seconds: float,
    budget_seconds: float,
    draw: float,
    kind: str = SERVER,
    code: str | None = None,
    few_for_malformed: bool = True,
    few_for_incomplete: bool = True,
) -> TransientRetry | None:
    """The next wait, or None when it does not fit in what is left of the wait budget (or,
    for a host that does not resolve or a malformed stream, when it was tried again enough;
    `few_for_malformed` False: runs recorded before that limit)."""
    if (
        kind == TRANSPORT
        and code == UNRESOLVED_HOST_CODE
        and retries_so_far >= MAX_UNRESOLVED_RETRIES
    ):
        return None
    if (
        kind == TRANSPORT
        and few_for_malformed
        and code == MALFORMED_CODE
        and retries_so_far >= MAX_MALFORMED_RETRIES
    ):
        return None
    if (
        kind == TRANSPORT
        and few_for_incomplete
        and code == INCOMPLETE_CODE
        and retries_so_far >= MAX_MALFORMED_RETRIES
    ):
        return None
    if retry_after is not None and retry_after >= 0:
        delay, told = max(MIN_DELAY_SECONDS, retry_after), True
    elif kind == TRANSPORT:
        delay = backoff_seconds(
            retries_so_far,
            draw,
            base_seconds=TRANSPORT_BASE_DELAY_SECONDS,
            max_seconds=TRANSPORT_MAX_DELAY_SECONDS,
        )
        told = False
    else:
        delay, told = backoff_seconds(retries_so_far, draw), False
    if waited_seconds + delay > budget_seconds:
        return None
    return TransientRetry(delay=delay, attempt=retries_so_far + 2, retry_after=told)


def count_limit_text(code: str | None, retries_so_far: int) -> str | None:
    """`unresolved_text`, when the fault's own retry count is what ended the retries (not the
    wait budget, which has its own words)."""
    limits = {
        UNRESOLVED_HOST_CODE: MAX_UNRESOLVED_RETRIES,
        MALFORMED_CODE: MAX_MALFORMED_RETRIES,
        INCOMPLETE_CODE: MAX_MALFORMED_RETRIES,
    }
    limit = limits.get(code or "")
    if limit is None or retries_so_far < limit:
        return None
    return unresolved_text(code)


def unresolved_text(code: str | None) -> str | None:
    """Why a host that does not resolve, or a stream of malformed events, is not tried again
    (None: any other fault)."""
    if code == UNRESOLVED_HOST_CODE:
        return "a host name that does not resolve is tried once more only: check the base URL."
    if code == MALFORMED_CODE:
        return (
            f"a stream of unreadable events is tried {MAX_MALFORMED_RETRIES} more times only: "
            "the server (or a proxy before it) does not speak this provider's streaming API."
        )
    if code == INCOMPLETE_CODE:
        return (
            f"a stream that ends without a stop reason is tried {MAX_MALFORMED_RETRIES} more "
            "times only: the server (or a proxy before it) ends its streams early, or never "
            "sends one."
        )
    return None


def transport_what(
    kind: TransportKind, host: str, provider: str, code: str | None, received_chars: int | None
) -> str:
    """What failed, in words: 'connection refused by 127.0.0.1:9 (openai)', 'connection to
    api.openai.com lost (openai, ECONNRESET)', 'stream from api.anthropic.com cut short after
    12 characters (anthropic, stream_incomplete)'."""
    said = f"({provider}, {code})" if code else f"({provider})"
    if kind is TransportKind.CONNECTION_REFUSED:
        return f"connection refused by {host} ({provider})"
    if kind is TransportKind.STREAM_CUT:
        got = received_chars or 0
        after = "before any output" if got == 0 else f"after {got} character{'s' * (got != 1)}"
        return f"stream from {host} cut short {after} {said}"
    if code == UNRESOLVED_HOST_CODE:
        return f"host {host} not found {said}"
    if code == TIMED_OUT_CODE:
        return f"connection to {host} timed out {said}"
    return f"connection to {host} lost {said}"


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


def retrying_text(status: int, provider: str, plan: TransientRetry, what: str | None = None) -> str:
    """The warning of one wait: 'HTTP 500 from anthropic; retrying in 1.8 s (attempt 2)', or
    for a transport fault (`what`, see `transport_what`): 'Connection refused by 127.0.0.1:9
    (openai); retrying in 0.5 s (attempt 2)'."""
    told = " as the server asked (Retry-After)" if plan.retry_after else ""
    failed = f"{what[:1].upper()}{what[1:]}" if what else f"HTTP {status} from {provider}"
    return f"{failed}; retrying in {seconds_text(plan.delay)}{told} (attempt {plan.attempt})"


def moving_on_text(after_seconds: float) -> str:
    """Why a model is left while the run could still wait: a fallback model is configured, and
    an outage of one provider should not hold every run for the whole wait budget."""
    return (
        f"a fallback model is configured, so it is tried after {seconds_text(after_seconds)} of "
        "retries on this one."
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
    what: str | None = None,
    why: str | None = None,
) -> str:
    """The run's end when the server kept failing and the next wait does not fit the budget:
    the status (or for a transport fault `what` failed), the provider, the attempts, the time
    waited, and why it stopped."""
    tries = "1 attempt" if attempts == 1 else f"{attempts} attempts"
    if why is None and retry_after is not None:
        why = too_long_text(retry_after, budget_seconds, run_waited_seconds)
        why = why[0].lower() + why[1:]
    elif why is None:
        why = (
            f"the next wait would pass {wait_bound_text(budget_seconds)} on waiting "
            f"({WAIT_SETTING})."
        )
    failed = what or f"HTTP {status} from {provider}"
    return (
        f"{model} kept failing: {failed} on {tries}, after waiting "
        f"{seconds_text(waited_seconds)} in all; {why} Last error: {last_error}"
    )


def too_long_text(retry_after: float, budget_seconds: float, waited_seconds: float) -> str:
    """A server's Retry-After that the run will not wait out, said as it is."""
    left = max(0.0, budget_seconds - waited_seconds)
    if retry_after > budget_seconds:
        return (
            f"The provider asked to wait {seconds_text(retry_after)} (Retry-After), more than "
            f"{wait_bound_text(budget_seconds)} on waiting ({WAIT_SETTING})."
        )
    return (
        f"The provider asked to wait {seconds_text(retry_after)} (Retry-After), more than the "
        f"{seconds_text(left)} left of {wait_bound_text(budget_seconds)} on waiting "
        f"({WAIT_SETTING})."
    )
