"""What a failed model call is called where people read it: `error.kind`, `AgentLastError`, a
waiting run's `waiting_reason`.

SPEC §5.2 files a transport fault and a server's own error (HTTP 5xx) under the failover reason
`timeout`: right for deciding (neither cools a profile down, both are made again), wrong for a
reader, who would hunt a slow model. Read, a refused connection is `connection_refused`, a
broken one `connection`, a server's 5xx `server_error`; a timeout is a timeout (the idle limit,
408, a gateway's 504).
"""

from __future__ import annotations

from agentlane.errors import ExecutionErrorKind, FailoverReason, ModelFailure, TransportKind

# Statuses that do say time ran out (a proxy's or the server's own deadline).
TIMEOUT_STATUSES = frozenset({408, 504, 524})


def precise_kind(kind: ExecutionErrorKind, failure: ModelFailure | None) -> ExecutionErrorKind:
    """`kind`, or what its `timeout` really was."""
    if kind is not ExecutionErrorKind.TIMEOUT or failure is None:
        return kind
    if failure.transport_kind is TransportKind.CONNECTION_REFUSED:
        return ExecutionErrorKind.CONNECTION_REFUSED
    if failure.transport_kind is not None:
        return ExecutionErrorKind.CONNECTION
    status = failure.status
    if status is not None and status >= 500 and status not in TIMEOUT_STATUSES:
        return ExecutionErrorKind.SERVER_ERROR
    if server_error_in_stream(failure) and (failure.code or "").lower() in SERVER_ERROR_CODES:
        return ExecutionErrorKind.SERVER_ERROR
    return kind


# The error types and codes providers send inside a stream for their own failure.
SERVER_ERROR_CODES = frozenset({"api_error", "server_error", "internal_server_error"})


def server_error_in_stream(failure: ModelFailure) -> bool:
    """A server's error said inside a stream that began with 200 (Anthropic's `api_error`
    event, an OpenAI `server_error` chunk or Responses `error` event): the fault of a 5xx with
    no status to show it, classified `timeout` from its text. Not the idle limit, not a
    connection, and sent (a call the run held back has no server to blame)."""
    return (
        failure.status is None
        and failure.reason == FailoverReason.TIMEOUT.value
        and not failure.idle_timed_out
        and failure.transport_kind is None
        and not failure.transport
        and not failure.preempted
        and failure.precheck_route is None
    )


def failure_label(failure: ModelFailure) -> str:
    """A failure's name while the run goes on (AgentLastError, waiting_reason): its reason,
    made precise where the reason is `timeout`."""
    if failure.reason != FailoverReason.TIMEOUT.value:
        return failure.reason
    return precise_kind(ExecutionErrorKind.TIMEOUT, failure).value
