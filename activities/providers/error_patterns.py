"""What provider error texts look like, as data (SPEC §5.1-§5.7).

Every family is a tuple of `Rule`s. To teach the classifier a new phrase, add a `phrase(...)`,
`word(...)`, `pattern(...)`, `in_order(...)` or `combo(...)` to the right family; the order in
which families are consulted lives in `error_classification.py` and does not need to change.

All text is lowercased before matching, so every literal here must be lowercase (a `Rule` refuses
an uppercase literal rather than silently never matching).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from agentlane.errors import FAILOVER_STATUS as _FAILOVER_STATUS
from agentlane.errors import FailoverReason

# Short alias: the tables below name a reason on nearly every line.
R = FailoverReason

# --------------------------------------------------------------------------------------------
# Rule machinery
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InOrder:
    """Regex parts that must occur one after another, anything in between."""

    parts: tuple[re.Pattern[str], ...]

    def found_in(self, text: str) -> bool:
        # The first occurrence of each part (after the previous one) leaves the most room for the
        # rest, so one forward scan decides; a backtracking `a.*b.*c` regex is quadratic on the
        # 100 KB HTML pages some gateways return.
        position = 0
        for part in self.parts:
            found = part.search(text, position)
            if found is None:
                return False
            position = found.end()
        return True


Needle = str | re.Pattern[str] | InOrder
# A tuple term is satisfied by any one of its needles.
Term = Needle | tuple[Needle, ...]


@dataclass(frozen=True)
class Rule:
    """Matches lowercased text containing every `all_of` term and none of the `none_of` needles."""

    name: str
    all_of: tuple[Term, ...]
    none_of: tuple[Needle, ...] = ()

    def __post_init__(self) -> None:
        for needle in (*_flatten(self.all_of), *self.none_of):
            if isinstance(needle, str) and needle != needle.lower():
                raise ValueError(f"rule {self.name!r}: literal {needle!r} must be lowercase")

    def matches(self, text: str) -> bool:
        return all(_term_found(term, text) for term in self.all_of) and not any(
            _needle_found(needle, text) for needle in self.none_of
        )


Family = tuple[Rule, ...]


def _flatten(terms: tuple[Term, ...]) -> list[Needle]:
    flat: list[Needle] = []
    for term in terms:
        flat.extend(term if isinstance(term, tuple) else (term,))
    return flat


def _needle_found(needle: Needle, text: str) -> bool:
    if isinstance(needle, str):
        return needle in text
    if isinstance(needle, InOrder):
        return needle.found_in(text)
    return needle.search(text) is not None


def _term_found(term: Term, text: str) -> bool:
    if isinstance(term, tuple):
        return any(_needle_found(needle, text) for needle in term)
    return _needle_found(term, text)


def first_match(family: Family, text: str) -> Rule | None:
    """The first rule of `family` that matches already-lowercased `text`."""
    return next((rule for rule in family if rule.matches(text)), None)


def phrase(text: str) -> Rule:
    return Rule(text, (text,))


def phrases(*texts: str) -> Family:
    return tuple(phrase(text) for text in texts)


def word(text: str) -> Rule:
    """A whole word, so "tpm" does not match inside "httpmessage"."""
    return Rule(f"word {text}", (re.compile(rf"\b{re.escape(text)}\b"),))


def words(*texts: str) -> Family:
    return tuple(word(text) for text in texts)


def pattern(name: str, regex: str, flags: int = 0) -> Rule:
    return Rule(name, (re.compile(regex, flags | re.DOTALL),))


def in_order(name: str, *parts: str) -> Rule:
    """Regex parts that must appear in this order, anything in between ("context … overflow")."""
    return Rule(name, (InOrder(tuple(re.compile(part) for part in parts)),))


def combo(name: str, *all_of: Term, unless: tuple[Needle, ...] = ()) -> Rule:
    """Every term somewhere in the text, in any order."""
    return Rule(name, all_of, unless)


def regex(text: str) -> re.Pattern[str]:
    """A compiled needle for use inside `combo`."""
    return re.compile(text, re.DOTALL)


# --------------------------------------------------------------------------------------------
# §5.1 Status reported for each failover reason (unknown has none)
# --------------------------------------------------------------------------------------------

# SPEC §5.1: defined with the reasons themselves (agentlane/errors.py).
FAILOVER_STATUS: Final[Mapping[FailoverReason, int]] = _FAILOVER_STATUS

# --------------------------------------------------------------------------------------------
# §5.2 Phrase families
# --------------------------------------------------------------------------------------------

# §5.2 Rate limit
RATE_LIMIT: Final[Family] = (
    *phrases(
        "rate limit",
        "rate_limit",
        "too many requests",
        "too many concurrent requests",
        "throttling",
        "throttlingexception",
        "throttling_exception",
        "throttled",
        "model_cooldown",
        "exceeded your current quota",
        "resource has been exhausted",
        "quota exceeded",
        "resource_exhausted",
        "usage limit",
        "tokens per minute",
        "tokens per day",
    ),
    word("429"),
    word("tpm"),
)

# §5.2 Periodic usage limit: "daily limit", "weekly usage limits exceeded". Combinations such as
# "daily/weekly limit" need no pattern of their own: their last period word matches by itself
# (and spelling out the repetition made the search quadratic on "daily/daily/daily/...").
_PERIOD = r"(?:daily|weekly|monthly)"
PERIODIC_USAGE_LIMIT: Final[Family] = (
    pattern("periodic usage limit", rf"\b{_PERIOD}\s+(?:usage\s+)?limits?\b"),
)

# §5.2 Overloaded
OVERLOADED: Final[Family] = (
    *phrases("overloaded_error", '"type":"overloaded_error"', "overloaded", "high demand"),
    combo(
        "service unavailable + overload/capacity/high demand",
        "service unavailable",
        ("overload", "capacity", "high demand"),
    ),
)

# §5.2 Server error (classified as timeout: the request may succeed if simply retried)
SERVER_ERROR: Final[Family] = phrases(
    "an error occurred while processing",
    "internal server error",
    "internal_error",
    "server_error",
    "service temporarily unavailable",
    "service_unavailable",
    "bad gateway",
    "gateway timeout",
    "upstream error",
    "upstream connect error",
    "connection reset",
)

# §5.2 Timeout / transport, split so user-facing copy can tell "slow" from "unreachable".
TIMEOUT_ONLY: Final[Family] = (
    *phrases(
        "timeout",
        "timed out",
        "service unavailable",
        "deadline exceeded",
        "context deadline exceeded",
        "operation was aborted",
    ),
    *words("etimedout", "esockettimedout"),
    pattern("without sending chunks", r"without sending (?:any )?chunks?"),
    # "malformed_function_call" is deliberately absent: the model's fault, not the transport's.
    pattern(
        "stop reason: abort/error/malformed_response/network_error",
        r"reason:\s*(?:abort|error|malformed_response|network_error)\b",
    ),
    pattern("stream closed/aborted", r"stream (?:was )?(?:closed|aborted)"),
)
TRANSPORT: Final[Family] = (
    *phrases(
        "connection error",
        "network error",
        "network request failed",
        "fetch failed",
        "socket hang up",
    ),
    *words(
        "econnrefused",
        "econnreset",
        "econnaborted",
        "enetunreach",
        "ehostunreach",
        "ehostdown",
        "enetreset",
        "epipe",
        "enotfound",
        "eai_again",
    ),
)
TIMEOUT: Final[Family] = TIMEOUT_ONLY + TRANSPORT

# §5.2 Billing. Markers that mean HTTP 402 and nothing else ("room 402" must not match).
HARD_402_MARKERS: Final[Family] = (
    pattern("status/code field 402", r"\b(?:status|code|status_?code)\b\"?\s*[:=]\s*\"?402\b"),
    pattern("http 402", r"\bhttp\s*402\b"),
    pattern("error (code) 402", r"\berror\s*(?:code\s*)?:?\s*402\b"),
    pattern("got/returned/received 402", r"\b(?:got|returned|received)\s+(?:an?\s+)?402\b"),
    # Horizontal space only: `\s*` after `^` would rescan runs of blank lines from every line start.
    pattern("line starting 402 payment", r"^[ \t]*402\s+payment", re.MULTILINE),
)
ZAI_BILLING_CODE: Final[Family] = (pattern('z.ai "code": 1311', r"\"code\"\s*:\s*\"?1311\b"),)
# Longer texts are usually assistant prose that merely talks about billing.
BILLING_SOFT_MAX_CHARS: Final = 512
BILLING: Final[Family] = (
    *HARD_402_MARKERS,
    *ZAI_BILLING_CODE,
    *phrases(
        "payment required",
        "insufficient credits",
        "insufficient quota",
        "insufficient_quota",
        "credit balance",
        "plans & billing",
        "insufficient balance",
        "insufficient usd or diem balance",
        "out of extra usage",
        "draw from your extra usage",
        "extra usage is required",
    ),
    pattern("require(s) more credits", r"\brequires? more credits"),
    combo(
        "billing headline + upgrade/credits/payment/plan",
        regex(r"^\s*(?:billing|credit balance|insufficient credits?|payment required|http\s*402)"),
        ("upgrade", "credits", "payment", "plan"),
    ),
)

# §5.2 Auth permanent (high confidence the key will not start working again)
AUTH_PERMANENT: Final[Family] = (
    pattern(
        "api key revoked/deactivated/deleted", r"api[_ ]?key[_ ]?(?:revoked|deactivated|deleted)"
    ),
    *phrases(
        "key has been disabled",
        "key has been revoked",
        "account has been deactivated",
        "not allowed for this organization",
    ),
)

# §5.2 Auth (ambiguous: may be fixed by refreshing or rotating credentials)
AUTH: Final[Family] = (
    pattern("invalid api key", r"invalid[\s_-]?api[\s_-]?key"),
    in_order(
        "could not authenticate/validate … api key/credentials",
        r"could not (?:authenticate|validate)",
        r"api key|credentials",
    ),
    *phrases(
        "permission_error",
        "incorrect api key",
        "invalid token",
        "authentication",
        "re-authenticate",
        "oauth token refresh failed",
        "unauthorized",
        "forbidden",
        "access denied",
        "expired",
        "token has expired",
        "no credentials found",
        "no api key found",
    ),
    pattern("insufficient permission(s)", r"insufficient permissions?"),
    pattern("missing scope(s):", r"missing scopes?:"),
    *words("401", "403"),
    in_order(
        "failed to extract/parse/validate/decode … token",
        r"failed to (?:extract|parse|validate|decode)",
        r"token",
    ),
    pattern('z.ai "code": 1113', r"\"code\"\s*:\s*\"?1113\b"),
)

# §5.2 Format (the request itself is malformed; retrying elsewhere will not help much)
FORMAT: Final[Family] = (
    *phrases(
        "string should match pattern",
        "tool_use.id",
        "tool_use_id",
        "messages.1.content.1.tool_use.id",
        "invalid request format",
    ),
    in_order("tool call id was … must be", r"tool call id was", r"must be"),
)

# §5.2 Model not found
MODEL_NOT_FOUND: Final[Family] = (
    *phrases(
        "no endpoints found for", "unknown model", "not_found_error", "is not a valid model id"
    ),
    pattern("model not found", r"model[\s_-]not[\s_-]found"),
    combo("404 + not found", regex(r"\b404\b"), "not found"),
    combo("model: <id> + not found", regex(r"\bmodel:\s*\S"), "not found"),
    # The id may not run into another "models/", so each character is scanned from one start only.
    pattern("models/<x> is not found", r"models/(?:(?!models/)\S)+\s+is not found"),
    combo("model + does not exist", "model", "does not exist"),
    combo(
        "model deprecated + upgrade/transition", "model", "deprecated", ("upgrade", "transition to")
    ),
    combo("stealth model + find it here", "stealth model", "find it here"),
    pattern("invalid model (not a model reference)", r"invalid model(?! reference)"),
)

# §5.2 Session expired
SESSION_EXPIRED: Final[Family] = (
    pattern(
        "session/conversation not found/does not exist/expired/invalid",
        r"\b(?:session|conversation) (?:not found|does not exist|expired|invalid)",
    ),
    *phrases(
        "no such session", "invalid session", "session id not found", "conversation id not found"
    ),
)

# §5.2 Provider-specific fallbacks: consulted last, after every generic family missed.
PROVIDER_SPECIFIC_FALLBACKS: Final[tuple[tuple[Family, FailoverReason], ...]] = (
    ((word("throttlingexception"),), R.RATE_LIMIT),
    (
        (pattern("concurrency limit reached", r"concurrency limit (?:has been )?reached"),),
        R.RATE_LIMIT,
    ),
    (
        (in_order("workers_ai … quota limit exceeded", "workers_ai", "quota limit exceeded"),),
        R.RATE_LIMIT,
    ),
    (phrases("modelnotreadyexception"), R.OVERLOADED),
    (
        phrases("model_deactivated", "model_is_deactivated", "model has been deactivated"),
        R.MODEL_NOT_FOUND,
    ),
)


@dataclass(frozen=True)
class ProviderRule:
    """A phrase that only means something when a given provider says it."""

    provider_contains: str
    family: Family
    reason: FailoverReason


# §5.2 Provider-scoped phrases
ANTHROPIC_UNKNOWN_ERROR: Final = ProviderRule(
    "anthropic", phrases("an unknown error occurred"), R.TIMEOUT
)
OPENROUTER_PROVIDER_ERROR: Final = ProviderRule(
    "openrouter", phrases("provider returned error"), R.TIMEOUT
)
OPENROUTER_KEY_LIMIT: Final = ProviderRule(
    "openrouter",
    (pattern("key limit exceeded/reached/hit", r"key limit (?:exceeded|reached|hit)"),),
    R.BILLING,
)

# §5.2 JSON api_error that is really a transient server fault
API_ERROR_TYPE: Final[Family] = (pattern('"type":"api_error"', r"\"type\"\s*:\s*\"api_error\""),)
API_ERROR_TRANSIENT_HINTS: Final[Family] = (
    *phrases(
        "internal server error",
        "overload",
        "temporarily unavailable",
        "service unavailable",
        "unknown error",
        "server error",
        "bad gateway",
        "gateway timeout",
        "upstream error",
        "backend error",
        "try again later",
        "unexpected error",
    ),
    in_order("temporarily … unable", "temporarily", "unable"),
)

# Image errors are neither failover reasons nor overflow (§5.3 steps 1-2, §4.4.1 step 4).
IMAGE_DIMENSION_ERROR: Final[Family] = (
    in_order("image dimensions … exceed", r"image dimensions?", r"exceed"),
)
IMAGE_SIZE_MB: Final = re.compile(r"image exceeds\s+(\d+(?:\.\d+)?)\s*mb")

# §4.4.1 step 3: the transcript's role sequence was rejected.
ROLE_ORDERING: Final[Family] = phrases("incorrect role information", "roles must alternate")
# §5.8 formats these like role ordering too.
ROLE_ORDERING_400_VARIANT: Final[Family] = (
    in_order("400 … role", r"^\s*(?:http\s*)?400\b", r"\brole"),
)

# --------------------------------------------------------------------------------------------
# §5.4 HTTP status and symbolic codes
# --------------------------------------------------------------------------------------------

# "503 ...", "HTTP 503: ...": a status written at the head of a message.
LEADING_STATUS: Final = re.compile(r"^\s*(?:http\s*)?([1-5]\d\d)\b")

# §5.7 Statuses worth one blind retry of the whole request.
TRANSIENT_HTTP_STATUSES: Final = frozenset({499, 500, 502, 503, 504, 521, 522, 523, 524, 529})

# 402 sub-classification: "(error) (http) 402 (payment required)" wrapper removed first.
PAYMENT_REQUIRED_WRAPPER: Final = re.compile(
    r"^\s*(?:error\s*[:\-]?\s*)?(?:http\s*)?402\b\s*[:\-]?\s*(?:payment required\b)?\s*[:\-]?\s*"
)
SUBSCRIPTION_QUOTA_REFRESH: Final[Family] = (
    combo(
        "subscription quota limit + refresh window",
        "subscription quota limit",
        ("automatic quota refresh", "rolling time window"),
    ),
)
EXPLICIT_BILLING_SIGNALS: Final[Family] = (
    *phrases(
        "insufficient credits",
        "insufficient quota",
        "credit balance",
        "insufficient balance",
        "plans & billing",
        "add more credits",
        "top up",
        "billing hard limit",
        "hard limit reached",
    ),
    combo(
        "plan/subscription + limit",
        ("upgrade your plan", "upgrade plan", "current plan", "subscription"),
        "limit",
    ),
    combo("maximum allowed + limit", "maximum allowed", "limit"),
)
TRANSIENT_USAGE_LIMIT_SIGNALS: Final[Family] = (
    combo(
        "retry/temporary + usage/rate limit",
        ("try again", "retry", "temporary", "cooldown"),
        ("usage limit", "rate limit", "organization usage"),
    ),
    combo(
        "periodic + usage/spend limit",
        regex(rf"\b{_PERIOD}\b"),
        ("usage limit", "spend limit", "spending limit"),
    ),
    combo("periodic + limit + reset", regex(rf"\b{_PERIOD}\b"), "limit", "reset"),
    combo(
        "organization/workspace limit exceeded",
        ("organization", "workspace"),
        "limit",
        ("spend limit", "billing period", "exceeded", "reached", "exhausted"),
    ),
)
# Consulted in order after the wrapper is removed; nothing matched means billing.
PAYMENT_REQUIRED_STEPS: Final[tuple[tuple[Family, FailoverReason], ...]] = (
    (SUBSCRIPTION_QUOTA_REFRESH, R.RATE_LIMIT),
    (EXPLICIT_BILLING_SIGNALS, R.BILLING),
    (RATE_LIMIT, R.RATE_LIMIT),
    (TRANSIENT_USAGE_LIMIT_SIGNALS, R.RATE_LIMIT),
)
PAYMENT_REQUIRED_DEFAULT: Final = R.BILLING

# Message results that say more than a 404/410 status does.
_ACCOUNT_REASONS = frozenset({R.SESSION_EXPIRED, R.BILLING, R.AUTH_PERMANENT, R.AUTH})


@dataclass(frozen=True)
class StatusRow:
    """How one HTTP status combines with what the message says. Checked top to bottom:

    1. `payment_required`: the 402 sub-classification of the message decides.
    2. `phrase_overrides`: the first family that matches the message gives its reason.
    3. `overflow_passthrough`: a context-overflow message stays context overflow.
    4. `message_passthrough`: a message result in this set wins.
    5. `default` (None: the status says nothing and the message may still classify).
    """

    default: FailoverReason | None = None
    payment_required: bool = False
    phrase_overrides: tuple[tuple[Family, FailoverReason], ...] = ()
    overflow_passthrough: bool = False
    message_passthrough: frozenset[FailoverReason] = frozenset()


_AUTH_ROW = StatusRow(
    default=R.AUTH,
    phrase_overrides=((AUTH_PERMANENT, R.AUTH_PERMANENT),),
    message_passthrough=frozenset({R.BILLING}),
)
_UNAVAILABLE_ROW = StatusRow(default=R.TIMEOUT, phrase_overrides=((OVERLOADED, R.OVERLOADED),))
_SERVER_ERROR_ROW = StatusRow(default=R.TIMEOUT)
_BAD_REQUEST_ROW = StatusRow(
    default=R.FORMAT, overflow_passthrough=True, message_passthrough=frozenset(FailoverReason)
)

# §5.4 table. Statuses not listed (including a bare 521-524) say nothing.
HTTP_STATUS_TABLE: Final[Mapping[int, StatusRow]] = {
    402: StatusRow(payment_required=True),
    429: StatusRow(default=R.RATE_LIMIT),
    401: _AUTH_ROW,
    403: _AUTH_ROW,
    408: StatusRow(default=R.TIMEOUT),
    410: StatusRow(default=R.TIMEOUT, message_passthrough=_ACCOUNT_REASONS),
    404: StatusRow(
        default=R.MODEL_NOT_FOUND, overflow_passthrough=True, message_passthrough=_ACCOUNT_REASONS
    ),
    503: _UNAVAILABLE_ROW,
    499: _UNAVAILABLE_ROW,
    500: _SERVER_ERROR_ROW,
    502: _SERVER_ERROR_ROW,
    504: _SERVER_ERROR_ROW,
    529: StatusRow(default=R.OVERLOADED),
    400: _BAD_REQUEST_ROW,
    422: _BAD_REQUEST_ROW,
}

# §5.4 Symbolic error codes (gRPC statuses, Node errno names, SDK error types), uppercased.
SYMBOLIC_CODES: Final[Mapping[str, FailoverReason]] = {
    **dict.fromkeys(
        (
            "RESOURCE_EXHAUSTED",
            "RATE_LIMIT",
            "RATE_LIMITED",
            "RATE_LIMIT_EXCEEDED",
            "TOO_MANY_REQUESTS",
            "THROTTLED",
            "THROTTLING",
            "THROTTLINGEXCEPTION",
            "THROTTLING_EXCEPTION",
        ),
        R.RATE_LIMIT,
    ),
    **dict.fromkeys(("OVERLOADED", "OVERLOADED_ERROR"), R.OVERLOADED),
    **dict.fromkeys(
        (
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
        ),
        R.TIMEOUT,
    ),
}

# --------------------------------------------------------------------------------------------
# §5.5 Context overflow
# --------------------------------------------------------------------------------------------

# Groq answers 413 for a tokens-per-minute limit: that is a rate limit, not an overflow.
TPM_HINT: Final[Family] = (word("tpm"), phrase("tokens per minute"))

CONTEXT_OVERFLOW: Final[Family] = (
    *phrases(
        "request_too_large",
        "request exceeds the maximum size",
        "context length exceeded",
        "maximum context length",
        "prompt is too long",
        "prompt too long",
        "exceeds model context window",
        "model token limit",
        "context overflow:",
        "exceed context limit",
        "exceeds the model's maximum context",
        "context_window_exceeded",
        # OpenAI's wording for newer models and the Responses API, and its error code.
        "exceeds the context window",
        "context_length_exceeded",
    ),
    combo(
        "invalid_argument + maximum number of tokens",
        "invalid_argument",
        "maximum number of tokens",
    ),
    combo("input exceeds + maximum number of tokens", "input exceeds", "maximum number of tokens"),
    combo(
        "request size exceeds + context window/length",
        "request size exceeds",
        ("context window", "context length", "maximum context length"),
    ),
    combo("max_tokens + exceed + context", "max_tokens", "exceed", "context"),
    combo("input length + exceed + context", "input length", "exceed", "context"),
    combo("413 + too large", regex(r"\b413\b"), "too large"),
    # Chinese-language providers (e.g. Qwen, GLM, Kimi front-ends)
    *phrases("上下文过长", "上下文超出", "上下文长度超", "超出最大上下文", "请压缩上下文"),
    # Provider-specific wording: Bedrock, Vertex, Ollama, Cohere, llama.cpp
    *phrases(
        "input token count exceeds the maximum number of input tokens",
        "input is too long for this model",
        "input exceeds the maximum number of tokens",
        "ollama error: context length exceeded",
    ),
    in_order("total tokens … exceeds … max/limit", "total tokens", "exceeds", "max|limit"),
    pattern(
        "llama.cpp (n tokens) exceeds the available context size",
        r"(?:request|prompt) \(\d+ tokens\) exceeds the available context size",
    ),
    pattern("input (is) too long for (the) model", r"input (?:is )?too long for (?:the )?model"),
)

# Messages that mention the context window but are about a model that is too small for use.
CONTEXT_WINDOW_TOO_SMALL: Final[Family] = (
    in_order("context window … too small/minimum is", "context window", "too small|minimum is"),
)
# With these present an ambiguous message is a rate limit, not an overflow.
RATE_LIMIT_HINTS: Final[Family] = (
    *phrases("rate limit", "too many requests", "quota", "throttl", "tokens per day"),
    pattern("requests per minute/hour/day", r"requests per (?:minute|hour|day)"),
    word("429"),
)
_SIZE_WORDS = r"too large|too long|exceed|over|limit|max"
LIKELY_OVERFLOW_HINTS: Final[Family] = (
    in_order("context … overflow", "context", "overflow"),
    in_order(
        "context window … size words", "context window", rf"{_SIZE_WORDS}|requested|sent|tokens"
    ),
    in_order("prompt … size words", "prompt", _SIZE_WORDS),
    in_order(
        "request/input … context/length/token … size words",
        "request|input",
        "context|window|length|token",
        _SIZE_WORDS,
    ),
)

COMPACTION_MENTION: Final[Family] = phrases(
    "summarization failed", "auto-compaction", "compaction failed", "compaction"
)

# --------------------------------------------------------------------------------------------
# §5.6 Observed token count in an overflow message (first pattern that matches wins)
# --------------------------------------------------------------------------------------------

OBSERVED_TOKEN_COUNT: Final = (
    re.compile(r"prompt is too long:\s*([\d,]+)\s*tokens\s*>\s*[\d,]+\s*maximum"),
    re.compile(r"requested\s+([\d,]+)\s+tokens"),
    re.compile(r"resulted in\s+([\d,]+)\s+tokens"),
)
