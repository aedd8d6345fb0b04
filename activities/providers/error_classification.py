"""Classify provider errors into failover reasons (SPEC §5) and phrase them for users (§5.8).

Pure functions over strings and numbers; the phrase data lives in `error_patterns`. The model-call
activity uses this to raise typed failures; the run workflow decides what to do with them.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Final

from activities.providers import error_patterns as p
from agentlane.errors import FailoverReason
from agentlane.thinking_levels import is_reasoning_constraint_message

R = FailoverReason


@dataclass(frozen=True, slots=True)
class Classification:
    """What an error means for failover: a reason, a context overflow, or nothing known.

    Context overflow is not a failover reason (another model will not fit the prompt either);
    the run loop compacts instead.
    """

    reason: FailoverReason | None = None
    context_overflow: bool = False

    def __post_init__(self) -> None:
        if self.reason is not None and self.context_overflow:
            raise ValueError("a classification is either a failover reason or a context overflow")

    @property
    def unclassified(self) -> bool:
        return self.reason is None and not self.context_overflow

    @property
    def label(self) -> str:
        """The reason's value, "context_overflow" or "none" (for logs and test ids)."""
        if self.context_overflow:
            return "context_overflow"
        return self.reason.value if self.reason is not None else "none"


UNCLASSIFIED: Final = Classification()
CONTEXT_OVERFLOW: Final = Classification(context_overflow=True)
_BY_REASON: Final[Mapping[FailoverReason, Classification]] = {
    reason: Classification(reason=reason) for reason in FailoverReason
}


def _of(reason: FailoverReason | None) -> Classification:
    return UNCLASSIFIED if reason is None else _BY_REASON[reason]


def _matches(family: p.Family, lowered: str) -> bool:
    return p.first_match(family, lowered) is not None


# --------------------------------------------------------------------------------------------
# Single-family checks (public: the run loop and reply layer ask these questions directly)
# --------------------------------------------------------------------------------------------


def is_rate_limit_message(text: str) -> bool:
    return _matches(p.RATE_LIMIT, text.lower())


def is_overloaded_message(text: str) -> bool:
    return _matches(p.OVERLOADED, text.lower())


def is_server_error_message(text: str) -> bool:
    return _matches(p.SERVER_ERROR, text.lower())


def is_timeout_message(text: str) -> bool:
    """Timeout or transport failure wording (§5.2 Timeout / transport)."""
    return _matches(p.TIMEOUT, text.lower())


def is_transport_message(text: str) -> bool:
    """The subset of timeout wording that means the provider could not be reached at all."""
    return _matches(p.TRANSPORT, text.lower())


def is_billing_message(text: str) -> bool:
    """Billing wording; texts over 512 chars need a hard 402 marker or the Z.ai billing code."""
    lowered = text.lower()
    if len(lowered) > p.BILLING_SOFT_MAX_CHARS:
        return _matches(p.HARD_402_MARKERS, lowered) or _matches(p.ZAI_BILLING_CODE, lowered)
    return _matches(p.BILLING, lowered)


def is_auth_permanent_message(text: str) -> bool:
    return _matches(p.AUTH_PERMANENT, text.lower())


def is_auth_message(text: str) -> bool:
    return _matches(p.AUTH, text.lower())


def is_format_message(text: str) -> bool:
    return _matches(p.FORMAT, text.lower())


def is_model_not_found_message(text: str) -> bool:
    return _matches(p.MODEL_NOT_FOUND, text.lower())


def is_session_expired_message(text: str) -> bool:
    return _matches(p.SESSION_EXPIRED, text.lower())


def is_image_dimension_error(text: str) -> bool:
    return _matches(p.IMAGE_DIMENSION_ERROR, text.lower())


def image_size_error(text: str) -> int | None:
    """The provider's image size limit in whole MB ("image exceeds 5 MB"), or None.

    A fractional limit is rounded down so advice to get under it is never wrong.
    """
    found = p.IMAGE_SIZE_MB.search(text.lower())
    return math.floor(float(found.group(1))) if found else None


def role_ordering_error(text: str) -> bool:
    """The provider rejected the order of user/assistant roles in the transcript."""
    return _matches(p.ROLE_ORDERING, text.lower())


def has_hard_402_marker(text: str) -> bool:
    return _matches(p.HARD_402_MARKERS, text.lower())


# --------------------------------------------------------------------------------------------
# §5.5 Context overflow
# --------------------------------------------------------------------------------------------


def _overflow_excluded(lowered: str) -> bool:
    # TPM limits and "reasoning cannot be disabled" use overflow-like words but are not overflows.
    return _matches(p.TPM_HINT, lowered) or is_reasoning_constraint_message(lowered)


