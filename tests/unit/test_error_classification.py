"""Provider error classification (SPEC §5, §18.1) and user-facing error text (§5.8)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from activities.providers import error_patterns as p
from activities.providers.base import ProviderError
from activities.providers.error_classification import (
    BILLING_TEXT,
    CONTEXT_OVERFLOW,
    CONTEXT_OVERFLOW_TEXT,
    OVERLOADED_TEXT,
    RATE_LIMIT_TEXT,
    REASONING_REQUIRED_TEXT,
    ROLE_ORDERING_TEXT,
    TIMEOUT_TEXT,
    TRANSPORT_TEXT,
    UNCLASSIFIED,
    UNKNOWN_ERROR_TEXT,
    Classification,
    classify_error,
    classify_exception,
    classify_failover_message,
    classify_failover_reason,
    classify_http_status,
    classify_payment_required,
    classify_symbolic_code,
    failover_status,
    format_user_error_text,
    image_size_error,
    is_auth_message,
    is_billing_message,
    is_compaction_failure_error,
    is_context_overflow_error,
    is_failover_message,
    is_image_dimension_error,
    is_likely_context_overflow_error,
    is_rate_limit_message,
    is_transient_http_error,
    leading_http_status,
    observed_overflow_token_count,
    parse_status,
    role_ordering_error,
)
from agentlane.errors import FailoverReason

R = FailoverReason


def label(text: str, provider: str | None = None) -> str:
    return classify_failover_message(text, provider).label


# =============================================================================================
# §18.1 behavioural cases
# =============================================================================================


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("invalid api key", "auth", id="T01-invalid-api-key"),
        pytest.param("no credentials found", "auth", id="T01-no-credentials"),
        pytest.param("Missing scopes: model.request", "auth", id="T01-missing-scopes"),
        pytest.param("invalid_api_key", "auth", id="T01-invalid_api_key"),
        pytest.param("permission_error", "auth", id="T01-permission_error"),
        pytest.param("Your api key has been revoked", "auth_permanent", id="T01-revoked"),
        pytest.param("key has been disabled", "auth_permanent", id="T01-disabled"),
        pytest.param("account has been deactivated", "auth_permanent", id="T01-deactivated"),
        pytest.param(
            "OAuth authentication is currently not allowed for this organization",
            "auth_permanent",
            id="T01-not-allowed-org",
        ),
        pytest.param(
            "model_cooldown: All credentials for model gpt-5 are cooling down",
            "rate_limit",
            id="T02-model-cooldown",
        ),
        pytest.param(
            "all credentials for model x are cooling down", "none", id="T02-cooling-down-only"
        ),
        pytest.param("bad request", "none", id="T02-bad-request"),
        pytest.param("image exceeds 5 MB maximum", "none", id="T02-image-size"),
        pytest.param("LLM error: service unavailable", "timeout", id="T03-service-unavailable"),
        pytest.param("503 Internal Database Error", "timeout", id="T03-503"),
        pytest.param("529 API is busy", "overloaded", id="T03-529"),
        pytest.param("service unavailable due to capacity limits", "overloaded", id="T03-capacity"),
        pytest.param(
            "This model is currently experiencing high demand. Please try again later.",
            "overloaded",
            id="T03-high-demand",
        ),
        pytest.param(
            '{"type":"error","error":{"type":"api_error","message":"Internal server error"}}',
            "timeout",
            id="T07-api-error-internal",
        ),
        pytest.param(
            '{"type":"api_error","message":"unknown error, 520 (1000)"}',
            "timeout",
            id="T07-api-error-unknown-520",
        ),
        pytest.param(
            '{"type":"api_error","message":"insufficient credits"}',
            "billing",
            id="T07-api-error-billing",
        ),
        pytest.param(
            '{"type":"api_error","message":"invalid api key"}', "auth", id="T07-api-error-auth"
        ),
        pytest.param("Error: connect ETIMEDOUT 10.0.0.1:443", "timeout", id="T08-etimedout"),
        pytest.param("fetch failed", "timeout", id="T08-fetch-failed"),
        pytest.param("Connection error.", "timeout", id="T08-connection-error"),
        pytest.param("Unhandled stop reason: abort", "timeout", id="T08-stop-abort"),
        pytest.param("stream was aborted", "timeout", id="T08-stream-aborted"),
        pytest.param("Unhandled stop reason: network_error", "timeout", id="T08-network_error"),
        pytest.param(
            "Unhandled stop reason: MALFORMED_RESPONSE", "timeout", id="T08-malformed-response"
        ),
        pytest.param("request ended without sending any chunks", "timeout", id="T08-no-chunks"),
        pytest.param(
            "Unhandled stop reason: MALFORMED_FUNCTION_CALL", "none", id="T08-malformed-call"
        ),
    ],
)
def test_t01_t08_message_classification(text: str, expected: str) -> None:
    assert label(text) == expected


def test_t02_cooling_down_only_reason_is_null() -> None:
    assert classify_failover_reason("all credentials for model x are cooling down") is None


def test_t07_api_error_with_format_text_is_not_timeout() -> None:
    text = '{"type":"api_error","message":"invalid input format"}'
    assert classify_failover_reason(text) is not R.TIMEOUT


def test_t08_malformed_function_call_is_not_a_failover_message() -> None:
    assert not is_failover_message("Unhandled stop reason: MALFORMED_FUNCTION_CALL")


@pytest.mark.parametrize(
    ("text", "provider", "expected"),
    [
        pytest.param("An unknown error occurred", "anthropic", "timeout", id="T06-anthropic"),
        pytest.param("An unknown error occurred", None, "none", id="T06-unknown-no-provider"),
        pytest.param(
            "An unknown error occurred", "openrouter", "none", id="T06-unknown-openrouter"
        ),
        pytest.param("Provider returned error", "openrouter", "timeout", id="T06-openrouter"),
        pytest.param("Key limit exceeded", "openrouter", "billing", id="T06-key-limit"),
        pytest.param("Key limit exceeded", None, "none", id="T06-key-limit-no-provider"),
    ],
)
def test_t06_provider_scoped(text: str, provider: str | None, expected: str) -> None:
    assert label(text, provider) == expected


LONG_BILLING_PROSE = (
    "Sure! Here is a summary of how billing works on most AI platforms. Your credit balance is "
    "the amount of prepaid credits left on the account. When you run low, open Plans & Billing "
    "and either upgrade your plan or buy more credits; insufficient credits will stop requests. "
    "Payment required notices are usually emailed to the account owner. "
) * 3
LONG_JSON_402 = json.dumps(
    {"code": 402, "message": "payment required", "detail": "x" * 600, "docs": "https://example"}
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("Room 402 is available", False, id="T09-room-402"),
        pytest.param("processed 402 records", False, id="T09-402-records"),
        pytest.param("See ticket #402 for details", False, id="T09-ticket-402"),
        pytest.param("status: 402", True, id="T09-status-402"),
        pytest.param("got a 402 from the API", True, id="T09-got-a-402"),
        pytest.param('{"code":402,"message":"payment required"}', True, id="T09-json-402"),
        pytest.param(LONG_BILLING_PROSE, False, id="T09-long-prose"),
        pytest.param(LONG_JSON_402, True, id="T09-long-json-402"),
    ],
)
def test_t09_is_billing_message(text: str, expected: bool) -> None:
    assert is_billing_message(text) is expected


def test_t09_long_inputs_really_are_long() -> None:
    assert len(LONG_BILLING_PROSE) > 512
    assert len(LONG_JSON_402) > 512


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("prompt is too long: 208423 tokens > 200000 maximum", True, id="T10-prompt"),
        pytest.param("413 Request Entity Too Large", True, id="T10-413"),
        pytest.param(
            "Unhandled stop reason: model_context_window_exceeded", True, id="T10-stop-reason"
        ),
        pytest.param("上下文过长", True, id="T10-chinese"),
        pytest.param("Your request exceeded model token limit", True, id="T10-token-limit"),
        pytest.param("Let's investigate the context overflow bug", False, id="T10-prose"),
        pytest.param(
            "400 Reasoning is mandatory for this endpoint and cannot be disabled.",
            False,
            id="T10-reasoning",
        ),
        pytest.param("request size exceeds upload limit", False, id="T10-upload-limit"),
    ],
)
def test_t10_is_context_overflow_error(text: str, expected: bool) -> None:
    assert is_context_overflow_error(text) is expected


def test_openais_current_overflow_wording_and_code_are_an_overflow() -> None:
    """Review Q F-d: newer OpenAI models and the Responses API answer an oversized request
    with this 400; read as `format`, the run failed and so did every later message."""
    text = (
        "400 Your input exceeds the context window of this model. Please adjust your input and "
        "try again. (type: invalid_request_error, code: context_length_exceeded)"
    )
    assert classify_error(text, 400, "context_length_exceeded").context_overflow
    assert classify_error("Bad input (code: context_length_exceeded)", 400).context_overflow


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("auto-compaction failed due to context overflow", True, id="T12-auto"),
        pytest.param("Compaction failed: prompt is too long", True, id="T12-compaction-failed"),
        pytest.param("Context overflow: prompt too large", False, id="T12-plain-overflow"),
    ],
)
def test_t12_is_compaction_failure_error(text: str, expected: bool) -> None:
    assert is_compaction_failure_error(text) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "400 invalid_request_error: prompt is too long: 277403 tokens > 200000 maximum",
            277403,
            id="T12-prompt-too-long",
        ),
        pytest.param(
            "This model's maximum context length is 128000 tokens. However, your messages "
            "resulted in 145000 tokens.",
            145000,
            id="T12-resulted-in",
        ),
        pytest.param("Prompt too large for this model", None, id="T12-no-count"),
    ],
)
def test_t12_observed_overflow_token_count(text: str, expected: int | None) -> None:
    assert observed_overflow_token_count(text) == expected


class SdkError(Exception):
    """Stands in for an SDK error object: arbitrary fields as attributes."""

    def __init__(self, message: str = "", **fields: Any) -> None:
        super().__init__(message)
        for name, value in fields.items():
            setattr(self, name, value)


class AbortError(Exception):
    """Named like the fetch API's abort error, which the classifier recognises by name."""


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        pytest.param(SdkError(status=402), "billing", id="T14-402"),
        pytest.param(SdkError(statusCode="429"), "rate_limit", id="T14-statusCode-string-429"),
        pytest.param(SdkError(status=403), "auth", id="T14-403"),
        *[
            pytest.param(SdkError(status=status), "timeout", id=f"T14-{status}")
            for status in (408, 410, 499, 500, 502, 503, 504)
        ],
        pytest.param(SdkError(status=400), "format", id="T14-400"),
        pytest.param(SdkError(status=422), "format", id="T14-422"),
        pytest.param(SdkError(status=529), "overloaded", id="T14-529"),
        *[
            pytest.param(SdkError(status=status), "none", id=f"T14-bare-{status}")
            for status in (521, 522, 523, 524)
        ],
        pytest.param(SdkError(code="ECONNRESET"), "timeout", id="T14-ECONNRESET"),
        pytest.param(SdkError(code="RESOURCE_EXHAUSTED"), "rate_limit", id="T14-RESOURCE_EX"),
        pytest.param(
            SdkError("api key revoked", status=403), "auth_permanent", id="T14-403-revoked"
        ),
    ],
)
def test_t14_error_objects(error: BaseException, expected: str) -> None:
    assert classify_exception(error).label == expected


