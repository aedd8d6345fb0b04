"""Webhook delivery contracts (issue 11): for adapters that cannot hold a connection open.

A message's routing names a callback URL (`Routing.callback_url`, optionally
`Routing.callback_secret_ref`); from then on the session POSTs its runs' block replies, final
replies and errors there, at least once and in order, each signed with HMAC-SHA256 under a
secret that never enters workflow history: the history holds only the secret's *reference* (an
id), the secret itself is a 0600 file in the data folder (`agentlane/webhook_secrets.py`).

The wire format, shared by the sender (`activities/webhook_delivery.py`) and receivers
(`clients/gateway/webhooks.py`):

- body: JSON `WebhookBody` (its `id` is the idempotency key: the stream event id of a block
  reply, `<run id>/final_reply` or `<run id>/error`);
- headers: `X-Agentlane-Id` (= body id, also sent as `Idempotency-Key`), `X-Agentlane-Kind`,
  `X-Agentlane-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>." + body>`.

How the session sequences deliveries (and what that costs) is in `activities/webhook_delivery.py`.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, Field

DELIVER_WEBHOOKS = "deliver_webhooks"
# Delivery activities follow a run for its duration, mostly waiting: they get their own task
# queue and worker slots, so they never hold the tool calls' slots.
MAX_CONCURRENT_DELIVERIES = 200


def webhook_task_queue(workflow_task_queue: str) -> str:
    return f"{workflow_task_queue}-webhooks"


HEADER_ID = "X-Agentlane-Id"
HEADER_IDEMPOTENCY = "Idempotency-Key"
HEADER_KIND = "X-Agentlane-Kind"
HEADER_SIGNATURE = "X-Agentlane-Signature"

MAX_URL_CHARS = 2048
SECRET_REF_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
# Error text kept in history (RunEnd, the session's status): short.
MAX_ERROR_CHARS = 500


class InvalidWebhook(ValueError):
    pass


def check_callback_url(url: str) -> str:
    """The URL if a session may POST to it, else `InvalidWebhook` saying why.

    http and https only. Which hosts are allowed is the operator's `[webhooks]` config
    (`agentlane/webhook_targets.py`: none inside the network by default). No user:password
    part (it would sit in workflow history: the signature is the credential) and no fragment
    (never sent by HTTP anyway)."""
    if len(url) > MAX_URL_CHARS:
        raise InvalidWebhook(f"callback URL is {len(url)} characters; the limit is {MAX_URL_CHARS}")
    if url != url.strip() or any(ch.isspace() for ch in url):
        raise InvalidWebhook("callback URL contains whitespace")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as err:
        raise InvalidWebhook(f"callback URL {url!r} is not a valid URL: {err}") from None
    if parts.scheme not in ("http", "https"):
        raise InvalidWebhook(
            f"callback URL {url!r} must start with http:// or https:// "
            f"(got {parts.scheme + '://' if parts.scheme else 'no scheme'})"
        )
    if not parts.hostname:
        raise InvalidWebhook(f"callback URL {url!r} names no host")
    if parts.username is not None or parts.password is not None:
        raise InvalidWebhook(
            "callback URL must not carry a user or password (it would be stored in the "
            "session's history); receivers authenticate deliveries by their signature"
        )
    if parts.fragment:
        raise InvalidWebhook(f"callback URL {url!r} has a #fragment; remove it")
    if port == 0:
        raise InvalidWebhook(f"callback URL {url!r} names port 0")
    return url


def check_secret_ref(ref: str) -> str:
    if not SECRET_REF_PATTERN.fullmatch(ref):
        raise InvalidWebhook(
            f"invalid webhook secret reference {ref!r}: 1-64 characters from letters, digits "
            "and ._- starting with a letter or digit (a reference names a secret stored by "
            "`agentlane webhook secret`, never the secret itself)"
        )
    return ref


def default_secret_ref(session_key: str) -> str:
    """The secret a session signs with when its routing names none: one per session key."""
    return "session-" + hashlib.sha256(session_key.encode()).hexdigest()[:24]


def sign(secret: bytes, timestamp: int, body: bytes) -> str:
    """Hex HMAC-SHA256 of `<timestamp>.` + body."""
    return hmac.new(secret, f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def signature_header(secret: bytes, timestamp: int, body: bytes) -> str:
    return f"t={timestamp},v1={sign(secret, timestamp, body)}"


class DeliveryKind(StrEnum):
    BLOCK_REPLY = "block_reply"
    FINAL_REPLY = "final_reply"
    ERROR = "error"
    # The queue policy dropped an accepted message (issue 19): `message_id` is the sender's
    # message id, `message_seq` the session's number, `status` its fate, `text` what happened.
    MESSAGE_DROPPED = "message_dropped"
    # A tool call waits for a person's yes, and what became of it (issue 21): `approval` holds
    # the id, tool, args preview, expiry (requested) or outcome and reason (decided).
    APPROVAL_REQUESTED = "approval_requested"
    APPROVAL_DECIDED = "approval_decided"


class WebhookBody(BaseModel):
    """What one POST carries. `id` is the idempotency key: a receiver that has seen it drops the
    repeat (delivery is at least once)."""

    id: str
    kind: DeliveryKind
    session_key: str
    run_id: str
    ts: float
    text: str = ""
    # block_reply: the block's number within its message; message_id: the assistant message.
    index: int | None = None
    message_id: str | None = None
    # final_reply / error: how the run ended (success, aborted, error) and, for errors, why.
    status: str | None = None
    error_code: str | None = None
    # message_dropped: the session's number of the dropped message.
    message_seq: int | None = None
    # approval_requested / approval_decided: the approval (`agentlane approve <key> <id>`).
    approval: dict[str, Any] | None = None
    # The channel routing of the message that named the callback (what an adapter needs to
    # post the reply back to the right chat/thread).
    channel: str | None = None
    to: str | None = None
    account: str | None = None
    thread: str | None = None


# -- what the session workflow carries (small: it crosses continue-as-new) --------------------


class WebhookTarget(BaseModel):
    url: str
    secret_ref: str
    channel: str | None = None
    to: str | None = None
    account: str | None = None
    thread: str | None = None


class RunEnd(BaseModel):
    """How a run ended, as the session learned it (no reply text: that is in the transcript)."""

    status: str
    last_entry_id: str | None = None
    error_code: str | None = None
    error_message: str | None = None


class BlockCursor(BaseModel):
    """Block replies of `message_id` below `next_index` are delivered: a retried model attempt
    re-publishes them under the same ids and they are not sent again."""

    message_id: str
    next_index: int = 0


class PendingRun(BaseModel):
    run_id: str
    ended: RunEnd | None = None


class WebhookState(BaseModel):
    target: WebhookTarget
    # Runs whose replies are still to deliver, oldest first; the head one is being delivered.
    queue: list[PendingRun] = Field(default_factory=list)
    # Where the head run's delivery resumes in the session's event stream, and its block cursor.
    offset: int = 0
    cursor: BlockCursor | None = None
    delivered: int = 0
    runs_delivered: int = 0
    runs_failed: int = 0
    last_error: str | None = None
    last_delivered_id: str | None = None
    last_delivered_at: float | None = None


class WebhookStatus(BaseModel):
    """Delivery status in `SessionStatus.webhook`. The attempt fields come from Temporal's view
    of the delivery activity (filled by the client from `describe`, at no history cost)."""

    url: str
    secret_ref: str
    delivered: int = 0
    pending_runs: int = 0
    current_run_id: str | None = None
    runs_delivered: int = 0
    runs_failed: int = 0
    last_error: str | None = None
    last_delivered_id: str | None = None
    last_delivered_at: float | None = None
    attempt: int | None = None
    next_attempt_at: float | None = None


class RunDeliveryInfo(BaseModel):
    """The session's answer to the `webhook_run` query of a delivery activity."""

    known: bool
    ended: RunEnd | None = None


class DeliverInput(BaseModel):
    session_key: str
    run_id: str
    target: WebhookTarget
    from_offset: int = 0
    cursor: BlockCursor | None = None
    # The activity returns after this long even if the run goes on (the session schedules the
    # next window): a run may last days, an activity's retries are bounded by a day.
    window_seconds: float = 600.0


class DeliverProgress(BaseModel):
    """Heartbeat details: where a retried attempt resumes."""

    offset: int
    cursor: BlockCursor | None = None
    delivered: int = 0
    final_sent: bool = False
    last_id: str | None = None


class DeliverResult(BaseModel):
    done: bool
    offset: int
    cursor: BlockCursor | None = None
    delivered: int = 0
    last_id: str | None = None
    # Stream items of this run lost to the stream's truncation before they were read.
    skipped: int = 0