def is_context_overflow_error(text: str) -> bool:
    """High-confidence context overflow wording."""
    lowered = text.lower()
    return not _overflow_excluded(lowered) and _matches(p.CONTEXT_OVERFLOW, lowered)


def is_likely_context_overflow_error(text: str) -> bool:
    """The run loop's broader test: overflow wording, or vaguer size words with no rate limit."""
    lowered = text.lower()
    if (
        _overflow_excluded(lowered)
        or is_billing_message(lowered)
        or _matches(p.CONTEXT_WINDOW_TOO_SMALL, lowered)
        or _matches(p.RATE_LIMIT, lowered)
    ):
        return False
    if _matches(p.CONTEXT_OVERFLOW, lowered):
        return True
    if _matches(p.RATE_LIMIT_HINTS, lowered):
        return False
    return _matches(p.LIKELY_OVERFLOW_HINTS, lowered)


def is_compaction_failure_error(text: str) -> bool:
    """Compaction itself failed for lack of room: compacting again will not help."""
    lowered = text.lower()
    if not _matches(p.COMPACTION_MENTION, lowered):
        return False
    return is_likely_context_overflow_error(lowered) or "context overflow" in lowered


# --------------------------------------------------------------------------------------------
# §5.6, §5.7 Numbers read from messages
# --------------------------------------------------------------------------------------------


def observed_overflow_token_count(text: str) -> int | None:
    """How many tokens the provider says the rejected prompt had, if it says so."""
    lowered = text.lower()
    for token_pattern in p.OBSERVED_TOKEN_COUNT:
        found = token_pattern.search(lowered)
        if found:
            count = int(found.group(1).replace(",", ""))
            return count if count > 0 else None
    return None


def leading_http_status(text: str) -> int | None:
    """A status written at the head of a message: "503 ..." or "HTTP 503: ..."."""
    found = p.LEADING_STATUS.match(text.lower())
    return int(found.group(1)) if found else None


def is_transient_http_error(text: str) -> bool:
    """A leading status that is worth one blind retry of the whole request (§5.7)."""
    return leading_http_status(text) in p.TRANSIENT_HTTP_STATUSES


def failover_status(reason: FailoverReason | None) -> int | None:
    """The HTTP status a failover error with this reason reports (§5.1)."""
    return p.FAILOVER_STATUS.get(reason) if reason is not None else None


# --------------------------------------------------------------------------------------------
# §5.4 402 sub-classification
# --------------------------------------------------------------------------------------------


def classify_payment_required(text: str) -> FailoverReason:
    """A 402 is usually billing, but some providers use it for resettable usage limits."""
    body = p.PAYMENT_REQUIRED_WRAPPER.sub("", text.lower(), count=1)
    for family, reason in p.PAYMENT_REQUIRED_STEPS:
        if _matches(family, body):
            return reason
    return p.PAYMENT_REQUIRED_DEFAULT


# --------------------------------------------------------------------------------------------
# §5.3 Message classifier: steps tried in order, the first that answers wins
# --------------------------------------------------------------------------------------------

_Step = Callable[[str, str], Classification | None]


def _image_error(lowered: str, provider: str) -> Classification | None:
    # Image problems are answered with their own payload, never by failover.
    if _matches(p.IMAGE_DIMENSION_ERROR, lowered) or p.IMAGE_SIZE_MB.search(lowered):
        return UNCLASSIFIED
    return None


def _family_step(family: p.Family, reason: FailoverReason) -> _Step:
    def step(lowered: str, provider: str) -> Classification | None:
        return _of(reason) if _matches(family, lowered) else None

    return step


def _overflow(lowered: str, provider: str) -> Classification | None:
    return CONTEXT_OVERFLOW if is_context_overflow_error(lowered) else None


def _raw_402(lowered: str, provider: str) -> Classification | None:
    if _matches(p.HARD_402_MARKERS, lowered):
        return _of(classify_payment_required(lowered))
    return None


def _provider_step(rule: p.ProviderRule) -> _Step:
    def step(lowered: str, provider: str) -> Classification | None:
        if rule.provider_contains in provider and _matches(rule.family, lowered):
            return _of(rule.reason)
        return None

    return step


def _periodic_usage_limit(lowered: str, provider: str) -> Classification | None:
    if not _matches(p.PERIODIC_USAGE_LIMIT, lowered):
        return None
    return _of(R.BILLING if is_billing_message(lowered) else R.RATE_LIMIT)