def test_t14_abort_wrapping_resource_exhausted_is_rate_limit_429() -> None:
    wrapped = SdkError(error={"code": 429, "status": "RESOURCE_EXHAUSTED"})
    abort = AbortError("request aborted")
    abort.__cause__ = wrapped
    result = classify_exception(abort)
    assert result.reason is R.RATE_LIMIT
    assert failover_status(result.reason) == 429


def test_t14_overflow_text_with_resource_exhausted_cause_is_rate_limit() -> None:
    error = RuntimeError("prompt is too long: 300000 tokens > 200000 maximum")
    error.__cause__ = SdkError(code="RESOURCE_EXHAUSTED")
    assert classify_exception(error).reason is R.RATE_LIMIT


# =============================================================================================
# §5.2 phrase families: every rule has an example, every example lands on its family's result
# =============================================================================================

FAMILY_EXAMPLES: dict[str, tuple[p.Family, str, tuple[str, ...]]] = {
    "rate_limit": (
        p.RATE_LIMIT,
        "rate_limit",
        (
            "Rate limit reached for requests",
            '{"error":{"type":"rate_limit_error"}}',
            "Too Many Requests",
            "Too many concurrent requests for this model",
            "ThrottlingException: Rate exceeded",
            "throttling_exception",
            "Request was throttled",
            "model_cooldown: all credentials are cooling down",
            "You exceeded your current quota, please check your plan",
            "Resource has been exhausted (e.g. check quota).",
            "Quota exceeded for metric generate_content_requests",
            "RESOURCE_EXHAUSTED",
            "You have hit your usage limit",
            "Limit of 30000 tokens per minute reached",
            "tokens per day limit reached",
            "upstream said 429",
            "TPM limit reached",
        ),
    ),
    "periodic_usage_limit": (
        p.PERIODIC_USAGE_LIMIT,
        "rate_limit",
        ("Daily limit reached", "weekly/monthly usage limits exceeded", "Monthly limits hit"),
    ),
    "overloaded": (
        p.OVERLOADED,
        "overloaded",
        (
            '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
            "Model is overloaded",
            "experiencing high demand",
            "Service unavailable (server overload)",
            "Service Unavailable: insufficient capacity",
        ),
    ),
    "server_error": (
        p.SERVER_ERROR,
        "timeout",
        (
            "An error occurred while processing your request.",
            "Internal Server Error",
            '{"code":"internal_error"}',
            "server_error",
            "Service temporarily unavailable",
            "service_unavailable",
            "Bad Gateway",
            "Gateway Timeout",
            "upstream error",
            "upstream connect error or disconnect/reset before headers",
            "connection reset by peer",
        ),
    ),
    "timeout_only": (
        p.TIMEOUT_ONLY,
        "timeout",
        (
            "Request timeout",
            "request timed out",
            "service unavailable",
            "deadline exceeded",
            "rpc error: context deadline exceeded",
            "The operation was aborted",
            "connect ETIMEDOUT",
            "ESOCKETTIMEDOUT",
            "request ended without sending chunk",
            "reason: error",
            "stream closed",
        ),
    ),
    "transport": (
        p.TRANSPORT,
        "timeout",
        (
            "Connection error.",
            "network error",
            "Network request failed",
            "TypeError: fetch failed",
            "socket hang up",
            "connect ECONNREFUSED 127.0.0.1:11434",
            "read ECONNRESET",
            "ECONNABORTED",
            "ENETUNREACH",
            "EHOSTUNREACH",
            "EHOSTDOWN",
            "ENETRESET",
            "write EPIPE",
            "getaddrinfo ENOTFOUND api.example.com",
            "getaddrinfo EAI_AGAIN api.example.com",
        ),
    ),
    "billing": (
        p.BILLING,
        "billing",
        (
            '{"status": 402}',
            "HTTP 402",
            "error code 402",
            "the upstream returned a 402",
            "402 Payment Required",
            '{"code": 1311, "msg": "plan expired"}',
            "Payment required",
            "insufficient credits",
            "Insufficient quota for this key",
            "insufficient_quota",
            "Your credit balance is too low to access the Anthropic API.",
            "Visit Plans & Billing to continue",
            "Insufficient Balance",
            "insufficient USD or Diem balance",
            "This request requires more credits",
            "You're out of extra usage",
            "cannot draw from your extra usage",
            "extra usage is required for this model",
            "Billing: please upgrade to continue",
        ),
    ),
    "auth_permanent": (
        p.AUTH_PERMANENT,
        "auth_permanent",
        (
            "api_key_revoked",
            "API key deleted",
            "key has been disabled",
            "This key has been revoked",
            "account has been deactivated",
            "not allowed for this organization",
        ),
    ),
    "auth": (
        p.AUTH,
        "auth",
        (
            "invalidApiKey",
            "Could not authenticate with the provided API key",
            "permission_error",
            "Incorrect API key provided",
            "Invalid token",
            "authentication_error",
            "Please re-authenticate",
            "OAuth token refresh failed",
            "Unauthorized",
            "Forbidden",
            "Access denied",
            "insufficient permissions",
            "Missing scope: api.responses.write",
            "token has expired",
            "401",
            "403",
            "no credentials found",
            "No API key found for provider openai",
            "Failed to decode the id token",
            '{"code": 1113, "msg": "token invalid"}',
        ),
    ),
    "format": (
        p.FORMAT,
        "format",
        (
            "String should match pattern '^[a-zA-Z0-9_-]+$'",
            "messages.1.content.1.tool_use.id: String should match pattern",
            "unexpected tool_use_id found in tool_result blocks",
            "Invalid request format",
            "Tool call id was abc.1 but must be alphanumeric",
        ),
    ),
    "model_not_found": (
        p.MODEL_NOT_FOUND,
        "model_not_found",
        (
            "No endpoints found for foo/bar.",
            "Unknown model: gpt-9",
            "model_not_found",
            "404 page not found",
            '{"type":"not_found_error","message":"model: claude-9"}',
            "model: claude-9 not found",
            "models/gemini-9 is not found for API version v1beta",
            "The model `gpt-9` does not exist",
            "The model claude-2 is deprecated, please upgrade to claude-3",
            "This was a stealth model; find it here: https://example",
            "foo is not a valid model ID",
            "Invalid model: foo",
        ),
    ),
    "session_expired": (
        p.SESSION_EXPIRED,
        "session_expired",
        (
            "Session not found",
            "conversation does not exist",
            "session expired",
            "No such session",
            "invalid session id",
            "session id not found",
            "Conversation ID not found",
        ),
    ),
    "context_overflow": (
        p.CONTEXT_OVERFLOW,
        "context_overflow",
        (
            "request_too_large",
            "INVALID_ARGUMENT: more than the maximum number of tokens allowed",
            "Request exceeds the maximum size",
            "context length exceeded",
            "maximum context length is 8192 tokens",
            "prompt is too long",
            "prompt too long",
            "input exceeds model context window",
            "model token limit",
            "input exceeds the maximum number of tokens",
            "request size exceeds model context window",
            "Context overflow: prompt too large",
            "messages exceed context limit",
            "This request exceeds the model's maximum context",
            "max_tokens would exceed the context",
            "input length and max_tokens exceed context limit",
            "413 Payload Too Large",
            "context_window_exceeded",
            "Your input exceeds the context window of this model.",
            "code: context_length_exceeded",
            "上下文过长",
            "上下文超出限制",
            "上下文长度超过限制",
            "超出最大上下文",
            "请压缩上下文后重试",
            "Input token count exceeds the maximum number of input tokens",
            "Input is too long for this model",
            "ollama error: context length exceeded",
            "total tokens of 5000 exceeds the model limit",
            "request (5000 tokens) exceeds the available context size (4096 tokens)",
            "input too long for model",
        ),
    ),
}

