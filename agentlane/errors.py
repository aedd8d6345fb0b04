"""Error kinds that cross role boundaries.

Activities raise `ApplicationError(type=<one of these>)`; workflows decide what to do by type.
Kinds of the execution layer (seed 004) and reasons of the failover classifier (SPEC §5.1).
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel


class ExecutionErrorKind(StrEnum):
    VALIDATION_FAILED = "validation_failed"
    RUNTIME_UNAVAILABLE = "runtime_unavailable"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    ABORTED = "aborted"
    QUOTA_EXCEEDED = "quota_exceeded"  # rate limits: retry with backoff
    BILLING = "billing"  # out of credits or plan: not worth retrying until someone pays
    # No usable key: none configured for the provider, or every one refused (401/403).
    AUTH = "auth"
    TOOL_ERROR = "tool_error"
    STATE_PERSIST_FAILED = "state_persist_failed"
    # The context did not fit and recovery (compaction, truncation) could not make it fit.
    CONTEXT_OVERFLOW = "context_overflow"
    # The provider could not be reached (issue 24, 25): nothing listens at the URL, or the
    # connection broke (reset, a stream cut short). Told apart from a slow model (`timeout`).
    CONNECTION_REFUSED = "connection_refused"
    CONNECTION = "connection"
    # The provider answered with an error of its own (HTTP 5xx) past the retries: not a slow
    # model (`timeout`), though SPEC §5.2's failover reason for it is `timeout`.
    SERVER_ERROR = "server_error"
    UNKNOWN = "unknown"


class TransportKind(StrEnum):
    """What a transport fault was (issue 24); its failover reason stays `timeout` (SPEC §5.2)."""

    CONNECTION_REFUSED = "connection_refused"  # nothing listens at the URL
    CONNECTION = "connection"  # reset, closed or timed out before the answer began
    STREAM_CUT = "stream_cut"  # the answer began and broke off before its end


class FailoverReason(StrEnum):
    AUTH = "auth"
    AUTH_PERMANENT = "auth_permanent"
    FORMAT = "format"
    RATE_LIMIT = "rate_limit"
    OVERLOADED = "overloaded"
    BILLING = "billing"
    TIMEOUT = "timeout"
    MODEL_NOT_FOUND = "model_not_found"
    SESSION_EXPIRED = "session_expired"
    UNKNOWN = "unknown"


# SPEC §5.1 resolveFailoverStatus: the HTTP status a failover reason stands for.
FAILOVER_STATUS: dict[FailoverReason, int] = {
    FailoverReason.BILLING: 402,
    FailoverReason.RATE_LIMIT: 429,
    FailoverReason.OVERLOADED: 503,
    FailoverReason.AUTH: 401,
    FailoverReason.AUTH_PERMANENT: 403,
    FailoverReason.TIMEOUT: 408,
    FailoverReason.FORMAT: 400,
    FailoverReason.MODEL_NOT_FOUND: 404,
    FailoverReason.SESSION_EXPIRED: 410,
}


# ApplicationError.type values raised by activities.
MODEL_IDLE_TIMEOUT = "ModelIdleTimeout"
MODEL_PROVIDER_ERROR = "ModelProviderError"
WORKSPACE_MISSING = "WorkspaceMissing"
TRANSCRIPT_CORRUPT = "TranscriptCorrupt"
CONFIG_ERROR = "ConfigError"


class ModelFailure(BaseModel):
    """Details of a classified provider failure (ApplicationError details[0]).

    `reason` is a failover reason of SPEC §5.1, or context_overflow, thinking_unsupported,
    role_ordering, image_size. The workflow decides what to do with it; no key is ever here.
    """

    reason: str
    message: str
    provider: str
    model: str
    profile_id: str | None = None
    status: int | None = None
    code: str | None = None
    retry_after_seconds: float | None = None
    transport: bool = False
    # The provider's own words (keys scrubbed), for decisions such as the thinking fallback.
    raw_message: str = ""
    thinking: str = "off"
    # The model went silent past the idle limit (SPEC §4.6.2): a timeout that rotates the
    # profile without cooling it down, and may get the single same-model retry.
    idle_timed_out: bool = False
    # The user already saw text from this attempt: the failure is assistant-stage (SPEC §4.4.2)
    # and the same-model idle retry is off.
    produced_output: bool = False
    # Not sent: just before the call, the shared state showed this profile cooling down (another
    # session's failure, written after the run chose it). Rotate without marking it again.
    preempted: bool = False
    # Context overflow (issue 10). The provider's own figures when its error gave them: the
    # prompt's size and the window it enforces.
    observed_tokens: int | None = None
    observed_limit: int | None = None
    # Not sent: the preemptive check (SPEC §10.3) found the request too large; its route.
    precheck_route: str | None = None
    # The context holds tool results a truncation could shrink (SPEC §4.5 step 3).
    oversized_tool_results: bool = False
    # The size of the request that failed, as measured before sending (reported usage plus an
    # estimate): a timed-out call this large is compacted before it is made again (§4.6.4).
    prompt_tokens: int | None = None
    # The provider's overflow text says its own compaction failed (SPEC §5.5): compacting
    # again would not help.
    compaction_failure: bool = False
    # A transport fault (issue 24): what it was, the host called, and how much of the answer
    # had arrived; the run makes the call again within its wait budget.
    transport_kind: TransportKind | None = None
    host: str | None = None
    received_chars: int | None = None