def _leading_transient_status(lowered: str, provider: str) -> Classification | None:
    status = leading_http_status(lowered)
    if status not in p.TRANSIENT_HTTP_STATUSES:
        return None
    return _of(R.OVERLOADED if status == 529 else R.TIMEOUT)


def _billing(lowered: str, provider: str) -> Classification | None:
    return _of(R.BILLING) if is_billing_message(lowered) else None


def _api_error_transient(lowered: str, provider: str) -> Classification | None:
    # A JSON api_error is only transient when it does not also say billing or auth.
    if (
        not _matches(p.API_ERROR_TYPE, lowered)
        or is_billing_message(lowered)
        or _matches(p.AUTH, lowered)
        or _matches(p.AUTH_PERMANENT, lowered)
    ):
        return None
    return _of(R.TIMEOUT) if _matches(p.API_ERROR_TRANSIENT_HINTS, lowered) else None


def _cloud_code_assist_format(lowered: str, provider: str) -> Classification | None:
    if _matches(p.FORMAT, lowered) and not _matches(p.IMAGE_DIMENSION_ERROR, lowered):
        return _of(R.FORMAT)
    return None


def _provider_specific(lowered: str, provider: str) -> Classification | None:
    for family, reason in p.PROVIDER_SPECIFIC_FALLBACKS:
        if _matches(family, lowered):
            return _of(reason)
    return None


MESSAGE_STEPS: Final[tuple[tuple[str, _Step], ...]] = (
    ("image dimension/size error", _image_error),
    ("session expired", _family_step(p.SESSION_EXPIRED, R.SESSION_EXPIRED)),
    ("model not found", _family_step(p.MODEL_NOT_FOUND, R.MODEL_NOT_FOUND)),
    ("context overflow", _overflow),
    ("raw 402 marker", _raw_402),
    ("openrouter key limit", _provider_step(p.OPENROUTER_KEY_LIMIT)),
    ("periodic usage limit", _periodic_usage_limit),
    ("rate limit", _family_step(p.RATE_LIMIT, R.RATE_LIMIT)),
    ("overloaded", _family_step(p.OVERLOADED, R.OVERLOADED)),
    ("leading transient http status", _leading_transient_status),
    ("billing", _billing),
    ("auth permanent", _family_step(p.AUTH_PERMANENT, R.AUTH_PERMANENT)),
    ("auth", _family_step(p.AUTH, R.AUTH)),
    ("anthropic unknown error", _provider_step(p.ANTHROPIC_UNKNOWN_ERROR)),
    ("openrouter provider returned error", _provider_step(p.OPENROUTER_PROVIDER_ERROR)),
    ("server error", _family_step(p.SERVER_ERROR, R.TIMEOUT)),
    ("json api_error transient", _api_error_transient),
    ("cloud code assist format", _cloud_code_assist_format),
    ("timeout", _family_step(p.TIMEOUT, R.TIMEOUT)),
    ("provider-specific", _provider_specific),
)


def classify_failover_message(text: str, provider: str | None = None) -> Classification:
    """Classify an error message alone, in the order of SPEC §5.3."""
    lowered = text.lower()
    provider_lowered = (provider or "").lower()
    for _name, step in MESSAGE_STEPS:
        result = step(lowered, provider_lowered)
        if result is not None:
            return result
    return UNCLASSIFIED


def classify_failover_reason(text: str, provider: str | None = None) -> FailoverReason | None:
    """The failover reason of a message; None for unclassified text and for context overflow."""
    return classify_failover_message(text, provider).reason


def is_failover_message(text: str, provider: str | None = None) -> bool:
    return classify_failover_reason(text, provider) is not None


# --------------------------------------------------------------------------------------------
# §5.4 Status, symbolic code and message combined
# --------------------------------------------------------------------------------------------


def classify_http_status(
    status: int, message: str = "", provider: str | None = None
) -> Classification:
    """What a status says given the message that came with it (UNCLASSIFIED: it says nothing)."""
    row = p.HTTP_STATUS_TABLE.get(status)
    if row is None:
        return UNCLASSIFIED
    if row.payment_required:
        return _of(classify_payment_required(message))
    lowered = message.lower()
    for family, reason in row.phrase_overrides:
        if _matches(family, lowered):
            return _of(reason)
    from_message = classify_failover_message(message, provider)
    if row.overflow_passthrough and from_message.context_overflow:
        return CONTEXT_OVERFLOW
    if from_message.reason in row.message_passthrough:
        return from_message
    return _of(row.default)


def classify_symbolic_code(code: str | None) -> FailoverReason | None:
    """RESOURCE_EXHAUSTED, ECONNRESET, overloaded_error and the like (case-insensitive)."""
    return p.SYMBOLIC_CODES.get(code.strip().upper()) if code else None