_FAMILY_SAMPLES = [
    pytest.param(text, expected, id=f"{name}-{index}")
    for name, (_family, expected, samples) in FAMILY_EXAMPLES.items()
    for index, text in enumerate(samples)
]


@pytest.mark.parametrize(("text", "expected"), _FAMILY_SAMPLES)
def test_family_example_classifies(text: str, expected: str) -> None:
    assert label(text) == expected


@pytest.mark.parametrize("name", list(FAMILY_EXAMPLES))
def test_every_rule_of_a_family_has_an_example(name: str) -> None:
    family, _expected, samples = FAMILY_EXAMPLES[name]
    lowered = [sample.lower() for sample in samples]
    unexercised = [rule.name for rule in family if not any(rule.matches(s) for s in lowered)]
    assert unexercised == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("ThrottlingException", "rate_limit", id="throttlingexception"),
        pytest.param("Concurrency limit has been reached", "rate_limit", id="concurrency"),
        pytest.param("workers_ai: quota limit exceeded", "rate_limit", id="workers-ai"),
        pytest.param("ModelNotReadyException", "overloaded", id="model-not-ready"),
        pytest.param("model_deactivated", "model_not_found", id="model_deactivated"),
        pytest.param("model_is_deactivated", "model_not_found", id="model_is_deactivated"),
        pytest.param("The model has been deactivated", "model_not_found", id="deactivated"),
    ],
)
def test_provider_specific_fallbacks(text: str, expected: str) -> None:
    assert label(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("Monthly limit reached: insufficient credits", "billing", id="periodic+bill"),
        pytest.param("Your daily usage limit is exhausted", "rate_limit", id="periodic-only"),
        pytest.param("Room 402: daily limit", "rate_limit", id="room-402-not-billing"),
    ],
)
def test_periodic_usage_limit_billing_or_rate_limit(text: str, expected: str) -> None:
    assert label(text) == expected


