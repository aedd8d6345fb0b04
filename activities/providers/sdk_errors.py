"""Shared pieces for turning SDK failures into `ProviderError` (raw facts, no classification).

Message texts follow the shape OpenClaw's classifier patterns were written against (the official
TypeScript SDKs): a leading HTTP status, then the provider's own error text or JSON body. Every
secret the caller knows (the key, a profile's header values, values read from `env:`) is
scrubbed from every text, and so are masked key fragments some APIs echo back ("Incorrect API
key provided: sk-ab***wxyz").
"""

from __future__ import annotations

import email.utils
import json
import socket
import time
from collections.abc import Iterable, Mapping
from typing import Any

import httpx2

from activities.providers.base import ProviderError
from agentlane.redaction import REDACTED as REDACTED  # re-exported: tests compare against it
from agentlane.redaction import redact_known

# Provider errors name only the secrets the caller knows (agentlane/redaction.py).
redact = redact_known


def compact_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def retry_after_seconds(
    headers: Mapping[str, str] | None, *, now: float | None = None
) -> float | None:
    """`retry-after-ms`, else `retry-after` (seconds or an HTTP date), else None."""
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def transport_error(
    err: BaseException,
    *,
    provider: str,
    model: str,
    secrets: Iterable[str | None],
    started: bool = False,
) -> ProviderError:
    """A failure with no HTTP answer: connection refused, timeout, a stream cut mid-way
    (`started`: the server's 200 stream had begun)."""
    text = _describe(err)
    return ProviderError(
        redact(text, secrets),
        provider=provider,
        model=model,
        code=_transport_code(err),
        transport=True,
        stream_started=started,
    )


def stream_incomplete_error(
    *, provider: str, model: str, missing: str, secrets: Iterable[str | None] = ()
) -> ProviderError:
    return ProviderError(
        redact(f"stream closed before the response completed (no {missing} event)", secrets),
        provider=provider,
        model=model,
        code="stream_incomplete",
        transport=True,
        stream_started=True,
    )


def malformed_stream_error(
    err: BaseException, *, provider: str, model: str, secrets: Iterable[str | None]
) -> ProviderError:
    """An event the SDK could not parse: treated like a cut stream, so it may be retried."""
    return ProviderError(
        redact(
            f"malformed_response: unreadable event in the stream ({type(err).__name__})",
            secrets,
        ),
        provider=provider,
        model=model,
        code="malformed_response",
        transport=True,
        stream_started=True,
    )


NOT_STREAMING = "not_streaming"


def check_streamed(
    headers: Mapping[str, str], *, provider: str, model: str, url: str | None = None
) -> None:
    """A streamed request answered with a plain JSON body (a server that ignores `stream: true`,
    some do when tools are given) is reported at once, with its own code: made again it
    answers the same way, so it is no transport fault to retry (issue 24)."""
    kind = headers.get("content-type", "")
    if not kind or "text/event-stream" in kind.lower():
        return
    where = f" at {url}" if url else ""
    raise ProviderError(
        f"the server answered without streaming{where} (Content-Type: {kind.split(';')[0]}) "
        "to a streamed request: it does not stream, or not with these options (some servers "
        "ignore `stream: true` when tools are given). Use an endpoint that streams.",
        provider=provider,
        model=model,
        code=NOT_STREAMING,
    )


def missing_key_error(*, provider: str, model: str, profile_id: str | None) -> ProviderError:
    where = f" (auth profile {profile_id})" if profile_id else ""
    return ProviderError(
        f"No API key found for provider {provider}{where}.",
        provider=provider,
        model=model,
        code="missing_api_key",
    )


def is_transport_failure(err: BaseException) -> bool:
    return isinstance(err, httpx2.TransportError)


def _describe(err: BaseException) -> str:
    """The SDK's own words ("Connection error.", "Request timed out.") and then the causes.

    Errors of the HTTP layer that the SDK let through unwrapped get the same words first, so a
    cut stream reads the same from either SDK.
    """
    if isinstance(err, httpx2.TimeoutException):
        parts = ["Request timed out.", f"{type(err).__name__}: {err}"]
    elif isinstance(err, httpx2.TransportError):
        parts = ["Connection error.", f"{type(err).__name__}: {err}"]
    else:
        parts = [str(err) or type(err).__name__]
    cause = err.__cause__ or err.__context__
    for _ in range(3):
        if cause is None:
            break
        detail = str(cause)
        text = f"{type(cause).__name__}: {detail}" if detail else type(cause).__name__
        # httpx re-raises one failure under several names; say each thing once.
        if not any(detail and detail in part for part in parts):
            parts.append(text)
        cause = cause.__cause__ or cause.__context__
    return " <- ".join(parts)


def _transport_code(err: BaseException) -> str:
    chain: list[BaseException] = []
    current: BaseException | None = err
    while current is not None and len(chain) < 5:
        chain.append(current)
        current = current.__cause__ or current.__context__
    if any(isinstance(e, (httpx2.TimeoutException, TimeoutError)) for e in chain):
        return "ETIMEDOUT"
    if any(isinstance(e, socket.gaierror) for e in chain):
        return "ENOTFOUND"  # the host name does not resolve
    if any(isinstance(e, httpx2.ConnectError | ConnectionRefusedError) for e in chain):
        return "ECONNREFUSED"
    return "ECONNRESET"
