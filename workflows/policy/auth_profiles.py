"""Auth-profile policy (SPEC §7; cases T35–T48 of §18.6; checklist §20 items 2–3).

Eligibility (§7.2), ordering (§7.3), session pinning (§7.4), the candidate list (§7.5), initial
selection and advancing (§7.6), cooldown math (§7.7) and cooldown checks (§7.8), as pure
functions over `ProfileState`: no I/O, no clock (callers pass workflow time, epoch seconds), no
Temporal import. Inputs are never mutated; every update returns a new state.

Key resolution is not here: a workflow asks an activity for a candidate's key and, when that
fails, calls `advance` for the next one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from agentlane.config import AuthProfile
from agentlane.errors import FailoverReason
from agentlane.profile_state import (
    AuthCooldowns,
    ProfileCredential,
    ProfilePin,
    ProfileState,
    ProfileUsage,
    valid_time,
)

R = FailoverReason

# §7.7 cooldown lane: stepped on the total error count (1 → 30 s, 2 → 60 s, ≥3 → 5 min).
COOLDOWN_STEPS_SECONDS = (30.0, 60.0, 300.0)
# A provider's Retry-After sets a rate-limit or overload cooldown, never below this.
MIN_RETRY_AFTER_SECONDS = 1.0
# A Retry-After is recorded as the provider said it, up to a day (a longer one is a mistake).
MAX_RETRY_AFTER_SECONDS = 24 * 3600.0
# §7.7 disabled lane: base × 2^min(n−1, 10), the base never below 60 s, capped at the max.
DISABLED_REASONS = frozenset({R.BILLING, R.AUTH_PERMANENT})
DISABLED_MIN_BASE_SECONDS = 60.0
DISABLED_MAX_EXPONENT = 10
# §7.7 / §7.8: these providers bypass cooldowns entirely (never marked, never reported cooled).
COOLDOWN_BYPASS_PROVIDERS = frozenset({"openrouter", "kilocode"})
# §7.8 scoring: an active disable weighs this much; ties go to the earlier reason here.
DISABLED_SCORE = 1000
REASON_PRIORITY = (
    R.AUTH_PERMANENT,
    R.AUTH,
    R.BILLING,
    R.FORMAT,
    R.MODEL_NOT_FOUND,
    R.OVERLOADED,
    R.TIMEOUT,
    R.RATE_LIMIT,
    R.UNKNOWN,
)
# §7.6: reasons for which an all-in-cooldown provider may be probed once.
PROBE_REASONS = frozenset({R.RATE_LIMIT, R.OVERLOADED, R.BILLING, R.UNKNOWN, R.TIMEOUT})
# §7.3 round-robin: oauth before token before api_key before anything else.
TYPE_RANK = {"oauth": 0, "token": 1, "api_key": 2}
OTHER_TYPE_RANK = 3
# §7.2: provider spellings that name the same auth provider.
PROVIDER_ALIASES = {"z.ai": "zai", "z-ai": "zai"}


# --- helpers -----------------------------------------------------------------------------------


def normalize_provider(provider: str) -> str:
    """Provider key used for every comparison (SPEC §7.2: aliases normalized)."""
    key = provider.strip().lower()
    return PROVIDER_ALIASES.get(key, key)


def cooldown_bypassed(provider: str | None) -> bool:
    """SPEC §7.7: openrouter and kilocode profiles are never cooled down."""
    return provider is not None and normalize_provider(provider) in COOLDOWN_BYPASS_PROVIDERS


_valid_time = valid_time


def _active(until: float | None, now: float) -> bool:
    valid = _valid_time(until)
    return valid is not None and now < valid


def _positive(value: float | None, default: float) -> float:
    return value if value is not None and math.isfinite(value) and value > 0 else default


def _usage(state: ProfileState, profile_id: str) -> ProfileUsage | None:
    return state.usage.get(profile_id)


def _with_usage(state: ProfileState, profile_id: str, usage: ProfileUsage) -> ProfileState:
    return state.model_copy(update={"usage": {**state.usage, profile_id: usage}})


# --- §7.2 eligibility --------------------------------------------------------------------------


def _credential_usable(credential: ProfileCredential, now: float) -> bool:
    if credential.type not in TYPE_RANK or not credential.usable:
        return False
    # A token past its expiry is unusable; an absent or junk expiry means "does not expire".
    expires = _valid_time(credential.expires_at)
    return not (credential.type == "token" and expires is not None and now >= expires)


def is_eligible(
    credential: ProfileCredential,
    provider: str,
    now: float,
    configured: AuthProfile | None = None,
) -> bool:
    """SPEC §7.2: same provider; if also configured, same provider and mode (config `oauth`
    also accepts a `token` credential); and the credential itself is usable."""
    key = normalize_provider(provider)
    if normalize_provider(credential.provider) != key:
        return False
    if configured is not None:
        if normalize_provider(configured.provider) != key:
            return False
        oauth_token = configured.type == "oauth" and credential.type == "token"
        if configured.type != credential.type and not oauth_token:
            return False
    return _credential_usable(credential, now)


# --- §7.8 cooldown checks ----------------------------------------------------------------------


def unusable_until(usage: ProfileUsage) -> float | None:
    """SPEC §7.8: the later of the valid cooldown and disable ends, or None."""
    return usage.unusable_until()


def _scoped_to_other_model(usage: ProfileUsage, now: float, model_id: str | None) -> bool:
    return usage.scoped_to_other_model(now, model_id)


def in_cooldown(
    state: ProfileState,
    profile_id: str,
    now: float,
    model_id: str | None = None,
    provider: str | None = None,
) -> bool:
    """SPEC §7.8 `isProfileInCooldown`. Without `model_id`, model-scoped cooldowns count."""
    if cooldown_bypassed(provider):
        return False
    usage = _usage(state, profile_id)
    return usage is not None and usage.blocks(now, model_id)


def _clear_expired_one(usage: ProfileUsage, now: float) -> ProfileUsage:
    update: dict[str, object] = {}
    cooldown = _valid_time(usage.cooldown_until)
    disabled = _valid_time(usage.disabled_until)
    # Equal counts as expired; the two windows are cleared independently.
    if cooldown is not None and now >= cooldown:
        update.update(cooldown_until=None, cooldown_reason=None, cooldown_model=None)
    if disabled is not None and now >= disabled:
        update.update(disabled_until=None, disabled_reason=None)
    if not update:
        return usage
    cleared = usage.model_copy(update=update)
    if unusable_until(cleared) is None:
        # Nothing unusable remains: a fresh start, so the next failure gets the first step.
        # last_failure_at is kept for the failure-window check of mark_failure.
        cleared = cleared.model_copy(update={"error_count": 0, "failure_counts": {}})
    return cleared


def clear_expired(state: ProfileState, now: float) -> ProfileState:
    """SPEC §7.8 `clearExpiredCooldowns` (T44). Returns `state` itself when nothing expired."""
    usage = {pid: _clear_expired_one(u, now) for pid, u in state.usage.items()}
    if all(usage[pid] is state.usage[pid] for pid in usage):
        return state
    return state.model_copy(update={"usage": usage})


def unavailable_reason(
    state: ProfileState, profile_ids: Iterable[str | None], now: float
) -> FailoverReason | None:
    """SPEC §7.8 `resolveProfilesUnavailableReason` (T43): the most likely reason the given
    profiles are unavailable, or None when none has an active window."""
    scores: dict[FailoverReason, int] = {}

    def add(reason: FailoverReason, value: int) -> None:
        if reason in REASON_PRIORITY and value > 0:
            scores[reason] = scores.get(reason, 0) + value

    for pid in profile_ids:
        usage = _usage(state, pid) if pid else None
        if usage is None:
            continue
        reason = usage.disabled_reason
        if reason is not None and reason in REASON_PRIORITY and _active(usage.disabled_until, now):
            # An explicit disable is high-signal; it outweighs any count.
            add(reason, DISABLED_SCORE)
            continue
        if not _active(usage.cooldown_until, now):
            continue
        counts = usage.failure_counts.items()
        counted = [(r, n) for r, n in counts if r in REASON_PRIORITY and n > 0]
        for r, n in counted:
            add(r, n)
        if not counted:
            # No classified count: say unknown rather than guess rate_limit.
            add(R.UNKNOWN, 1)
    if not scores:
        return None
    # Highest score; the priority order breaks ties.
    return max(REASON_PRIORITY, key=lambda r: (scores.get(r, -1), -REASON_PRIORITY.index(r)))


def soonest_expiry(
    state: ProfileState,
    profile_ids: Iterable[str | None],
    now: float,
    model_id: str | None = None,
) -> float | None:
    """SPEC §7.8 `getSoonestCooldownExpiry`: the earliest unusable-until (may be past).

    Rate limits scoped to another model are ignored; those scoped to `model_id` count by
    their *latest* end (the model is blocked until all of them end), then min with the rest.
    """
    soonest: float | None = None
    latest_same_model: float | None = None
    for pid in profile_ids:
        usage = _usage(state, pid) if pid else None
        if usage is None or _scoped_to_other_model(usage, now, model_id):
            continue
        until = unusable_until(usage)
        if until is None:
            continue
        same_model = bool(
            model_id
            and usage.cooldown_reason == R.RATE_LIMIT
            and usage.cooldown_model == model_id
            and not _active(usage.disabled_until, now)
        )
        if same_model:
            latest_same_model = max(until, latest_same_model or until)
        elif soonest is None or until < soonest:
            soonest = until
    candidates = [v for v in (soonest, latest_same_model) if v is not None]
    return min(candidates) if candidates else None


# --- §7.7 cooldown math ------------------------------------------------------------------------


def cooldown_seconds(error_count: int) -> float:
    """SPEC §7.7 cooldown lane (T35): 30 s, 60 s, then 5 min for every later error."""
    step = min(max(1, error_count), len(COOLDOWN_STEPS_SECONDS)) - 1
    return COOLDOWN_STEPS_SECONDS[step]


def disabled_seconds(count: int, base_seconds: float, max_seconds: float) -> float:
    """SPEC §7.7 disabled lane: min(max, base × 2^min(n−1, 10)), base ≥ 60 s, max ≥ base."""
    base = max(DISABLED_MIN_BASE_SECONDS, base_seconds)
    cap = max(base, max_seconds)
    exponent = min(max(1, count) - 1, DISABLED_MAX_EXPONENT)
    return float(min(cap, base * 2**exponent))


def _billing_base_hours(cooldowns: AuthCooldowns, provider: str) -> float | None:
    key = normalize_provider(provider)
    for name, hours in cooldowns.billing_backoff_hours_by_provider.items():
        if normalize_provider(name) == key:
            return hours
    return cooldowns.billing_backoff_hours


def disabled_backoff_seconds(
    reason: FailoverReason, count: int, provider: str, cooldowns: AuthCooldowns
) -> float:
    """The disabled-lane backoff of `reason` (billing or auth_permanent) for its n-th count."""
    defaults = AuthCooldowns()
    if reason == R.BILLING:
        base = _positive(_billing_base_hours(cooldowns, provider), defaults.billing_backoff_hours)
        cap = _positive(cooldowns.billing_max_hours, defaults.billing_max_hours)
        return disabled_seconds(count, base * 3600, cap * 3600)
    base = _positive(
        cooldowns.auth_permanent_backoff_minutes, defaults.auth_permanent_backoff_minutes
    )
    cap = _positive(cooldowns.auth_permanent_max_minutes, defaults.auth_permanent_max_minutes)
    return disabled_seconds(count, base * 60, cap * 60)


def _counters_reset(usage: ProfileUsage, now: float, window_seconds: float) -> bool:
    # Old failures no longer count: the failure window passed, or every window already ended.
    last = _valid_time(usage.last_failure_at)
    window_expired = last is not None and now - last > window_seconds
    until = unusable_until(usage)
    return window_expired or (until is not None and now >= until)


def _keep_active(existing: float | None, now: float, recomputed: float) -> float:
    # Active windows are immutable: retries inside a window cannot push recovery out (§20.3).
    if existing is not None and math.isfinite(existing) and existing > now:
        return existing
    return recomputed


def _cooldown_scope(
    existing: ProfileUsage, reason: FailoverReason, model_id: str | None, now: float
) -> str | None:
    """The model a cooldown stays scoped to after this failure (SPEC §7.7); None: all models."""
    if not _active(existing.cooldown_until, now):
        return model_id if reason == R.RATE_LIMIT else None
    previous = existing.cooldown_model
    if previous and model_id and previous != model_id:
        return None  # another model failed too: the whole profile is cooled
    if reason != R.RATE_LIMIT:
        return None  # anything but a rate limit is profile-wide
    if previous and not model_id:
        return None  # unknown model: widen rather than trust stale scope
    return previous


def mark_failure(
    state: ProfileState,
    profile_id: str,
    reason: FailoverReason | None,
    *,
    provider: str,
    now: float,
    model_id: str | None = None,
    cooldowns: AuthCooldowns | None = None,
    retry_after: float | None = None,
    told_lengthens: bool = False,
) -> ProfileState:
    """SPEC §7.7 `markAuthProfileFailure` (T35–T41), returning the new state.

    No-op for a null reason, for `timeout` (not an auth-health signal, §20.2) and for
    cooldown-bypassed providers (T41). `provider` is the profile's own provider. Callers pass
    only profiles that exist in the store.

    Beyond the original: a rate limit or overload whose provider said when to come back
    (`retry_after`, seconds) opens a window of exactly that (at least 1 s, at most a day): the
    provider knows its own limits better than the ladder, shorter or longer (issue 24: a
    429 asking for 700 s is not recorded as 30 s). An active window is otherwise never changed;
    with `told_lengthens`, one the provider's Retry-After or another model's failure (which
    widens a model's window to the whole profile) says ends later is moved out to that end,
    never in: a 900 s Retry-After was lost to a window of another model ending a second later.
    """
    if reason is None or reason == R.TIMEOUT or cooldown_bypassed(provider):
        return state
    config = cooldowns or AuthCooldowns()
    existing = _usage(state, profile_id) or ProfileUsage()
    window = _positive(config.failure_window_hours, AuthCooldowns().failure_window_hours) * 3600
    reset = _counters_reset(existing, now, window)
    counts = {} if reset else dict(existing.failure_counts)
    counts[reason] = counts.get(reason, 0) + 1
    error_count = (0 if reset else existing.error_count) + 1
    update: dict[str, object] = {
        "error_count": error_count,
        "failure_counts": counts,
        "last_failure_at": now,
    }
    if reason in DISABLED_REASONS:
        backoff = disabled_backoff_seconds(reason, counts[reason], provider, config)
        update["disabled_until"] = _keep_active(existing.disabled_until, now, now + backoff)
        update["disabled_reason"] = reason
    else:
        backoff = cooldown_seconds(error_count)
        hint = _valid_time(retry_after)
        told = hint is not None and reason in (R.RATE_LIMIT, R.OVERLOADED)
        if told and hint is not None:
            backoff = min(MAX_RETRY_AFTER_SECONDS, max(MIN_RETRY_AFTER_SECONDS, hint))
        scope = _cooldown_scope(existing, reason, model_id, now)
        widened = scope is None and existing.cooldown_model is not None
        until = _keep_active(existing.cooldown_until, now, now + backoff)
        if told_lengthens and (told or widened) and _active(existing.cooldown_until, now):
            until = max(until, now + backoff)
        update["cooldown_until"] = until
        update["cooldown_reason"] = reason
        update["cooldown_model"] = scope
    return _with_usage(state, profile_id, existing.model_copy(update=update))


def mark_used(
    state: ProfileState, profile_id: str, now: float, *, succeeded_at: float | None = None
) -> ProfileState:
    """SPEC §7.7 `markAuthProfileUsed` (on success): error state cleared, `last_used = now`.

    Beyond the original, for state shared by many sessions: `succeeded_at` is when the success
    happened; a failure another session recorded after it is newer news and is kept (only
    `last_used` moves), so a long run that ends well does not wipe a fresh rate limit."""
    existing = _usage(state, profile_id)
    failed = _valid_time(existing.last_failure_at) if existing else None
    if existing is not None and succeeded_at is not None and failed and failed > succeeded_at:
        return _with_usage(state, profile_id, existing.model_copy(update={"last_used": now}))
    return _reset_errors(state, profile_id, last_used=now)


def _reset_errors(state: ProfileState, profile_id: str, **extra: object) -> ProfileState:
    existing = _usage(state, profile_id) or ProfileUsage()
    update: dict[str, object] = {
        "error_count": 0,
        "failure_counts": {},
        "cooldown_until": None,
        "cooldown_reason": None,
        "cooldown_model": None,
        "disabled_until": None,
        "disabled_reason": None,
        **extra,
    }
    return _with_usage(state, profile_id, existing.model_copy(update=update))


# --- §7.3 ordering -----------------------------------------------------------------------------


def _for_provider(table: Mapping[str, list[str]], key: str) -> list[str] | None:
    return next((v for k, v in table.items() if normalize_provider(k) == key), None)


def _dedupe(ids: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(ids))


def _eligible_ids(
    base: Sequence[str],
    key: str,
    stored: Mapping[str, ProfileCredential],
    configured: Mapping[str, AuthProfile],
    now: float,
) -> list[str]:
    return [
        pid
        for pid in base
        if pid in stored and is_eligible(stored[pid], key, now, configured.get(pid))
    ]


def _cooled_last(
    ids: Sequence[str], state: ProfileState, key: str, now: float
) -> tuple[list[str], list[str]]:
    available = [pid for pid in ids if not in_cooldown(state, pid, now, provider=key)]
    cooled = [pid for pid in ids if pid not in available]
    # Soonest back first; sorted() is stable so equal ends keep their given order.
    ends = {pid: unusable_until(state.usage[pid]) or now for pid in cooled}
    return available, sorted(cooled, key=lambda pid: ends[pid])


def _preferred_first(ordered: list[str], preferred: str | None) -> list[str]:
    if preferred and preferred in ordered:
        return [preferred, *(pid for pid in ordered if pid != preferred)]
    return ordered


def resolve_order(
    state: ProfileState,
    provider: str,
    credentials: Iterable[ProfileCredential],
    now: float,
    *,
    configured_profiles: Mapping[str, AuthProfile] | None = None,
    configured_order: Mapping[str, list[str]] | None = None,
    preferred: str | None = None,
) -> list[str]:
    """SPEC §7.3 `resolveAuthProfileOrder` (T45, T47).

    Base order: the stored order for the provider, else the configured `auth.order`, else the
    profiles configured for it, else every stored profile of it. Eligible profiles only. With
    an explicit order the given order is kept for available profiles; without one, available
    profiles go by type (oauth, token, api_key, other) then oldest `last_used`. Profiles in
    cooldown (any model) follow, soonest back first; `preferred` goes to the front.
    Expired windows count as available; `clear_expired` is the state update that goes with it.
    """
    key = normalize_provider(provider)
    configured = configured_profiles or {}
    stored = {c.id: c for c in credentials}
    state = clear_expired(state, now)
    explicit = _for_provider(state.order, key)
    if explicit is None:
        explicit = _for_provider(configured_order or {}, key)
    listed = [pid for pid, p in configured.items() if normalize_provider(p.provider) == key]
    mine = [pid for pid, c in stored.items() if normalize_provider(c.provider) == key]
    base = explicit if explicit is not None else (listed or mine)
    if not base:
        return []
    eligible = _eligible_ids(base, key, stored, configured, now)
    if not eligible and listed and not any(pid in stored for pid in base):
        # Config drifted from the store (renamed profiles): use what the store has.
        eligible = _eligible_ids(mine, key, stored, configured, now)
    ids = _dedupe(eligible)
    available, cooled = _cooled_last(ids, state, key, now)
    if not explicit:

        def rank(pid: str) -> tuple[int, float]:
            usage = state.usage.get(pid)
            last_used = usage.last_used if usage and usage.last_used is not None else 0.0
            return TYPE_RANK.get(stored[pid].type, OTHER_TYPE_RANK), last_used

        available = sorted(available, key=rank)
    return _preferred_first([*available, *cooled], preferred)


# --- §7.4 session pinning ----------------------------------------------------------------------


def _first_available(order: Sequence[str], state: ProfileState, now: float) -> str:
    return next((pid for pid in order if not in_cooldown(state, pid, now)), order[0])


def _next_available(order: Sequence[str], current: str, state: ProfileState, now: float) -> str:
    if current not in order:
        return _first_available(order, state, now)
    start = order.index(current)
    for offset in range(1, len(order) + 1):
        candidate = order[(start + offset) % len(order)]
        if not in_cooldown(state, candidate, now):
            return candidate
    return current


def resolve_session_pin(
    pin: ProfilePin | None,
    order: Sequence[str],
    state: ProfileState,
    credentials: Iterable[ProfileCredential],
    provider: str,
    now: float,
    *,
    is_new_session: bool,
    compaction_count: int,
) -> ProfilePin | None:
    """SPEC §7.4 `resolveSessionAuthProfileOverride`: the session's pin for this run.

    `order` is `resolve_order(...)` for the provider. The result's profile is passed to the
    run as its preferred profile; a `user` pin also locks it (§7.5). None: no pin.
    """
    stored = {c.id: c for c in credentials}
    current = pin.profile_id if pin else None
    # Dropped: gone from the store, of another provider, or (auto) no longer in the order.
    if current is not None and (
        current not in stored
        or normalize_provider(stored[current].provider) != normalize_provider(provider)
    ):
        current = None
    source = pin.source if pin and current else None
    if current is not None and source == "auto" and order and current not in order:
        current = None
    if not order:
        return None
    if pin is not None and current is not None and source == "user" and not is_new_session:
        return pin  # the user's choice holds, even in cooldown
    if is_new_session:
        chosen = _next_available(order, current, state, now) if current else None
    elif current is not None and compaction_count > (pin.compaction_count if pin else 0):
        chosen = _next_available(order, current, state, now)
    elif current is None or in_cooldown(state, current, now):
        chosen = None
    else:
        chosen = current
    chosen = chosen or _first_available(order, state, now)
    return ProfilePin(profile_id=chosen, source="auto", compaction_count=compaction_count)


# --- §7.5 candidates, §7.6 initial selection and advancing -------------------------------------

# Profiles used within this long of the least recently used one count as equally rested.
SPREAD_WINDOW_SECONDS = 60.0


def _spread_pick(
    order: Sequence[str],
    state: ProfileState,
    stored: Mapping[str, ProfileCredential],
    now: float,
    seed: int,
) -> str:
    available = [pid for pid in order if not in_cooldown(state, pid, now)]
    if not available:
        return order[0]

    def rested(pid: str) -> float:
        usage = state.usage.get(pid)
        return usage.last_used if usage and usage.last_used is not None else 0.0

    def rank(pid: str) -> int:
        credential = stored.get(pid)
        return TYPE_RANK.get(credential.type, OTHER_TYPE_RANK) if credential else OTHER_TYPE_RANK

    best = rank(available[0])
    oldest = min(rested(pid) for pid in available if rank(pid) == best)
    tier = [
        pid
        for pid in available
        if rank(pid) == best and rested(pid) - oldest < SPREAD_WINDOW_SECONDS
    ]
    return tier[seed % len(tier)]


@dataclass(frozen=True)
class ProfilePlan:
    """A run's auth-profile candidates (SPEC §4.1 step 5): the ordered ids (`[None]`: the
    provider's default credentials, no stored profile), the user-locked one if any, the pin the
    session keeps, or `error` when a user pin cannot be honoured."""

    candidates: list[str | None]
    locked: str | None = None
    pin: ProfilePin | None = None
    error: str | None = None


def plan_profiles(
    state: ProfileState,
    provider: str,
    credentials: Sequence[ProfileCredential],
    now: float,
    *,
    pin: ProfilePin | None,
    configured_profiles: Mapping[str, AuthProfile] | None = None,
    configured_order: Sequence[str] | None = None,
    compaction_count: int = 0,
    spread_seed: int | None = None,
) -> ProfilePlan:
    """SPEC §4.1 step 5, §7.3-§7.5: order the provider's profiles, apply the session's pin
    (a `user` pin locks the run to its profile, an `auto` pin is preferred), and list the
    candidates. A user pin of another provider is ignored; one of this provider that is not
    stored (or not eligible) is an error naming it.

    Beyond the original: a new session with a `spread_seed` (a hash of its key) takes one of
    the equally good profiles by that seed rather than always the first, so sessions that start
    together spread over the keys instead of all landing on the least recently used one (never
    when an explicit order says which key comes first)."""
    key = normalize_provider(provider)
    mine = [c for c in credentials if normalize_provider(c.provider) == key]
    order_table = {provider: list(configured_order)} if configured_order else None
    order = resolve_order(
        state,
        provider,
        mine,
        now,
        configured_profiles=configured_profiles,
        configured_order=order_table,
    )
    if pin is not None and pin.source == "user":
        stored = {c.id: c for c in credentials}
        owner: ProfileCredential | AuthProfile | None = stored.get(pin.profile_id)
        if owner is None:
            owner = (configured_profiles or {}).get(pin.profile_id)
        of_provider = owner is not None and normalize_provider(owner.provider) == key
        if of_provider:
            if pin.profile_id not in order:
                return ProfilePlan(
                    [], error=f'Auth profile "{pin.profile_id}" is not configured for {provider}.'
                )
            return ProfilePlan(candidate_list(order, pin.profile_id), pin.profile_id, pin)
        pin = None  # another provider's profile: ignored (§4.1 step 5)
    explicit = bool(configured_order) or _for_provider(state.order, key) is not None
    if pin is None and spread_seed is not None and order and not explicit:
        first = _spread_pick(order, state, {c.id: c for c in mine}, now, spread_seed)
        chosen: ProfilePin | None = ProfilePin(profile_id=first, source="auto")
    else:
        chosen = resolve_session_pin(
            pin,
            order,
            state,
            mine,
            provider,
            now,
            is_new_session=pin is None,
            compaction_count=compaction_count,
        )
    if chosen is not None:
        order = _preferred_first(order, chosen.profile_id)
    return ProfilePlan(candidate_list(order), None, chosen)


def candidate_list(order: Sequence[str], locked: str | None = None) -> list[str | None]:
    """SPEC §7.5 / §4.1.5: the locked profile alone, else the order, else `[None]` (one
    "no profile" candidate using env/config keys)."""
    if locked:
        return [locked]
    return list(order) if order else [None]


@dataclass(frozen=True)
class Selection:
    """The outcome of `select_initial` (SPEC §7.6).

    `index`: the candidate to resolve a key for, or None when none is left; `probe`: that
    candidate is in cooldown and used once as a transient probe; `reason`: when `index` is
    None, the failover reason (the inferred unavailable reason, else unknown).
    """

    index: int | None
    probe: bool = False
    reason: FailoverReason | None = None


def _cooled_for_model(
    candidate: str | None, state: ProfileState, model_id: str, now: float, locked: str | None
) -> bool:
    # The "no profile" candidate and a user-locked profile are never skipped for cooldown.
    if not candidate or candidate == locked:
        return False
    return in_cooldown(state, candidate, now, model_id)


def select_initial(
    candidates: Sequence[str | None],
    state: ProfileState,
    model_id: str,
    now: float,
    *,
    locked: str | None = None,
    allow_transient_probe: bool = False,
    start: int = 0,
) -> Selection:
    """SPEC §7.6 initial selection (T48): the first candidate not in cooldown for `model_id`.

    When every non-locked candidate is in cooldown, the caller allowed a probe (model
    fallback, §8.2) and the inferred reason is probe-able, the first cooled one is used once.
    """
    auto = [c for c in candidates if c and c != locked]
    all_cooled = bool(auto) and all(in_cooldown(state, c, now, model_id) for c in auto)
    inferred = (unavailable_reason(state, auto, now) or R.UNKNOWN) if all_cooled else None
    probe_ok = allow_transient_probe and inferred in PROBE_REASONS
    for index in range(start, len(candidates)):
        if not _cooled_for_model(candidates[index], state, model_id, now, locked):
            return Selection(index=index)
        if probe_ok:
            return Selection(index=index, probe=True)
    reason = unavailable_reason(state, candidates, now) or R.UNKNOWN
    return Selection(index=None, reason=reason)


def advance(
    candidates: Sequence[str | None],
    current: int,
    state: ProfileState,
    model_id: str,
    now: float,
    *,
    locked: str | None = None,
) -> int | None:
    """SPEC §7.6 advance (T48): the next candidate after `current` not in cooldown for
    `model_id`, or None (always None when a profile is user-locked: never rotated away from).

    The caller resolves its key and calls `advance` again from it if that fails; on success it
    resets the think level and the attempted set.
    """
    if locked:
        return None
    for index in range(current + 1, len(candidates)):
        if not _cooled_for_model(candidates[index], state, model_id, now, locked):
            return index
    return None