@pytest.mark.parametrize(
    ("text", "provider", "expected"),
    [
        pytest.param("An unknown error occurred", "Anthropic", "timeout", id="case-insensitive"),
        pytest.param("Provider returned error", "openrouter/auto", "timeout", id="contains"),
        pytest.param("Key limit reached", "OpenRouter", "billing", id="key-limit-reached"),
        pytest.param("key limit hit", "openrouter", "billing", id="key-limit-hit"),
        pytest.param("Provider returned error", "anthropic", "none", id="wrong-provider"),
    ],
)
def test_provider_scoped_rules(text: str, provider: str, expected: str) -> None:
    assert label(text, provider) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param('{"type":"api_error","message":"Overloaded"}', "overloaded", id="overload"),
        pytest.param(
            '{"type": "api_error", "message": "temporarily unable to serve"}',
            "timeout",
            id="temporarily-unable",
        ),
        pytest.param('{"type":"api_error","message":"backend error"}', "timeout", id="backend"),
        pytest.param(
            '{"type":"api_error","message":"unexpected error"}', "timeout", id="unexpected"
        ),
        pytest.param(
            '{"type":"api_error","message":"Please try again later"}', "timeout", id="try-later"
        ),
        pytest.param(
            '{"type":"api_error","message":"key has been disabled, unknown error"}',
            "auth_permanent",
            id="permanent-not-transient",
        ),
        pytest.param('{"type":"api_error","message":"weird"}', "none", id="no-hint"),
        pytest.param('{"type":"other","message":"unknown error"}', "none", id="not-api-error"),
    ],
)
def test_json_api_error_transient(text: str, expected: str) -> None:
    assert label(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Step 3 before 4: session wording wins over model-not-found wording.
        pytest.param("model session not found", "session_expired", id="session>model"),
        # Step 4 before 5.
        pytest.param("unknown model; prompt is too long", "model_not_found", id="model>overflow"),
        # Step 5 before 9: overflow is not a rate limit even with "usage limit" nearby.
        pytest.param("prompt is too long (usage limit)", "context_overflow", id="overflow>rate"),
        # Step 9 before 12: OpenAI's insufficient_quota text says "exceeded your current quota".
        pytest.param(
            "You exceeded your current quota (insufficient_quota)", "rate_limit", id="rate>bill"
        ),
        # Step 9 before 10: a rate limit that mentions overload is still a rate limit.
        pytest.param("rate limit hit: servers overloaded", "rate_limit", id="rate>overloaded"),
        # Step 10 before 11: "503 ... overloaded" is overloaded.
        pytest.param("503 model overloaded", "overloaded", id="overloaded>transient"),
        # Step 11 before 14: a leading 502 wins over "unauthorized".
        pytest.param("502 unauthorized upstream", "timeout", id="transient>auth"),
        # Step 12 before 14: billing wins over auth.
        pytest.param("403 Forbidden: insufficient credits", "billing", id="billing>auth"),
        # Step 13 before 14.
        pytest.param("401 api key revoked", "auth_permanent", id="permanent>auth"),
        # Step 14 before 20: "authentication timeout" is auth.
        pytest.param("authentication timeout", "auth", id="auth>timeout"),
        # Image dimension errors are never failover, even with format wording.
        pytest.param(
            "image dimensions exceed max allowed size: tool_use_id x", "none", id="image-dims"
        ),
        # A 402 marker takes the sub-classification, not the plain rate-limit step.
        pytest.param(
            "HTTP 402: subscription quota limit, automatic quota refresh in 2h",
            "rate_limit",
            id="402-sub",
        ),
        pytest.param("unrelated failure", "none", id="nothing"),
        pytest.param("", "none", id="empty"),
    ],
)
def test_message_classifier_order(text: str, expected: str) -> None:
    assert label(text) == expected


# =============================================================================================
# §5.4 status table, 402 sub-classification, symbolic codes, combination
# =============================================================================================


