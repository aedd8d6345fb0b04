"""Model fallback across candidates, and the reply layer's final texts (SPEC §8, §20.7).

Pure functions over frozen dataclasses: no I/O, no clock (callers pass `now` in epoch seconds),
no Temporal import. Profile availability comes in through `AvailabilityLookup`, a callable the
caller builds from the auth-profile store (SPEC §7.8), so this module does not depend on it.

The workflow drives the chain: `next_candidate` says which candidate to run (skipping the ones
in cooldown and recording why), `record_failure` says whether to go on or rethrow, and
`fallback_summary` builds the "All models failed (N): …" error once candidates run out.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

from agentlane.errors import FailoverReason

R = FailoverReason

__all__ = [
    "BILLING_REPLY",
    "COMPACTION_RESET_REPLY",
    "CONTEXT_RESET_REPLY",
    "OVERLOADED_PAYLOAD_REPLY",
    "RATE_LIMIT_PAYLOAD_REPLY",
    "ROLE_ORDERING_RESET_REPLY",
    "CooldownAction",
    "should_retry_transient_http",
    "CONTEXT_OVERFLOW_REPLY",
    "GENERIC_FAILURE_REPLY",
    "PROBE_MARGIN_SECONDS",
    "PROBE_MIN_INTERVAL_SECONDS",
    "RATE_LIMIT_GENERIC_REPLY",
    "ROLE_ORDERING_REPLY",
    "TRANSIENT_HTTP_RETRY_DELAY_SECONDS",
    "AvailabilityLookup",
    "CandidateError",
    "ChainStep",
    "CooldownDecision",
    "FailureOutcome",
    "FallbackAttempt",
    "FallbackChain",
    "FallbackSummary",
    "ModelRef",
    "ProbeThrottle",
    "ProviderAvailability",
    "cooldown_decision",
    "effective_chain",
    "fallback_summary",
    "next_candidate",
    "probe_throttle_key",
    "rate_limit_cooldown_reply",
    "record_failure",
    "reply_failure_text",
    "resolve_fallback_candidates",
    "start_chain",
]

PROBE_MIN_INTERVAL_SECONDS = 30.0
PROBE_MARGIN_SECONDS = 120.0
PROBE_STATE_TTL_SECONDS = 24 * 3600.0
PROBE_MAX_KEYS = 256
TRANSIENT_HTTP_RETRY_DELAY_SECONDS = 2.5

_TRANSIENT_COOLDOWN = frozenset({R.RATE_LIMIT, R.OVERLOADED, R.UNKNOWN, R.TIMEOUT})
_PROBEABLE = _TRANSIENT_COOLDOWN | {R.BILLING}
# A probe failing for these reasons says nothing about the cooldown: the slot stays open.
_PROBE_SLOT_KEPT = frozenset(
    {R.MODEL_NOT_FOUND, R.FORMAT, R.AUTH, R.AUTH_PERMANENT, R.SESSION_EXPIRED}
)

# §8.4 reply-layer texts.
BILLING_REPLY = (
    "⚠️ API provider returned a billing error — your API key has run out of credits or has an "
    "insufficient balance. Check your provider's billing dashboard and top up or switch to a "
    "different API key."
)
RATE_LIMIT_GENERIC_REPLY = (
    "⚠️ All models are temporarily rate-limited. Please try again in a few minutes."
)
CONTEXT_OVERFLOW_REPLY = (
    "⚠️ Context overflow — prompt too large for this model. Try a shorter message or a "
    "larger-context model."
)
ROLE_ORDERING_REPLY = (
    "⚠️ Message ordering conflict - please try again. If this persists, use /new to start a "
    "fresh session."
)
GENERIC_FAILURE_REPLY = (
    "⚠️ Something went wrong while processing your request. Please try again, or use /new to "
    "start a fresh session."
)
CONTEXT_RESET_REPLY = (
    "⚠️ Context limit exceeded. I've reset our conversation to start fresh - please try again."
)
COMPACTION_RESET_REPLY = (
    "⚠️ Context limit exceeded during compaction. I've reset our conversation to start fresh - "
    "please try again."
)
ROLE_ORDERING_RESET_REPLY = (
    "⚠️ Message ordering conflict. I've reset the conversation - please try again."
)
RATE_LIMIT_PAYLOAD_REPLY = "⚠️ API rate limit reached. Please try again later."
OVERLOADED_PAYLOAD_REPLY = (
    "⚠️ The AI service is temporarily overloaded. Please try again in a moment."
)


# --------------------------------------------------------------------------------------------
# §8.1 candidate list
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelRef:
    """A `provider/model` reference; the model part may itself contain slashes."""

    provider: str
    model: str

    @classmethod
    def parse(cls, ref: str) -> ModelRef | None:
        """`"openrouter/meta-llama/x"` → (openrouter, meta-llama/x); None without both parts."""
        provider, _, model = ref.strip().partition("/")
        provider, model = provider.strip().lower(), model.strip()
        return cls(provider, model) if provider and model else None

    @property
    def key(self) -> str:
        return f"{self.provider}/{self.model}"


def effective_chain(
    requested: str, primary: str | None, fallbacks: Sequence[str], known: Collection[str]
) -> list[ModelRef]:
    """The chain a run on `requested` walks (SPEC §8.1): the candidates of
    `resolve_fallback_candidates` that name a model the registry `known`s (the requested one is
    always kept). With an agent configured, its `primary` comes last for every session of that
    agent, whatever model the session asked for (the original's rule)."""
    refs = resolve_fallback_candidates(requested, primary or requested, fallbacks)
    chain = [r for r in refs if r.key in known or r.key == requested]
    first = ModelRef.parse(requested)
    return chain or ([first] if first is not None else [])


def resolve_fallback_candidates(
    requested: str,
    primary: str,
    configured_fallbacks: Sequence[str],
    override: Sequence[str] | None = None,
) -> list[ModelRef]:
    """The ordered, de-duplicated candidates of one fallback run (SPEC §8.1).

    `requested` first; then `override` when given (an empty override disables fallbacks, and
    the primary is then not appended), else the configured fallbacks — only when the requested
    provider is the primary's or the requested model is itself a configured fallback; finally
    the configured `primary`.
    """
    first = ModelRef.parse(requested) or ModelRef.parse(primary)
    configured_primary = ModelRef.parse(primary)
    refs: list[ModelRef | None] = [first]
    if override is not None:
        refs += [ModelRef.parse(raw) for raw in override]
    else:
        fallbacks = [ModelRef.parse(raw) for raw in configured_fallbacks]
        same_provider = (
            first is not None
            and configured_primary is not None
            and first.provider == configured_primary.provider
        )
        if same_provider or first in fallbacks:
            refs += fallbacks
        refs.append(configured_primary)
    return _dedupe(refs)


def _dedupe(refs: Sequence[ModelRef | None]) -> list[ModelRef]:
    seen: set[str] = set()
    out: list[ModelRef] = []
    for ref in refs:
        if ref is not None and ref.key not in seen:
            seen.add(ref.key)
            out.append(ref)
    return out


# --------------------------------------------------------------------------------------------
# §8.2 cooldowns and probes
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProviderAvailability:
    """A provider's auth profiles as seen for one model (SPEC §7.8).

    `profile_count` 0 means the provider has no profiles (env/config keys): never in cooldown.
    `unavailable_reason` is `resolveProfilesUnavailableReason` and `soonest_cooldown_expiry` is
    `getSoonestCooldownExpiry` (epoch seconds), both only meaningful when none is available.
    """

    profile_count: int = 0
    available_count: int = 0
    unavailable_reason: FailoverReason | None = None
    soonest_cooldown_expiry: float | None = None

    @property
    def all_in_cooldown(self) -> bool:
        return self.profile_count > 0 and self.available_count == 0


# (provider, model) → availability; None when there is no auth store for it.
AvailabilityLookup = Callable[[str, str], ProviderAvailability | None]


@dataclass(frozen=True)
class ProbeThrottle:
    """Last probe time per `scope::provider` key (SPEC §8.2): entries expire after 24 h and at
    most 256 keys are kept (oldest evicted). Persist it across fallback runs."""

    last_probe: Mapping[str, float] = field(default_factory=dict)

    def is_open(self, key: str, now: float) -> bool:
        """At least 30 s since the last probe for `key`."""
        last = self._pruned(now).get(key, 0.0)
        return now - last >= PROBE_MIN_INTERVAL_SECONDS

    def marked(self, key: str, now: float) -> ProbeThrottle:
        entries = dict(self._pruned(now))
        entries[key] = now
        while len(entries) > PROBE_MAX_KEYS:
            del entries[min(entries, key=lambda k: entries[k])]
        return ProbeThrottle(entries)

    def _pruned(self, now: float) -> dict[str, float]:
        return {
            k: t
            for k, t in self.last_probe.items()
            if math.isfinite(t) and t > 0 and now - t <= PROBE_STATE_TTL_SECONDS
        }


def probe_throttle_key(provider: str, scope: str = "") -> str:
    """`agentDir::provider` in the original; here `scope` is the agent id (or any stable name)."""
    scope = scope.strip()
    return f"{scope}::{provider}" if scope else provider


class CooldownAction(StrEnum):
    ATTEMPT = "attempt"
    SKIP = "skip"


@dataclass(frozen=True)
class CooldownDecision:
    """Whether a candidate whose provider has no available profile is attempted (SPEC §8.2)."""

    action: CooldownAction
    reason: FailoverReason
    error: str = ""
    mark_probe: bool = False


def _probe_condition(
    *, is_primary: bool, has_fallbacks: bool, throttle_open: bool, soonest: float | None, now: float
) -> bool:
    # Primary only, with fallbacks to go to, throttle open, and within 2 min of expiry.
    if not (is_primary and has_fallbacks and throttle_open):
        return False
    if soonest is None or not math.isfinite(soonest):
        return True
    return now >= soonest - PROBE_MARGIN_SECONDS


def cooldown_decision(
    provider: str,
    availability: ProviderAvailability,
    *,
    is_primary: bool,
    is_requested: bool,
    has_fallbacks: bool,
    throttle_open: bool,
    now: float,
) -> CooldownDecision:
    """Attempt or skip a candidate whose provider's profiles are all unavailable (SPEC §8.2)."""
    reason = availability.unavailable_reason or R.UNKNOWN
    probe = _probe_condition(
        is_primary=is_primary,
        has_fallbacks=has_fallbacks,
        throttle_open=throttle_open,
        soonest=availability.soonest_cooldown_expiry,
        now=now,
    )
    issue = f"Provider {provider} has {reason.value} issue (skipping all models)"
    if reason in (R.AUTH, R.AUTH_PERMANENT):
        return CooldownDecision(CooldownAction.SKIP, reason, issue)
    if reason is R.BILLING:
        single = is_primary and not has_fallbacks and throttle_open
        if is_primary and (probe or single):
            return CooldownDecision(CooldownAction.ATTEMPT, reason, mark_probe=True)
        return CooldownDecision(CooldownAction.SKIP, reason, issue)
    attempt = (is_primary and (not is_requested or probe)) or (
        not is_primary and reason in _TRANSIENT_COOLDOWN
    )
    if not attempt:
        error = f"Provider {provider} is in cooldown (all profiles unavailable)"
        return CooldownDecision(CooldownAction.SKIP, reason, error)
    return CooldownDecision(CooldownAction.ATTEMPT, reason, mark_probe=is_primary and probe)


# --------------------------------------------------------------------------------------------
# The chain (§8.2–§8.3)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FallbackAttempt:
    """One failed or skipped candidate, as listed in the summary."""

    provider: str
    model: str
    error: str
    reason: FailoverReason | None = None
    status: int | None = None

    def describe(self) -> str:
        suffix = f" ({self.reason.value})" if self.reason is not None else ""
        return f"{self.provider}/{self.model}: {self.error}{suffix}"


@dataclass(frozen=True)
class FallbackChain:
    """State of one fallback run. `position` is the next candidate index to consider."""

    candidates: tuple[ModelRef, ...]
    requested: ModelRef
    scope: str = ""
    position: int = 0
    attempts: tuple[FallbackAttempt, ...] = ()
    probed_providers: frozenset[str] = frozenset()
    throttle: ProbeThrottle = field(default_factory=ProbeThrottle)
    # The probe slot of the candidate now running (a transient-cooldown probe), if any.
    running_probe: str | None = None


def start_chain(
    candidates: Sequence[ModelRef],
    *,
    scope: str = "",
    throttle: ProbeThrottle | None = None,
) -> FallbackChain:
    """A fresh fallback run over `candidates` (the first is the requested model)."""
    if not candidates:
        raise ValueError("a fallback run needs at least one candidate")
    return FallbackChain(
        candidates=tuple(candidates),
        requested=candidates[0],
        scope=scope,
        throttle=throttle or ProbeThrottle(),
    )


@dataclass(frozen=True)
class ChainStep:
    """`candidate` None means the chain is exhausted (build the summary)."""

    chain: FallbackChain
    candidate: ModelRef | None = None
    allow_transient_cooldown_probe: bool = False


def next_candidate(chain: FallbackChain, availability: AvailabilityLookup, now: float) -> ChainStep:
    """The next candidate to run, skipping (and recording) those SPEC §8.2 says to skip."""
    while chain.position < len(chain.candidates):
        index = chain.position
        candidate = chain.candidates[index]
        chain = replace(chain, position=index + 1, running_probe=None)
        snapshot = availability(candidate.provider, candidate.model)
        if snapshot is None or not snapshot.all_in_cooldown:
            return ChainStep(chain, candidate)
        step = _cooldown_step(chain, candidate, index, snapshot, now)
        if step.candidate is not None:
            return step
        chain = step.chain
    return ChainStep(chain)


def _cooldown_step(
    chain: FallbackChain,
    candidate: ModelRef,
    index: int,
    snapshot: ProviderAvailability,
    now: float,
) -> ChainStep:
    key = probe_throttle_key(candidate.provider, chain.scope)
    decision = cooldown_decision(
        candidate.provider,
        snapshot,
        is_primary=index == 0,
        is_requested=candidate == chain.requested,
        has_fallbacks=len(chain.candidates) > 1,
        throttle_open=chain.throttle.is_open(key, now),
        now=now,
    )
    if decision.action is CooldownAction.SKIP:
        return ChainStep(_with_attempt(chain, candidate, decision.error, decision.reason))
    if decision.mark_probe:
        chain = replace(chain, throttle=chain.throttle.marked(key, now))
    if decision.reason not in _PROBEABLE:
        return ChainStep(chain, candidate)
    if decision.reason in _TRANSIENT_COOLDOWN:
        if candidate.provider in chain.probed_providers:
            error = (
                f"Provider {candidate.provider} is in cooldown (probe already attempted this run)"
            )
            return ChainStep(_with_attempt(chain, candidate, error, decision.reason))
        chain = replace(chain, running_probe=candidate.provider)
    return ChainStep(chain, candidate, allow_transient_cooldown_probe=True)


def _with_attempt(
    chain: FallbackChain,
    candidate: ModelRef,
    error: str,
    reason: FailoverReason | None,
    status: int | None = None,
) -> FallbackChain:
    attempt = FallbackAttempt(candidate.provider, candidate.model, error, reason, status)
    return replace(chain, attempts=(*chain.attempts, attempt))


@dataclass(frozen=True)
class CandidateError:
    """A candidate's failure as classified by the activity (SPEC §8.3).

    `reason` None means not failover-classifiable. `user_abort`: a plain abort that is neither
    a timeout nor coercible to a failover. `live_model_switch` counts as
    an overloaded failure.
    """

    message: str
    reason: FailoverReason | None = None
    status: int | None = None
    context_overflow: bool = False
    user_abort: bool = False
    live_model_switch: bool = False


class FailureOutcome(StrEnum):
    NEXT = "next"  # try the next candidate (call `next_candidate`)
    RETHROW = "rethrow"  # end the fallback run with this very error


def record_failure(
    chain: FallbackChain, candidate: ModelRef, error: CandidateError
) -> tuple[FallbackChain, FailureOutcome]:
    """Record a failed candidate and say whether the chain goes on (SPEC §8.2 probe slot, §8.3)."""
    reason = R.OVERLOADED if error.live_model_switch else error.reason
    if chain.running_probe is not None and reason not in _PROBE_SLOT_KEPT:
        chain = replace(chain, probed_providers=chain.probed_providers | {chain.running_probe})
    chain = replace(chain, running_probe=None)
    # Overflow belongs to the inner loop: a smaller model would fail worse (§20.4).
    if error.context_overflow or error.user_abort:
        return chain, FailureOutcome.RETHROW
    is_last = chain.position >= len(chain.candidates)
    if reason is None and is_last:
        return chain, FailureOutcome.RETHROW
    chain = _with_attempt(chain, candidate, error.message, reason or R.UNKNOWN, error.status)
    return chain, FailureOutcome.NEXT


@dataclass(frozen=True)
class FallbackSummary:
    """`FallbackSummaryError`: every attempt and the soonest cooldown expiry (epoch seconds)."""

    message: str
    attempts: tuple[FallbackAttempt, ...]
    soonest_cooldown_expiry: float | None = None

    @property
    def reasons(self) -> list[FailoverReason | None]:
        return [attempt.reason for attempt in self.attempts]


def fallback_summary(
    chain: FallbackChain, soonest_cooldown_expiry: float | None = None
) -> FallbackSummary | None:
    """The "All models failed (N): p/m: error (reason) | …" error of an exhausted chain, or
    None when at most one attempt was recorded (the caller rethrows the last error) (SPEC §8.3).

    `soonest_cooldown_expiry` is re-read by the caller from persisted auth state, model-scoped.
    """
    if len(chain.attempts) <= 1:
        return None
    listed = " | ".join(attempt.describe() for attempt in chain.attempts)
    message = f"All models failed ({len(chain.attempts)}): {listed}"
    return FallbackSummary(message, chain.attempts, soonest_cooldown_expiry)


# --------------------------------------------------------------------------------------------
# §8.4 reply layer
# --------------------------------------------------------------------------------------------


def rate_limit_cooldown_reply(soonest_cooldown_expiry: float | None, now: float) -> str:
    """ "⚠️ Rate-limited — ready in ~Ns" (≤ 60 s) / "~N min", or the generic rate-limit text
    when the expiry is unknown or past (SPEC §8.4)."""
    if soonest_cooldown_expiry is None or soonest_cooldown_expiry <= now:
        return RATE_LIMIT_GENERIC_REPLY
    seconds = max(1, math.ceil(soonest_cooldown_expiry - now))
    if seconds <= 60:
        return f"⚠️ Rate-limited — ready in ~{seconds}s. Please wait a moment."
    return f"⚠️ Rate-limited — ready in ~{math.ceil(seconds / 60)} min. Please try again shortly."


def reply_failure_text(
    *,
    now: float,
    summary: FallbackSummary | None = None,
    reason: FailoverReason | None = None,
    context_overflow: bool = False,
    role_ordering: bool = False,
) -> str:
    """The final reply for a fallback run that ended in an error (SPEC §8.4 "Final messages").

    With a `summary`, billing / rate-limit copy applies only when every attempt had that cause
    (a mixed-cause summary is not a rate limit). Without one, `reason` is the error's own.
    """
    if summary is not None:
        reasons = summary.reasons
        billing = all(r is R.BILLING for r in reasons)
        rate_limited = all(r in (R.RATE_LIMIT, R.OVERLOADED) for r in reasons)
        expiry = summary.soonest_cooldown_expiry
    else:
        billing = reason is R.BILLING
        rate_limited = reason is R.RATE_LIMIT
        expiry = None
    if billing:
        return BILLING_REPLY
    if rate_limited:
        return rate_limit_cooldown_reply(expiry, now)
    if summary is None and reason is R.OVERLOADED:
        return OVERLOADED_PAYLOAD_REPLY
    if context_overflow:
        return CONTEXT_OVERFLOW_REPLY
    if role_ordering:
        return ROLE_ORDERING_REPLY
    return GENERIC_FAILURE_REPLY


def should_retry_transient_http(*, transient_http: bool, already_retried: bool) -> bool:
    """The reply layer retries the whole chain once, after 2.5 s, on a transient HTTP error
    (SPEC §5.7, §8.4)."""
    return transient_http and not already_retried
