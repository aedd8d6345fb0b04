"""Receiving agentlane webhooks: signature checks for adapters and other receivers.

A delivery is a POST whose JSON body is `agentlane.webhooks.WebhookBody`, with headers
`X-Agentlane-Id` (the idempotency key: drop a repeat), `X-Agentlane-Kind` and
`X-Agentlane-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." + raw body)>`.
Verify against the *raw* body bytes, before parsing them:

    from clients.gateway.webhooks import verify
    body = verify(secret, request_body_bytes, headers["X-Agentlane-Signature"])

`verify` raises `WebhookVerificationError` on a bad or stale signature and returns the parsed
body. Every attempt is signed afresh, so the tolerance (5 minutes by default) bounds replays, not
retries.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Mapping

from agentlane.webhooks import (
    HEADER_ID,
    HEADER_SIGNATURE,
    WebhookBody,
    sign,
    signature_header,
)

__all__ = [
    "HEADER_ID",
    "HEADER_SIGNATURE",
    "WebhookVerificationError",
    "parse_signature",
    "signature_header",
    "verify",
    "verify_request",
]

DEFAULT_TOLERANCE_SECONDS = 300


class WebhookVerificationError(Exception):
    pass


def parse_signature(header: str) -> tuple[int, list[str]]:
    """`t=<ts>,v1=<hex>[,v1=<hex>...]` -> (ts, signatures)."""
    timestamp: int | None = None
    signatures: list[str] = []
    for part in header.split(","):
        name, _, value = part.strip().partition("=")
        if name == "t":
            try:
                timestamp = int(value)
            except ValueError:
                raise WebhookVerificationError(f"bad timestamp in signature: {value!r}") from None
        elif name == "v1" and value:
            signatures.append(value)
    if timestamp is None or not signatures:
        raise WebhookVerificationError("signature header lacks t= or v1=")
    return timestamp, signatures


def verify(
    secret: bytes | str,
    body: bytes,
    header: str | None,
    *,
    tolerance_seconds: float | None = DEFAULT_TOLERANCE_SECONDS,
    now: float | None = None,
) -> WebhookBody:
    """Check `header` signs `body` under `secret` (the text of the stored secret); return the
    parsed body. `tolerance_seconds=None` skips the age check."""
    if not header:
        raise WebhookVerificationError(f"no {HEADER_SIGNATURE} header")
    key = secret.encode() if isinstance(secret, str) else secret
    key = key.strip()
    timestamp, signatures = parse_signature(header)
    expected = sign(key, timestamp, body)
    if not any(hmac.compare_digest(expected, s) for s in signatures):
        raise WebhookVerificationError("signature does not match the body")
    if tolerance_seconds is not None:
        age = abs((time.time() if now is None else now) - timestamp)
        if age > tolerance_seconds:
            raise WebhookVerificationError(
                f"signature is {age:.0f} s old (tolerance {tolerance_seconds:.0f} s)"
            )
    try:
        return WebhookBody.model_validate_json(body)
    except ValueError as err:
        raise WebhookVerificationError(f"signed body is not a webhook body: {err}") from None


def verify_request(
    secret: bytes | str,
    body: bytes,
    headers: Mapping[str, str],
    *,
    tolerance_seconds: float | None = DEFAULT_TOLERANCE_SECONDS,
) -> WebhookBody:
    """`verify` with the headers of the request (any case); also checks `X-Agentlane-Id`
    matches the body's id."""
    lower = {k.lower(): v for k, v in headers.items()}
    parsed = verify(
        secret, body, lower.get(HEADER_SIGNATURE.lower()), tolerance_seconds=tolerance_seconds
    )
    key = lower.get(HEADER_ID.lower())
    if key is not None and key != parsed.id:
        raise WebhookVerificationError(f"{HEADER_ID} {key!r} does not match the body's id")
    return parsed