@pytest.mark.parametrize(
    ("status", "message", "expected"),
    [
        pytest.param(402, "", "billing", id="402-empty"),
        pytest.param(
            402, "daily usage limit, try again tomorrow", "rate_limit", id="402-transient"
        ),
        pytest.param(429, "", "rate_limit", id="429"),
        pytest.param(429, "invalid api key", "rate_limit", id="429-beats-message"),
        pytest.param(401, "", "auth", id="401"),
        pytest.param(401, "API key revoked", "auth_permanent", id="401-permanent"),
        pytest.param(403, "account has been deactivated", "auth_permanent", id="403-permanent"),
        pytest.param(403, "insufficient credits", "billing", id="403-billing"),
        pytest.param(403, "rate limit exceeded", "auth", id="403-rate-limit-text"),
        pytest.param(408, "", "timeout", id="408"),
        pytest.param(410, "", "timeout", id="410"),
        pytest.param(410, "session not found", "session_expired", id="410-session"),
        pytest.param(410, "insufficient credits", "billing", id="410-billing"),
        pytest.param(410, "key has been revoked", "auth_permanent", id="410-permanent"),
        pytest.param(410, "invalid api key", "auth", id="410-auth"),
        pytest.param(410, "rate limit", "timeout", id="410-rate-limit-text"),
        pytest.param(404, "", "model_not_found", id="404"),
        pytest.param(404, "prompt is too long", "context_overflow", id="404-overflow"),
        pytest.param(404, "conversation not found", "session_expired", id="404-session"),
        pytest.param(404, "invalid api key", "auth", id="404-auth"),
        pytest.param(404, "rate limit", "model_not_found", id="404-rate-limit-text"),
        pytest.param(503, "", "timeout", id="503"),
        pytest.param(503, "The engine is currently overloaded", "overloaded", id="503-overloaded"),
        pytest.param(499, "", "timeout", id="499"),
        pytest.param(499, "high demand", "overloaded", id="499-high-demand"),
        pytest.param(500, "", "timeout", id="500"),
        pytest.param(500, "overloaded", "timeout", id="500-ignores-message"),
        pytest.param(502, "", "timeout", id="502"),
        pytest.param(504, "", "timeout", id="504"),
        pytest.param(529, "", "overloaded", id="529"),
        pytest.param(400, "", "format", id="400"),
        pytest.param(400, "prompt is too long", "context_overflow", id="400-overflow"),
        pytest.param(400, "invalid api key", "auth", id="400-auth"),
        pytest.param(400, "rate limit", "rate_limit", id="400-rate-limit"),
        pytest.param(422, "", "format", id="422"),
        pytest.param(422, "unknown model", "model_not_found", id="422-model"),
        *[pytest.param(s, "", "none", id=f"{s}-bare") for s in (521, 522, 523, 524, 418, 302)],
    ],
)
def test_http_status_table(status: int, message: str, expected: str) -> None:
    assert classify_http_status(status, message).label == expected


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        pytest.param("", "billing", id="empty"),
        pytest.param("402 Payment Required", "billing", id="wrapper-only"),
        pytest.param(
            "Subscription quota limit reached; automatic quota refresh in 5 hours",
            "rate_limit",
            id="quota-refresh",
        ),
        pytest.param(
            "subscription quota limit within a rolling time window", "rate_limit", id="rolling"
        ),
        pytest.param("insufficient credits", "billing", id="insufficient-credits"),
        pytest.param("insufficient quota", "billing", id="insufficient-quota"),
        pytest.param("credit balance too low", "billing", id="credit-balance"),
        pytest.param("insufficient balance", "billing", id="insufficient-balance"),
        pytest.param("see plans & billing", "billing", id="plans-billing"),
        pytest.param("please add more credits", "billing", id="add-credits"),
        pytest.param("top up your account", "billing", id="top-up"),
        pytest.param("upgrade your plan for a higher limit", "billing", id="upgrade-plan-limit"),
        pytest.param("current plan limit reached, try again later", "billing", id="billing>retry"),
        pytest.param("subscription limit reached", "billing", id="subscription-limit"),
        pytest.param("billing hard limit has been reached", "billing", id="billing-hard-limit"),
        pytest.param("hard limit reached", "billing", id="hard-limit-reached"),
        pytest.param("maximum allowed spend limit", "billing", id="maximum-allowed"),
        pytest.param("rate limit exceeded: insufficient credits", "billing", id="billing>rate"),
        pytest.param("rate limit exceeded", "rate_limit", id="rate-limit"),
        pytest.param("too many requests", "rate_limit", id="too-many"),
        pytest.param("organization usage cap, try again tomorrow", "rate_limit", id="org-usage"),
        pytest.param("Daily spend limit reached", "rate_limit", id="periodic-spend"),
        pytest.param("monthly spending limit reached", "rate_limit", id="periodic-spending"),
        pytest.param("your weekly limit resets on monday", "rate_limit", id="periodic-reset"),
        pytest.param("workspace limit exceeded", "rate_limit", id="workspace-limit"),
        pytest.param("organization limit reached", "rate_limit", id="org-limit"),
        pytest.param("Payment Required", "billing", id="else-billing"),
        pytest.param(
            "Error: HTTP 402 Payment Required: organization limit exhausted",
            "rate_limit",
            id="wrapper-stripped",
        ),
    ],
)
def test_payment_required_subclassification(message: str, expected: str) -> None:
    assert classify_payment_required(message).value == expected
    assert classify_http_status(402, message).label == expected


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        *[
            (code, R.RATE_LIMIT)
            for code in (
                "RESOURCE_EXHAUSTED",
                "RATE_LIMIT",
                "RATE_LIMITED",
                "RATE_LIMIT_EXCEEDED",
                "TOO_MANY_REQUESTS",
                "THROTTLED",
                "THROTTLING",
                "THROTTLINGEXCEPTION",
                "THROTTLING_EXCEPTION",
                "rate_limit_exceeded",
                "ThrottlingException",
            )
        ],
        ("OVERLOADED", R.OVERLOADED),
        ("overloaded_error", R.OVERLOADED),
        *[
            (code, R.TIMEOUT)
            for code in (
                "ETIMEDOUT",
                "ESOCKETTIMEDOUT",
                "ECONNRESET",
                "ECONNABORTED",
                "ECONNREFUSED",
                "ENETUNREACH",
                "EHOSTUNREACH",
                "EHOSTDOWN",
                "ENETRESET",
                "EPIPE",
                "EAI_AGAIN",
            )
        ],
        ("insufficient_quota", None),
        ("context_length_exceeded", None),
        ("", None),
        (None, None),
    ],
)
def test_symbolic_codes(code: str | None, expected: FailoverReason | None) -> None:
    assert classify_symbolic_code(code) is expected


@pytest.mark.parametrize(
    ("message", "status", "code", "expected"),
    [
        pytest.param("429 Too Many Requests", None, None, "rate_limit", id="leading-status"),
        pytest.param("HTTP 401: nope", None, None, "auth", id="leading-http-status"),
        pytest.param("http 410 gone", None, None, "timeout", id="leading-410"),
        pytest.param("404 page missing", None, None, "model_not_found", id="leading-404"),
        pytest.param(
            '400 think value "low" is not supported', None, None, "format", id="leading-400"
        ),
        pytest.param("500 everything is fine", 429, None, "rate_limit", id="field-beats-leading"),
        pytest.param("weird", 418, "ECONNRESET", "timeout", id="code-when-status-silent"),
        pytest.param("rate limit", 521, None, "rate_limit", id="message-when-status-silent"),
        pytest.param("rate limit", None, "ECONNRESET", "timeout", id="code-beats-message"),
        pytest.param("prompt is too long", 413, None, "context_overflow", id="413-overflow"),
        pytest.param("weird", "RESOURCE_EXHAUSTED", 429, "rate_limit", id="google-shape"),
        pytest.param("weird", "503", None, "timeout", id="string-status"),
        pytest.param("weird", None, 529, "overloaded", id="numeric-code-is-status"),
        pytest.param("weird", None, None, "none", id="nothing"),
    ],
)
def test_classify_error_combination(
    message: str, status: int | str | None, code: int | str | None, expected: str
) -> None:
    assert classify_error(message, status, code, None).label == expected


# =============================================================================================
# Realistic provider payloads (as the provider adapters would hand them over)
# =============================================================================================