def parse_status(value: object) -> int | None:
    """An HTTP status from an int or a numeric string ("429"); None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _status_and_code(
    status: int | str | None, code: int | str | None
) -> tuple[int | None, str | None]:
    # Providers disagree on which field holds what: Google sends `code: 429` with
    # `status: "RESOURCE_EXHAUSTED"`. Numbers are statuses, words are symbolic codes.
    numeric = parse_status(status)
    if numeric is None:
        numeric = parse_status(code)
    symbolic = next(
        (v for v in (code, status) if isinstance(v, str) and parse_status(v) is None and v.strip()),
        None,
    )
    return numeric, symbolic


def classify_error(
    message: str,
    status: int | str | None = None,
    code: int | str | None = None,
    provider: str | None = None,
) -> Classification:
    """Classify a provider error from everything it reported (§5.4).

    The status wins over the message; if the status says nothing, a symbolic code is tried, then
    the message alone. Without a status field, a status at the head of the message counts.
    """
    numeric, symbolic = _status_and_code(status, code)
    if numeric is None:
        numeric = leading_http_status(message)
    if numeric is not None:
        by_status = classify_http_status(numeric, message, provider)
        if not by_status.unclassified:
            return by_status
    by_code = classify_symbolic_code(symbolic)
    if by_code is not None:
        return _of(by_code)
    return classify_failover_message(message, provider)


# --------------------------------------------------------------------------------------------
# §5.4 Exceptions: provider SDK errors, wrapped causes, timeouts
# --------------------------------------------------------------------------------------------

_STATUS_FIELDS: Final = ("status", "status_code", "statusCode")
_REQUEST_ABORTED = re.compile(r"request (?:was )?aborted")


def _field(source: object, name: str) -> object:
    if isinstance(source, Mapping):
        return source.get(name)
    return getattr(source, name, None)


def _error_layers(source: object) -> Iterator[object]:
    """The object itself, then what it carries in `.error` (attribute or key), and so on."""
    seen: set[int] = set()
    current: object = source
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = _field(current, "error")


def _first_field(layers: list[object], names: tuple[str, ...]) -> int | str | None:
    for layer in layers:
        for name in names:
            value = _field(layer, name)
            if isinstance(value, int | str) and not isinstance(value, bool):
                return value
    return None


def _message_of(error: object, layers: list[object]) -> str:
    for layer in layers:
        value = _field(layer, "message")
        if isinstance(value, str) and value:
            return value
    return str(error) if isinstance(error, BaseException) else ""


def _classify_own_fields(error: object, provider: str | None) -> Classification:
    layers = list(_error_layers(error))
    own_provider = _field(error, "provider")
    return classify_error(
        _message_of(error, layers),
        status=_first_field(layers, _STATUS_FIELDS),
        code=_first_field(layers, ("code",)),
        provider=own_provider if isinstance(own_provider, str) else provider,
    )


def _looks_like_timeout(error: BaseException) -> bool:
    if isinstance(error, TimeoutError):
        return True
    # httpx.ReadTimeout, anthropic.APITimeoutError, openai.APITimeoutError, ...
    if any("timeout" in cls.__name__.lower() for cls in type(error).__mro__):
        return True
    return bool(getattr(error, "transport", False) is True)


def _is_abort_timeout(error: BaseException) -> bool:
    if type(error).__name__ != "AbortError":
        return False
    if _REQUEST_ABORTED.search(str(error).lower()):
        return True
    cause = error.__cause__
    return cause is not None and (_looks_like_timeout(cause) or is_timeout_message(str(cause)))


def classify_exception(error: BaseException, provider: str | None = None) -> Classification:
    """Classify a raised error, looking through `.error` payloads and `__cause__` chains.

    An exception carrying a `failover_reason` keeps it. When the error itself says nothing (or
    only "context overflow"), a wrapped cause that names a reason wins: an overflow-looking
    wrapper around RESOURCE_EXHAUSTED is a rate limit. Timeout-shaped errors are timeouts last.
    """
    return _classify_exception(error, provider, seen=set())


def _classify_exception(
    error: BaseException, provider: str | None, seen: set[int]
) -> Classification:
    seen.add(id(error))
    kept = getattr(error, "failover_reason", None)
    if isinstance(kept, FailoverReason):
        return _of(kept)
    result = _classify_own_fields(error, provider)
    cause = error.__cause__
    # A cause chain can loop (a.__cause__ = b; b.__cause__ = a); each error is read once.
    if result.reason is None and cause is not None and id(cause) not in seen:
        from_cause = _classify_exception(cause, provider, seen)
        if from_cause.reason is not None:
            return from_cause
    if result.unclassified and (
        _looks_like_timeout(error) or is_timeout_message(str(error)) or _is_abort_timeout(error)
    ):
        return _of(R.TIMEOUT)
    return result


# --------------------------------------------------------------------------------------------
# §5.8 User-facing text
# --------------------------------------------------------------------------------------------

UNKNOWN_ERROR_TEXT: Final = "LLM request failed with an unknown error."
CONTEXT_OVERFLOW_TEXT: Final = (
    "Context overflow: prompt too large for the model. Try /reset (or /new) to start a fresh "
    "session, or switch to a model with a larger context window."
)
REASONING_REQUIRED_TEXT: Final = (
    "Reasoning is required for this model endpoint. Use /think minimal (or any level other "
    "than off) and try again."
)
ROLE_ORDERING_TEXT: Final = (
    "Message ordering conflict - please try again. If this persists, use /new to start a fresh "
    "session."
)
RATE_LIMIT_TEXT: Final = "The AI service is temporarily rate-limited. Please try again in a moment."
OVERLOADED_TEXT: Final = "The AI service is temporarily overloaded. Please try again in a moment."
TRANSPORT_TEXT: Final = (
    "LLM request failed: could not reach the model provider (network error). Please try again."
)
TIMEOUT_TEXT: Final = "LLM request timed out."
# Statuses that do mean the request ran out of time (request timeout, gateway timeouts).
TIMEOUT_STATUSES: Final = frozenset({408, 504, 522, 524})
BILLING_TEXT: Final = (
    "The model provider declined the request for billing reasons (out of credits or quota). "
    "Check the account's plan and billing, then try again."
)
MAX_RAW_ERROR_CHARS: Final = 600


def _api_error_payload(text: str) -> tuple[str | None, str | None]:
    """(type, message) of a JSON error payload such as `400 {"type":"error","error":{...}}`."""
    start = text.find("{")
    if start < 0:
        return None, None
    try:
        payload, _end = json.JSONDecoder().raw_decode(text, start)
    # Formatting an error must never raise; deeply nested junk exhausts the decoder's recursion.
    except (ValueError, RecursionError):
        return None, None
    layers = list(_error_layers(payload)) if isinstance(payload, Mapping) else []
    error_type = next(
        (t for t in (_field(layer, "type") for layer in reversed(layers)) if isinstance(t, str)),
        None,
    )
    message = next(
        (m for m in (_field(layer, "message") for layer in reversed(layers)) if isinstance(m, str)),
        None,
    )
    return error_type, message


def _truncated(text: str) -> str:
    if len(text) <= MAX_RAW_ERROR_CHARS:
        return text
    return text[:MAX_RAW_ERROR_CHARS] + "…"


def format_user_error_text(
    message: str | None, *, status: int | None = None, provider: str | None = None
) -> str:
    """A short, user-readable explanation of a provider error (SPEC §5.8, in its order)."""
    text = (message or "").strip()
    if not text:
        return UNKNOWN_ERROR_TEXT
    lowered = text.lower()
    if is_context_overflow_error(lowered):
        return CONTEXT_OVERFLOW_TEXT
    if is_reasoning_constraint_message(lowered):
        return REASONING_REQUIRED_TEXT
    if role_ordering_error(lowered) or _matches(p.ROLE_ORDERING_400_VARIANT, lowered):
        return ROLE_ORDERING_TEXT
    error_type, payload_message = _api_error_payload(text)
    if error_type == "invalid_request_error" and payload_message:
        return _truncated(f"LLM request rejected: {payload_message}")
    reason = classify_error(text, status, None, provider).reason
    if reason is R.RATE_LIMIT:
        return RATE_LIMIT_TEXT
    if reason is R.OVERLOADED:
        return OVERLOADED_TEXT
    if is_transport_message(lowered):
        return TRANSPORT_TEXT
    # The status wins over the words (SPEC §5.4): a 401 whose body echoes a header named
    # "...timeout" or a 503 that answered at once did not time out.
    if _matches(p.TIMEOUT_ONLY, lowered) and (status is None or status in TIMEOUT_STATUSES):
        return TIMEOUT_TEXT
    if reason is R.BILLING:
        return BILLING_TEXT
    if status is not None and not payload_message:
        return _truncated(f"LLM request failed (HTTP {status}): {text}")
    if payload_message:
        shown_status = status if status is not None else leading_http_status(text)
        prefix = (
            f"LLM request failed (HTTP {shown_status})" if shown_status else "LLM request failed"
        )
        return _truncated(f"{prefix}: {payload_message}")
    return _truncated(text)