ANTHROPIC_RATE_LIMIT = json.dumps(
    {
        "type": "error",
        "error": {
            "type": "rate_limit_error",
            "message": "This request would exceed the rate limit for your organization "
            "(8c2e…) of 50,000 input tokens per minute.",
        },
    }
)
ANTHROPIC_OVERLOADED = (
    '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},'
    '"request_id":"req_011CS"}'
)
ANTHROPIC_PROMPT_TOO_LONG = (
    '{"type":"error","error":{"type":"invalid_request_error",'
    '"message":"prompt is too long: 210000 tokens > 200000 maximum"}}'
)
ANTHROPIC_INVALID_KEY = (
    '{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}'
)
ANTHROPIC_PERMISSION = (
    '{"type":"error","error":{"type":"permission_error",'
    '"message":"Your API key does not have permission to use the specified resource."}}'
)
ANTHROPIC_NOT_FOUND = (
    '{"type":"error","error":{"type":"not_found_error","message":"model: claude-9"}}'
)
ANTHROPIC_CREDIT = (
    '{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is '
    "too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase "
    'credits."}}'
)
ANTHROPIC_API_ERROR = (
    '{"type":"error","error":{"type":"api_error","message":"Internal server error"}}'
)
OPENAI_INSUFFICIENT_QUOTA = json.dumps(
    {
        "error": {
            "message": "You exceeded your current quota, please check your plan and billing "
            "details. For more information on this error, read the docs.",
            "type": "insufficient_quota",
            "param": None,
            "code": "insufficient_quota",
        }
    }
)
OPENAI_RATE_LIMIT = json.dumps(
    {
        "error": {
            "message": "Rate limit reached for gpt-4o in organization org-abc on tokens per min "
            "(TPM): Limit 30000, Used 29000, Requested 2000.",
            "type": "tokens",
            "code": "rate_limit_exceeded",
        }
    }
)
OPENAI_CONTEXT = json.dumps(
    {
        "error": {
            "message": "This model's maximum context length is 128000 tokens. However, your "
            "messages resulted in 130000 tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }
)
OPENAI_BAD_KEY = json.dumps(
    {
        "error": {
            "message": "Incorrect API key provided: sk-abc***xyz. You can find your API key at "
            "https://platform.openai.com/account/api-keys.",
            "type": "invalid_request_error",
            "code": "invalid_api_key",
        }
    }
)
OPENAI_NO_MODEL = json.dumps(
    {
        "error": {
            "message": "The model `gpt-9` does not exist or you do not have access to it.",
            "type": "invalid_request_error",
            "code": "model_not_found",
        }
    }
)
OPENAI_SERVER = (
    '{"error":{"message":"The server had an error while processing your request. Sorry about '
    'that!","type":"server_error"}}'
)
OPENAI_ENGINE_OVERLOADED = "The engine is currently overloaded, please try again later."
GOOGLE_EXHAUSTED = json.dumps(
    {
        "error": {
            "code": 429,
            "message": "Resource has been exhausted (e.g. check quota).",
            "status": "RESOURCE_EXHAUSTED",
        }
    }
)
GOOGLE_TOO_MANY_TOKENS = json.dumps(
    {
        "error": {
            "code": 400,
            "message": "The input token count (1200000) exceeds the maximum number of tokens "
            "allowed (1048576).",
            "status": "INVALID_ARGUMENT",
        }
    }
)
GROQ_TPM = (
    "Request too large for model `llama-3.3-70b-versatile` in organization `org_x` service tier "
    "`on_demand` on tokens per minute (TPM): Limit 12000, Requested 19000, please reduce your "
    "message size and try again."
)
OPENROUTER_CREDITS = (
    "This request requires more credits, or fewer max_tokens. You requested up to 4096 tokens, "
    "but can only afford 1000. To increase, visit https://openrouter.ai/settings/credits and "
    "upgrade to a paid account"
)
BEDROCK_THROTTLE = "ThrottlingException: Too many tokens, please wait before trying again."
DEEPSEEK_BALANCE = '{"error":{"message":"Insufficient Balance","type":"unknown_error"}}'


@pytest.mark.parametrize(
    ("message", "status", "code", "provider", "expected"),
    [
        pytest.param(ANTHROPIC_RATE_LIMIT, 429, None, "anthropic", "rate_limit", id="anth-429"),
        pytest.param(ANTHROPIC_OVERLOADED, 529, None, "anthropic", "overloaded", id="anth-529"),
        pytest.param(
            ANTHROPIC_PROMPT_TOO_LONG, 400, None, "anthropic", "context_overflow", id="anth-400"
        ),
        pytest.param(ANTHROPIC_INVALID_KEY, 401, None, "anthropic", "auth", id="anth-401"),
        pytest.param(ANTHROPIC_PERMISSION, 403, None, "anthropic", "auth", id="anth-403"),
        pytest.param(ANTHROPIC_NOT_FOUND, 404, None, "anthropic", "model_not_found", id="anth-404"),
        pytest.param(ANTHROPIC_CREDIT, 400, None, "anthropic", "billing", id="anth-credit"),
        pytest.param(ANTHROPIC_API_ERROR, 500, None, "anthropic", "timeout", id="anth-500"),
        pytest.param(
            OPENAI_INSUFFICIENT_QUOTA,
            429,
            "insufficient_quota",
            "openai",
            "rate_limit",
            id="openai-429-insufficient-quota",
        ),
        pytest.param(
            OPENAI_RATE_LIMIT, 429, "rate_limit_exceeded", "openai", "rate_limit", id="openai-429"
        ),
        pytest.param(
            OPENAI_CONTEXT,
            400,
            "context_length_exceeded",
            "openai",
            "context_overflow",
            id="openai-400-context",
        ),
        pytest.param(OPENAI_BAD_KEY, 401, "invalid_api_key", "openai", "auth", id="openai-401"),
        pytest.param(
            OPENAI_NO_MODEL, 404, "model_not_found", "openai", "model_not_found", id="openai-404"
        ),
        pytest.param(OPENAI_SERVER, 500, None, "openai", "timeout", id="openai-500"),
        pytest.param(OPENAI_ENGINE_OVERLOADED, 503, None, "openai", "overloaded", id="openai-503"),
        pytest.param(GOOGLE_EXHAUSTED, 429, None, "google", "rate_limit", id="google-429"),
        pytest.param(
            GOOGLE_TOO_MANY_TOKENS, 400, None, "google", "context_overflow", id="google-400"
        ),
        pytest.param(GROQ_TPM, 413, None, "groq", "rate_limit", id="groq-413-tpm"),
        pytest.param(OPENROUTER_CREDITS, 402, None, "openrouter", "billing", id="openrouter-402"),
        pytest.param(
            "Key limit exceeded", 403, None, "openrouter", "billing", id="openrouter-403-key"
        ),
        pytest.param(
            BEDROCK_THROTTLE, None, "ThrottlingException", "bedrock", "rate_limit", id="bedrock"
        ),
        pytest.param(DEEPSEEK_BALANCE, 402, None, "deepseek", "billing", id="deepseek-402"),
        pytest.param("Unauthorized", 401, None, "mistral", "auth", id="mistral-401"),
        pytest.param("socket hang up", None, "ECONNRESET", "openai", "timeout", id="node-reset"),
        pytest.param(
            '{"error":{"code":"1113","message":"余额不足"}}',
            None,
            None,
            "zai",
            "auth",
            id="zai-1113",
        ),
        pytest.param(
            '{"error":{"code":"1311","message":"plan"}}',
            None,
            None,
            "zai",
            "billing",
            id="zai-1311",
        ),
    ],
)
def test_real_provider_payloads(
    message: str, status: int | None, code: str | None, provider: str, expected: str
) -> None:
    assert classify_error(message, status, code, provider).label == expected


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        pytest.param(ANTHROPIC_RATE_LIMIT, "rate_limit", id="anth-429"),
        pytest.param(ANTHROPIC_OVERLOADED, "overloaded", id="anth-529"),
        pytest.param(ANTHROPIC_PROMPT_TOO_LONG, "context_overflow", id="anth-overflow"),
        pytest.param(OPENAI_CONTEXT, "context_overflow", id="openai-overflow"),
        pytest.param(OPENAI_INSUFFICIENT_QUOTA, "rate_limit", id="openai-quota"),
        pytest.param(GROQ_TPM, "rate_limit", id="groq-tpm"),
    ],
)
def test_real_payloads_classify_without_status(message: str, expected: str) -> None:
    """Streams often lose the status; the body alone must still land on the same reason."""
    assert label(message) == expected


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        pytest.param(ANTHROPIC_PROMPT_TOO_LONG, 210000, id="anthropic"),
        pytest.param(OPENAI_CONTEXT, 130000, id="openai"),
        pytest.param("You requested 1,234,567 tokens", 1234567, id="requested-commas"),
        pytest.param("requested 0 tokens", None, id="zero-is-not-a-count"),
        pytest.param(OPENROUTER_CREDITS, None, id="requested-up-to-is-not-a-count"),
    ],
)
def test_observed_overflow_token_count_payloads(message: str, expected: int | None) -> None:
    assert observed_overflow_token_count(message) == expected


# =============================================================================================
# Exceptions beyond T14
# =============================================================================================


def test_provider_error_fields_are_read() -> None:
    error = ProviderError(
        ANTHROPIC_OVERLOADED, provider="anthropic", model="claude", status=529, code=None
    )
    assert classify_exception(error).reason is R.OVERLOADED


def test_provider_error_provider_enables_scoped_rules() -> None:
    error = ProviderError("An unknown error occurred", provider="anthropic", model="claude")
    assert classify_exception(error).reason is R.TIMEOUT
    assert classify_exception(Exception("An unknown error occurred")).unclassified


def test_transport_provider_error_is_timeout() -> None:
    error = ProviderError("stream broke", provider="openai", model="gpt", transport=True)
    assert classify_exception(error).reason is R.TIMEOUT


def test_existing_failover_reason_is_kept() -> None:
    error = SdkError("prompt is too long", status=429, failover_reason=R.BILLING)
    assert classify_exception(error).reason is R.BILLING


def test_nested_error_payload_is_searched() -> None:
    error = SdkError("wrapper", error={"error": {"status": 401, "message": "bad key"}})
    assert classify_exception(error).reason is R.AUTH


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        pytest.param(TimeoutError(), "timeout", id="TimeoutError"),
        pytest.param(type("ReadTimeout", (Exception,), {})("boom"), "timeout", id="httpx-like"),
        pytest.param(AbortError("request aborted"), "timeout", id="abort-request-aborted"),
        pytest.param(AbortError("request was aborted"), "timeout", id="abort-was-aborted"),
        pytest.param(AbortError("user pressed stop"), "none", id="abort-by-user"),
        pytest.param(ValueError("boom"), "none", id="plain-error"),
    ],
)
def test_timeout_shaped_exceptions(error: BaseException, expected: str) -> None:
    assert classify_exception(error).label == expected


def test_abort_with_timeout_cause_is_timeout() -> None:
    abort = AbortError("signal fired")
    abort.__cause__ = TimeoutError("deadline")
    assert classify_exception(abort).reason is R.TIMEOUT


def test_cause_cycle_terminates() -> None:
    first, second = ValueError("one"), ValueError("two")
    first.__cause__, second.__cause__ = second, first
    assert classify_exception(first) == UNCLASSIFIED


def test_overflow_without_classifying_cause_stays_overflow() -> None:
    error = RuntimeError("prompt is too long: 300000 tokens > 200000 maximum")
    error.__cause__ = ValueError("nothing useful")
    assert classify_exception(error) == CONTEXT_OVERFLOW


# =============================================================================================
# §5.5 likely overflow, §5.7 transient HTTP, §5.1 status, §4.4.1 helpers
# =============================================================================================


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("prompt is too long: 1 tokens > 0 maximum", True, id="strict-overflow"),
        pytest.param("context window exceeded", True, id="context-window-exceeded"),
        pytest.param("the prompt exceeds what we accept", True, id="prompt-exceeds"),
        pytest.param("input has too many tokens: limit exceeded", True, id="input-token-limit"),
        pytest.param("context is overflowing", True, id="context-overflow-words"),
        pytest.param("Context window is too small (minimum is 16000)", False, id="too-small"),
        pytest.param("rate limit: prompt exceeds tokens", False, id="rate-limit-message"),
        pytest.param("quota: request token limit", False, id="rate-limit-hint"),
        pytest.param("60 requests per minute: prompt limit", False, id="requests-per-minute"),
        pytest.param("insufficient credits: prompt exceeds", False, id="billing"),
        pytest.param("Reasoning is required: prompt too long", False, id="reasoning"),
        pytest.param("tokens per minute: prompt is too long", False, id="tpm"),
        pytest.param("hello world", False, id="unrelated"),
    ],
)
def test_is_likely_context_overflow_error(text: str, expected: bool) -> None:
    assert is_likely_context_overflow_error(text) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("summarization failed: context window exceeded", True, id="summarization"),
        pytest.param("compaction failed; context overflow", True, id="context-overflow-text"),
        pytest.param("compaction timed out", False, id="compaction-timeout"),
        pytest.param("prompt is too long", False, id="no-compaction-word"),
    ],
)
def test_is_compaction_failure_extra(text: str, expected: bool) -> None:
    assert is_compaction_failure_error(text) is expected


def test_tpm_413_is_not_overflow() -> None:
    assert not is_context_overflow_error(GROQ_TPM)
    assert not is_context_overflow_error("413 Request too large (tpm)")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        *[
            pytest.param(f"{s} upstream", True, id=str(s))
            for s in sorted(p.TRANSIENT_HTTP_STATUSES)
        ],
        pytest.param("HTTP 503 Service Unavailable", True, id="http-prefix"),
        pytest.param("  http 529: overloaded", True, id="lowercase-indented"),
        pytest.param("400 bad request", False, id="400"),
        pytest.param("501 not implemented", False, id="501"),
        pytest.param("error 503", False, id="not-leading"),
        pytest.param("5030 things", False, id="four-digits"),
        pytest.param("", False, id="empty"),
    ],
)
def test_is_transient_http_error(text: str, expected: bool) -> None:
    assert is_transient_http_error(text) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("503 Service Unavailable", 503),
        ("HTTP 401: unauthorized", 401),
        ("HTTP401", 401),
        ("128000 tokens", None),
        ("model 503", None),
    ],
)
def test_leading_http_status(text: str, expected: int | None) -> None:
    assert leading_http_status(text) == expected


@pytest.mark.parametrize(
    ("reason", "status"),
    [
        (R.BILLING, 402),
        (R.RATE_LIMIT, 429),
        (R.OVERLOADED, 503),
        (R.AUTH, 401),
        (R.AUTH_PERMANENT, 403),
        (R.TIMEOUT, 408),
        (R.FORMAT, 400),
        (R.MODEL_NOT_FOUND, 404),
        (R.SESSION_EXPIRED, 410),
        (R.UNKNOWN, None),
        (None, None),
    ],
)
def test_failover_status(reason: FailoverReason | None, status: int | None) -> None:
    assert failover_status(reason) == status


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (429, 429),
        ("429", 429),
        (" 503 ", 503),
        ("RESOURCE_EXHAUSTED", None),
        (True, None),
        (None, None),
    ],
)
def test_parse_status(value: object, expected: int | None) -> None:
    assert parse_status(value) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Incorrect role information", True),
        ("messages: roles must alternate between user and assistant", True),
        ("invalid role: tool", False),
        ("", False),
    ],
)
def test_role_ordering_error(text: str, expected: bool) -> None:
    assert role_ordering_error(text) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("image exceeds 5 MB maximum: 5316476 bytes > 5242880 bytes", 5),
        ("Image exceeds 20MB", 20),
        ("image exceeds 3.75 MB", 3),
        ("image too big", None),
    ],
)
def test_image_size_error(text: str, expected: int | None) -> None:
    assert image_size_error(text) == expected


def test_image_dimension_error_is_not_failover() -> None:
    text = "image dimensions exceed max allowed size for many-image requests: 2000 pixels"
    assert is_image_dimension_error(text)
    assert classify_failover_message(text) == UNCLASSIFIED


def test_single_family_helpers() -> None:
    assert is_rate_limit_message("Too Many Requests")
    assert not is_rate_limit_message("too many tools")
    assert is_auth_message("401 Unauthorized")
    assert not is_auth_message("all good")


# =============================================================================================
# §5.8 user-facing text
# =============================================================================================


@pytest.mark.parametrize(
    ("message", "status", "expected"),
    [
        pytest.param("", None, UNKNOWN_ERROR_TEXT, id="empty"),
        pytest.param("   ", None, UNKNOWN_ERROR_TEXT, id="blank"),
        pytest.param(None, None, UNKNOWN_ERROR_TEXT, id="none"),
        pytest.param(ANTHROPIC_PROMPT_TOO_LONG, 400, CONTEXT_OVERFLOW_TEXT, id="overflow"),
        pytest.param(
            "400 Reasoning is mandatory for this endpoint and cannot be disabled.",
            400,
            REASONING_REQUIRED_TEXT,
            id="reasoning",
        ),
        pytest.param("roles must alternate", None, ROLE_ORDERING_TEXT, id="role-ordering"),
        pytest.param(
            "400 Invalid value for 'messages[3].role'", None, ROLE_ORDERING_TEXT, id="400-role"
        ),
        pytest.param(ANTHROPIC_RATE_LIMIT, 429, RATE_LIMIT_TEXT, id="rate-limit"),
        pytest.param(ANTHROPIC_OVERLOADED, 529, OVERLOADED_TEXT, id="overloaded"),
        pytest.param("TypeError: fetch failed", None, TRANSPORT_TEXT, id="transport"),
        pytest.param("Request timed out.", None, TIMEOUT_TEXT, id="timeout"),
        pytest.param(
            ANTHROPIC_CREDIT.replace("invalid_request_error", "x"), 400, BILLING_TEXT, id="billing"
        ),
        pytest.param("Insufficient Balance", 402, BILLING_TEXT, id="billing-402"),
        pytest.param(
            ANTHROPIC_API_ERROR,
            500,
            "LLM request failed (HTTP 500): Internal server error",
            id="payload-with-status",
        ),
        pytest.param(
            '{"error":{"message":"Something odd"}}',
            None,
            "LLM request failed: Something odd",
            id="payload-without-status",
        ),
        pytest.param("Something odd happened", None, "Something odd happened", id="raw"),
    ],
)
def test_format_user_error_text(message: str | None, status: int | None, expected: str) -> None:
    assert format_user_error_text(message, status=status) == expected


def test_format_invalid_request_error_extracts_message() -> None:
    payload = (
        '{"type":"error","error":{"type":"invalid_request_error",'
        '"message":"max_tokens: 99999 > 64000, which is the maximum allowed"}}'
    )
    assert (
        format_user_error_text(f"400 {payload}")
        == "LLM request rejected: max_tokens: 99999 > 64000, which is the maximum allowed"
    )


def test_format_truncates_raw_text_to_600_chars() -> None:
    raw = "z" * 700
    text = format_user_error_text(raw)
    assert text == "z" * 600 + "…"


def test_format_survives_pathological_json() -> None:
    nested = "{" * 100_000
    assert format_user_error_text(nested) == nested[:600] + "…"


def test_format_keeps_600_char_text_whole() -> None:
    raw = "q" * 600
    assert format_user_error_text(raw) == raw


# =============================================================================================
# Data and types
# =============================================================================================


@pytest.mark.parametrize("unit", ["daily/ ", "prompt ", "models/", "\n", "request context "])
def test_large_bodies_classify_in_linear_time(unit: str) -> None:
    """Gateways return 100 KB HTML pages; these inputs once took 50-90 s (quadratic regexes)."""
    body = unit * (200_000 // len(unit))
    started = time.perf_counter()
    classify_error(body, 400, None, "openrouter")
    is_likely_context_overflow_error(body)
    format_user_error_text(body)
    assert time.perf_counter() - started < 5


def test_rules_reject_uppercase_literals() -> None:
    with pytest.raises(ValueError, match="lowercase"):
        p.Rule("bad", ("Rate Limit",))


def test_classification_is_reason_or_overflow_never_both() -> None:
    with pytest.raises(ValueError):
        Classification(reason=R.AUTH, context_overflow=True)
    assert CONTEXT_OVERFLOW.label == "context_overflow"
    assert UNCLASSIFIED.unclassified
    assert classify_failover_reason("prompt is too long") is None


def test_status_table_covers_spec_rows() -> None:
    assert set(p.HTTP_STATUS_TABLE) == {
        400,
        401,
        402,
        403,
        404,
        408,
        410,
        422,
        429,
        499,
        500,
        502,
        503,
        504,
        529,
    }


def test_family_names_are_unique() -> None:
    families = [
        p.RATE_LIMIT,
        p.OVERLOADED,
        p.SERVER_ERROR,
        p.TIMEOUT,
        p.BILLING,
        p.AUTH_PERMANENT,
        p.AUTH,
        p.FORMAT,
        p.MODEL_NOT_FOUND,
        p.SESSION_EXPIRED,
        p.CONTEXT_OVERFLOW,
    ]
    for family in families:
        names = [rule.name for rule in family]
        assert len(names) == len(set(names)), names


def test_the_status_wins_over_timeout_words_in_what_the_user_sees() -> None:
    """A 401 whose body echoes a header named like a timeout, and a 503 that answered at once,
    did not time out (SPEC §5.4: the status wins)."""
    from activities.providers.error_classification import TIMEOUT_TEXT, format_user_error_text

    auth = format_user_error_text(
        "Unauthorized: invalid key (echoed header x-request-timeout: 30)", status=401
    )
    assert "timed out" not in auth
    busy = format_user_error_text("upstream connect error before timeout", status=503)
    assert "timed out" not in busy and "HTTP 503" in busy
    assert format_user_error_text("Request timed out.", status=None) == TIMEOUT_TEXT
    assert format_user_error_text("gateway timeout", status=504) == TIMEOUT_TEXT
