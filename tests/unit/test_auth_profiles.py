"""Auth-profile policy (SPEC §7; cases T35–T48 of §18.6; §20 items 2–3): cooldown and disabled
ladders, window immutability, counter resets, model scoping, checks and scoring, ordering,
session pinning, initial selection and advancing."""

from __future__ import annotations

import math

import pytest

from agentlane.config import AuthProfile
from agentlane.errors import FailoverReason as R
from agentlane.profile_state import (
    AuthCooldowns,
    ProfileCredential,
    ProfilePin,
    ProfileState,
    ProfileUsage,
)
from workflows.policy.auth_profiles import (
    COOLDOWN_STEPS_SECONDS,
    DISABLED_SCORE,
    advance,
    candidate_list,
    clear_expired,
    cooldown_seconds,
    disabled_backoff_seconds,
    in_cooldown,
    is_eligible,
    mark_failure,
    mark_used,
    resolve_order,
    resolve_session_pin,
    select_initial,
    soonest_expiry,
    unavailable_reason,
    unusable_until,
)

NOW = 1_800_000_000.0
MIN = 60.0
HOUR = 3600.0
P = "anthropic:p1"


def usage(state: ProfileState, pid: str = P) -> ProfileUsage:
    return state.usage[pid]


def fail(
    state: ProfileState,
    reason: R,
    now: float,
    pid: str = P,
    model: str | None = None,
    provider: str = "anthropic",
    cooldowns: AuthCooldowns | None = None,
) -> ProfileState:
    return mark_failure(
        state, pid, reason, provider=provider, now=now, model_id=model, cooldowns=cooldowns
    )


def with_usage(**profiles: ProfileUsage) -> ProfileState:
    return ProfileState(usage=profiles)


def cred(pid: str, type_: str = "api_key", provider: str = "anthropic") -> ProfileCredential:
    return ProfileCredential(id=pid, provider=provider, type=type_)


# --- §7.7 ladders ------------------------------------------------------------------------------


def test_t35_cooldown_ladder_by_error_count() -> None:
    got = [cooldown_seconds(n) * 1000 for n in (1, 2, 3, 4, 5)]
    assert got == [30_000, 60_000, 300_000, 300_000, 300_000]
    assert COOLDOWN_STEPS_SECONDS == (30.0, 60.0, 300.0)


def test_cooldown_ladder_steps_up_while_counters_survive() -> None:
    # A disable window keeps the counters alive, so cooldown-lane failures climb the ladder.
    state = fail(ProfileState(), R.BILLING, NOW)
    state = fail(state, R.RATE_LIMIT, NOW + 1)
    assert usage(state).error_count == 2
    assert usage(state).cooldown_until == NOW + 1 + 60
    state = fail(state, R.OVERLOADED, NOW + 62)  # cooldown over, disable still on: no reset
    assert usage(state).error_count == 3
    assert usage(state).cooldown_until == NOW + 62 + 300
    state = fail(state, R.UNKNOWN, NOW + 400)
    assert usage(state).cooldown_until == NOW + 400 + 300


def test_billing_ladder() -> None:
    config = AuthCooldowns()
    got = [disabled_backoff_seconds(R.BILLING, n, "anthropic", config) / HOUR for n in range(1, 6)]
    assert got == [5, 10, 20, 24, 24]


def test_auth_permanent_ladder() -> None:
    config = AuthCooldowns()
    got = [disabled_backoff_seconds(R.AUTH_PERMANENT, n, "x", config) / MIN for n in range(1, 6)]
    assert got == [10, 20, 40, 60, 60]


def test_billing_per_provider_override_and_bad_values_fall_back() -> None:
    config = AuthCooldowns(billing_backoff_hours_by_provider={" Anthropic ": 1.0})
    assert disabled_backoff_seconds(R.BILLING, 1, "anthropic", config) == HOUR
    assert disabled_backoff_seconds(R.BILLING, 1, "openai", config) == 5 * HOUR
    bad = AuthCooldowns(billing_backoff_hours=0, billing_max_hours=-3)
    assert disabled_backoff_seconds(R.BILLING, 9, "openai", bad) == 24 * HOUR
    # The base never goes under 60 s.
    tiny = AuthCooldowns(auth_permanent_backoff_minutes=0.1, auth_permanent_max_minutes=0.1)
    assert disabled_backoff_seconds(R.AUTH_PERMANENT, 1, "x", tiny) == 60


def test_billing_ladder_steps_up_while_a_cooldown_outlives_the_disable() -> None:
    state = fail(ProfileState(), R.BILLING, NOW)
    assert usage(state).disabled_until == NOW + 5 * HOUR
    state = fail(state, R.RATE_LIMIT, NOW + 5 * HOUR - 10)  # cooldown ends after the disable
    state = fail(state, R.BILLING, NOW + 5 * HOUR + 1)
    assert usage(state).failure_counts[R.BILLING] == 2
    assert usage(state).disabled_until == NOW + 5 * HOUR + 1 + 10 * HOUR


def test_t37_auth_permanent_disables_for_ten_minutes() -> None:
    state = fail(ProfileState(), R.AUTH_PERMANENT, NOW)
    u = usage(state)
    assert u.disabled_reason == R.AUTH_PERMANENT
    assert u.disabled_until == NOW + 10 * MIN
    assert u.cooldown_until is None
    overrides = AuthCooldowns(auth_permanent_backoff_minutes=15, auth_permanent_max_minutes=45)
    state = fail(ProfileState(), R.AUTH_PERMANENT, NOW, cooldowns=overrides)
    assert usage(state).disabled_until == NOW + 15 * MIN


def test_disabled_lane_leaves_the_cooldown_alone() -> None:
    state = fail(ProfileState(), R.RATE_LIMIT, NOW, model="m1")
    state = fail(state, R.BILLING, NOW + 1)
    u = usage(state)
    assert (u.cooldown_until, u.cooldown_reason, u.cooldown_model) == (NOW + 30, R.RATE_LIMIT, "m1")
    assert u.disabled_until == NOW + 1 + 5 * HOUR


# --- §7.7 window immutability and resets (§20.3) ----------------------------------------------


def test_t38_active_cooldown_is_not_extended_and_survives_reload() -> None:
    first = fail(ProfileState(), R.RATE_LIMIT, NOW)
    second = fail(first, R.RATE_LIMIT, NOW + 10)
    assert usage(second).cooldown_until == usage(first).cooldown_until == NOW + 30
    assert usage(second).error_count == 2
    reloaded = ProfileState.model_validate_json(second.model_dump_json())
    assert reloaded == second
    third = fail(reloaded, R.RATE_LIMIT, NOW + 20)
    assert usage(third).cooldown_until == NOW + 30


def test_t38_overloaded_sets_a_cooldown_only() -> None:
    u = usage(fail(ProfileState(), R.OVERLOADED, NOW))
    assert u.cooldown_until == NOW + 30
    assert u.disabled_until is None and u.disabled_reason is None
    assert u.failure_counts == {R.OVERLOADED: 1}


def test_active_disable_is_not_extended() -> None:
    state = fail(ProfileState(), R.BILLING, NOW)
    state = fail(state, R.BILLING, NOW + HOUR)
    assert usage(state).disabled_until == NOW + 5 * HOUR
    assert usage(state).failure_counts[R.BILLING] == 2


def test_t39_failure_window_expiry_resets_counters() -> None:
    old = ProfileUsage(
        error_count=9, failure_counts={R.BILLING: 3}, last_failure_at=NOW - 48 * HOUR
    )
    u = usage(fail(with_usage(**{P: old}), R.BILLING, NOW))
    assert u.error_count == 1
    assert u.failure_counts == {R.BILLING: 1}
    assert u.disabled_until == NOW + 5 * HOUR


def test_expired_window_resets_so_every_new_window_starts_at_the_first_step() -> None:
    state = fail(ProfileState(), R.RATE_LIMIT, NOW)
    state = fail(state, R.RATE_LIMIT, NOW + 5)
    state = fail(state, R.RATE_LIMIT, NOW + 6)
    assert usage(state).error_count == 3
    state = fail(state, R.RATE_LIMIT, NOW + 30)  # equal to the end: expired
    assert usage(state).error_count == 1
    assert usage(state).cooldown_until == NOW + 60
    state = fail(state, R.BILLING, NOW + 10 * HOUR)
    state = fail(state, R.BILLING, NOW + 16 * HOUR)
    assert usage(state).disabled_until == NOW + 21 * HOUR


def test_t41_openrouter_and_kilocode_are_never_marked() -> None:
    for provider in ("openrouter", "KiloCode"):
        state = fail(ProfileState(), R.RATE_LIMIT, NOW, provider=provider)
        state = fail(state, R.BILLING, NOW, provider=provider)
        assert state.usage == {}


def test_timeout_and_null_reason_never_cool_a_profile() -> None:
    # SPEC §20.2: timeouts are not auth-health signals.
    empty = ProfileState()
    assert fail(empty, R.TIMEOUT, NOW) is empty
    assert mark_failure(empty, P, None, provider="anthropic", now=NOW) is empty


def test_mark_failure_does_not_mutate_its_input() -> None:
    before = fail(ProfileState(), R.RATE_LIMIT, NOW)
    snapshot = before.model_dump()
    fail(before, R.AUTH, NOW + 1)
    assert before.model_dump() == snapshot


# --- §7.7 model scope --------------------------------------------------------------------------


def test_rate_limit_scopes_the_cooldown_to_its_model() -> None:
    state = fail(ProfileState(), R.RATE_LIMIT, NOW, model="m1")
    assert usage(state).cooldown_model == "m1"
    assert in_cooldown(state, P, NOW, "m1")
    assert not in_cooldown(state, P, NOW, "m2")
    assert in_cooldown(state, P, NOW)  # without a model, scoped cooldowns count
    other = fail(ProfileState(), R.OVERLOADED, NOW, model="m1")
    assert usage(other).cooldown_model is None
    assert in_cooldown(other, P, NOW, "m2")


@pytest.mark.parametrize(
    ("reason", "model", "scope"),
    [
        (R.RATE_LIMIT, "m1", "m1"),  # same model again: kept
        (R.RATE_LIMIT, "m2", None),  # another model failed: all models
        (R.RATE_LIMIT, None, None),  # unknown model: widened
        (R.AUTH, "m1", None),  # not a rate limit: profile-wide
    ],
)
def test_active_window_scope_widens(reason: R, model: str | None, scope: str | None) -> None:
    state = fail(ProfileState(), R.RATE_LIMIT, NOW, model="m1")
    u = usage(fail(state, reason, NOW + 1, model=model))
    assert u.cooldown_model == scope
    assert u.cooldown_reason == reason
    assert u.cooldown_until == NOW + 30


def test_active_disable_defeats_the_model_bypass() -> None:
    state = fail(ProfileState(), R.RATE_LIMIT, NOW, model="m1")
    state = fail(state, R.BILLING, NOW + 1)
    assert in_cooldown(state, P, NOW + 2, "m2")


# --- §7.7 success -----------------------------------------------------------------------------


def test_mark_used_clears_error_state() -> None:
    state = fail(fail(ProfileState(), R.RATE_LIMIT, NOW, model="m1"), R.BILLING, NOW)
    used = usage(mark_used(state, P, NOW + 5))
    assert used == ProfileUsage(last_used=NOW + 5, last_failure_at=NOW)


# --- §7.8 checks -------------------------------------------------------------------------------


def test_unusable_until_is_the_later_valid_end() -> None:
    assert unusable_until(ProfileUsage(cooldown_until=5, disabled_until=9)) == 9
    assert unusable_until(ProfileUsage(cooldown_until=math.nan, disabled_until=-1)) is None
    assert not in_cooldown(ProfileState(), P, NOW)
    assert not in_cooldown(
        with_usage(**{P: ProfileUsage(cooldown_until=NOW + 9)}), P, NOW, provider="openrouter"
    )


def test_t43_unavailable_reason_scoring() -> None:
    def reason(**u: ProfileUsage) -> R | None:
        return unavailable_reason(with_usage(**u), list(u), NOW)

    active = NOW + 60
    assert reason(a=ProfileUsage(disabled_until=active, disabled_reason=R.BILLING)) == R.BILLING
    counts = {R.AUTH: 3, R.RATE_LIMIT: 1}
    assert reason(a=ProfileUsage(cooldown_until=active, failure_counts=counts)) == R.AUTH
    counts = {R.OVERLOADED: 2, R.RATE_LIMIT: 1}
    assert reason(a=ProfileUsage(cooldown_until=active, failure_counts=counts)) == R.OVERLOADED
    assert reason(a=ProfileUsage(cooldown_until=active)) == R.UNKNOWN
    expired = ProfileUsage(
        cooldown_until=NOW - 1, disabled_until=NOW - 1, disabled_reason=R.BILLING
    )
    assert reason(a=expired) is None
    counts = {R.TIMEOUT: 2, R.AUTH: 2}
    assert reason(a=ProfileUsage(cooldown_until=active, failure_counts=counts)) == R.AUTH


def test_unavailable_reason_disable_outweighs_counts_across_profiles() -> None:
    many = ProfileUsage(cooldown_until=NOW + 9, failure_counts={R.RATE_LIMIT: DISABLED_SCORE - 1})
    off = ProfileUsage(disabled_until=NOW + 9, disabled_reason=R.AUTH_PERMANENT)
    assert unavailable_reason(with_usage(a=many, b=off), ["a", "b", None], NOW) == R.AUTH_PERMANENT


def test_t44_clear_expired() -> None:
    at_end = with_usage(a=ProfileUsage(cooldown_until=NOW, cooldown_reason=R.RATE_LIMIT))
    assert usage(clear_expired(at_end, NOW), "a").cooldown_until is None

    mixed = ProfileUsage(
        cooldown_until=NOW - 1,
        disabled_until=NOW + HOUR,
        disabled_reason=R.BILLING,
        error_count=4,
        failure_counts={R.BILLING: 1, R.RATE_LIMIT: 3},
    )
    u = usage(clear_expired(with_usage(a=mixed), NOW), "a")
    assert u.cooldown_until is None and u.disabled_until == NOW + HOUR
    assert u.error_count == 4

    both = mixed.model_copy(update={"disabled_until": NOW - 1, "last_failure_at": NOW - 2})
    u = usage(clear_expired(with_usage(a=both), NOW), "a")
    assert (u.error_count, u.failure_counts, u.disabled_reason) == (0, {}, None)
    assert u.last_failure_at == NOW - 2

    for junk in (math.nan, math.inf, 0.0, -5.0):
        state = with_usage(a=ProfileUsage(cooldown_until=junk, disabled_until=junk, error_count=2))
        assert clear_expired(state, NOW) is state


def test_soonest_expiry() -> None:
    state = with_usage(
        a=ProfileUsage(cooldown_until=NOW + 100, cooldown_reason=R.AUTH),
        b=ProfileUsage(cooldown_until=NOW + 50, cooldown_reason=R.RATE_LIMIT, cooldown_model="x"),
        c=ProfileUsage(cooldown_until=NOW + 80, cooldown_reason=R.RATE_LIMIT, cooldown_model="m"),
        d=ProfileUsage(cooldown_until=NOW + 90, cooldown_reason=R.RATE_LIMIT, cooldown_model="m"),
        e=ProfileUsage(cooldown_until=NOW - 5),
    )
    assert soonest_expiry(state, ["a", "b"], NOW) == NOW + 50
    assert soonest_expiry(state, ["a", "b"], NOW, "m") == NOW + 100  # b scoped elsewhere
    assert soonest_expiry(state, ["a", "c", "d"], NOW, "m") == NOW + 90  # latest same-model
    assert soonest_expiry(state, ["c", "d"], NOW, "m") == NOW + 90
    assert soonest_expiry(state, ["a", "e"], NOW) == NOW - 5  # may be in the past
    assert soonest_expiry(state, ["zz", None], NOW) is None


# --- §7.2 eligibility --------------------------------------------------------------------------


def test_eligibility() -> None:
    api = cred("p", "api_key")
    assert is_eligible(api, "Anthropic", NOW)
    assert not is_eligible(api, "openai", NOW)
    assert not is_eligible(
        api, "anthropic", NOW, AuthProfile(id="p", provider="anthropic", type="oauth")
    )
    token = cred("t", "token")
    oauth_mode = AuthProfile(id="t", provider="anthropic", type="oauth")
    assert is_eligible(token, "anthropic", NOW, oauth_mode)  # config oauth accepts a token
    assert not is_eligible(token, "anthropic", NOW, oauth_mode.model_copy(update={"provider": "x"}))
    expired = token.model_copy(update={"expires_at": NOW})
    assert not is_eligible(expired, "anthropic", NOW)
    assert is_eligible(token.model_copy(update={"expires_at": NOW + 1}), "anthropic", NOW)
    assert not is_eligible(api.model_copy(update={"usable": False}), "anthropic", NOW)
    assert not is_eligible(cred("w", "weird"), "anthropic", NOW)
    assert is_eligible(cred("z", provider="z.ai"), "zai", NOW)


# --- §7.3 ordering -----------------------------------------------------------------------------


def test_t45_round_robin_by_type_then_oldest_use() -> None:
    creds = [cred("a", "oauth"), cred("b"), cred("c")]
    state = with_usage(
        a=ProfileUsage(last_used=200), b=ProfileUsage(last_used=100), c=ProfileUsage(last_used=300)
    )
    assert resolve_order(state, "anthropic", creds, NOW) == ["a", "b", "c"]


def test_t45_cooldown_profiles_last_soonest_first() -> None:
    creds = [cred("cool1"), cred("cool2"), cred("ready")]
    state = with_usage(
        ready=ProfileUsage(last_used=50),
        cool1=ProfileUsage(cooldown_until=NOW + 120),
        cool2=ProfileUsage(cooldown_until=NOW + 60),
    )
    assert resolve_order(state, "anthropic", creds, NOW) == ["ready", "cool2", "cool1"]


def test_round_robin_never_used_first_ties_keep_given_order_and_last_good_ignored() -> None:
    creds = [cred("x"), cred("y"), cred("z"), cred("t", "token")]
    state = ProfileState(usage={"x": ProfileUsage(last_used=10)}, last_good={"anthropic": "x"})
    assert resolve_order(state, "anthropic", creds, NOW) == ["t", "y", "z", "x"]


def test_t47_expired_cooldown_counts_as_available_and_next_failure_starts_over() -> None:
    creds = [cred("old"), cred("hot"), cred("fresh")]
    state = with_usage(
        old=ProfileUsage(
            cooldown_until=NOW - 1, error_count=3, failure_counts={R.RATE_LIMIT: 3}, last_used=1
        ),
        hot=ProfileUsage(cooldown_until=NOW + 60, last_used=0),
        fresh=ProfileUsage(last_used=5),
    )
    assert resolve_order(state, "anthropic", creds, NOW) == ["old", "fresh", "hot"]
    explicit = {"anthropic": ["hot", "fresh", "old"]}
    got = resolve_order(state, "anthropic", creds, NOW, configured_order=explicit)
    assert got == ["fresh", "old", "hot"]
    assert usage(clear_expired(state, NOW), "old").error_count == 0
    after = fail(state, R.RATE_LIMIT, NOW, pid="old")
    assert usage(after, "old").cooldown_until == NOW + 30


def test_stored_order_beats_configured_order_beats_configured_profiles() -> None:
    creds = [cred("a"), cred("b"), cred("c")]
    configured = {
        "c": AuthProfile(id="c", provider="anthropic"),
        "b": AuthProfile(id="b", provider="anthropic"),
    }
    stored = ProfileState(order={"anthropic": ["b", "a"]})
    order = {"Anthropic": ["c", "a", "b"]}

    def resolve(state: ProfileState, explicit: dict[str, list[str]] | None) -> list[str]:
        return resolve_order(
            state,
            "anthropic",
            creds,
            NOW,
            configured_profiles=configured,
            configured_order=explicit,
        )

    assert resolve(stored, order) == ["b", "a"]
    assert resolve(ProfileState(), order) == ["c", "a", "b"]
    # No explicit order: the configured profiles, round-robin (never used: given order).
    assert resolve(ProfileState(), None) == ["c", "b"]


def test_explicit_order_filters_dedupes_and_puts_preferred_first() -> None:
    creds = [cred("a"), cred("b"), cred("o", provider="openai"), cred("bad", "token")]
    creds[3] = creds[3].model_copy(update={"usable": False})
    order = {"anthropic": ["b", "missing", "o", "bad", "b", "a"]}
    got = resolve_order(ProfileState(), "anthropic", creds, NOW, configured_order=order)
    assert got == ["b", "a"]
    got = resolve_order(
        ProfileState(), "anthropic", creds, NOW, configured_order=order, preferred="a"
    )
    assert got == ["a", "b"]
    cooled = with_usage(a=ProfileUsage(cooldown_until=NOW + 5))
    got = resolve_order(cooled, "anthropic", creds, NOW, configured_order=order, preferred="a")
    assert got == ["a", "b"]  # preferred even in cooldown
    got = resolve_order(cooled, "anthropic", creds, NOW, preferred="nope")
    assert got == ["b", "a"]


def test_drifted_config_falls_back_to_stored_profiles() -> None:
    creds = [cred("anthropic:new")]
    configured = {"anthropic:old": AuthProfile(id="anthropic:old", provider="anthropic")}
    got = resolve_order(ProfileState(), "anthropic", creds, NOW, configured_profiles=configured)
    assert got == ["anthropic:new"]
    assert resolve_order(ProfileState(), "openai", creds, NOW) == []


# --- §7.4 session pinning ----------------------------------------------------------------------


def pin_for(
    pin: ProfilePin | None,
    state: ProfileState = ProfileState(),
    order: tuple[str, ...] = ("a", "b", "c"),
    new: bool = False,
    compactions: int = 0,
) -> ProfilePin | None:
    creds = [cred("a"), cred("b"), cred("c"), cred("o", provider="openai")]
    return resolve_session_pin(
        pin,
        list(order),
        state,
        creds,
        "anthropic",
        NOW,
        is_new_session=new,
        compaction_count=compactions,
    )


def test_user_pin_holds_even_in_cooldown() -> None:
    pin = ProfilePin(profile_id="b", source="user")
    cooled = with_usage(b=ProfileUsage(disabled_until=NOW + 9, disabled_reason=R.BILLING))
    assert pin_for(pin, cooled) == pin
    assert pin_for(pin, cooled, order=("a", "c")) == pin  # not dropped for being out of order


def test_pin_dropped_when_gone_or_of_another_provider_or_auto_out_of_order() -> None:
    expected = ProfilePin(profile_id="a", source="auto")
    assert pin_for(ProfilePin(profile_id="gone", source="user")) == expected
    assert pin_for(ProfilePin(profile_id="o", source="user")) == expected
    assert pin_for(ProfilePin(profile_id="b"), order=("a", "c")) == expected
    assert pin_for(None) == expected
    assert pin_for(ProfilePin(profile_id="a"), order=()) is None


def test_new_session_rotates_round_robin() -> None:
    assert pin_for(ProfilePin(profile_id="c", source="user"), new=True) == ProfilePin(
        profile_id="a"
    )
    cooled = with_usage(b=ProfileUsage(cooldown_until=NOW + 9))
    assert pin_for(ProfilePin(profile_id="a"), cooled, new=True) == ProfilePin(profile_id="c")


def test_compaction_since_pinning_rotates() -> None:
    pin = ProfilePin(profile_id="a", compaction_count=1)
    assert pin_for(pin, compactions=1) == ProfilePin(profile_id="a", compaction_count=1)
    assert pin_for(pin, compactions=2) == ProfilePin(profile_id="b", compaction_count=2)


def test_cooled_auto_pin_moves_to_first_available_or_order_head() -> None:
    cooled = with_usage(a=ProfileUsage(cooldown_until=NOW + 9))
    assert pin_for(ProfilePin(profile_id="a"), cooled) == ProfilePin(profile_id="b")
    all_cooled = with_usage(**{p: ProfileUsage(cooldown_until=NOW + 9) for p in "abc"})
    assert pin_for(ProfilePin(profile_id="b"), all_cooled) == ProfilePin(profile_id="a")
    # Rotation with everything cooled stays put.
    assert pin_for(ProfilePin(profile_id="b"), all_cooled, new=True) == ProfilePin(profile_id="b")


# --- §7.5 / §7.6 candidates, selection, advancing ---------------------------------------------


def test_candidate_list() -> None:
    assert candidate_list(["a", "b"]) == ["a", "b"]
    assert candidate_list(["a", "b"], locked="x") == ["x"]
    assert candidate_list([]) == [None]


def test_t48_overload_rotates_and_cools_the_failed_profile() -> None:
    candidates = ["p1", "p2"]
    state = ProfileState()
    assert select_initial(candidates, state, "m", NOW).index == 0
    state = fail(state, R.OVERLOADED, NOW, pid="p1", model="m")
    assert usage(state, "p1").cooldown_until == NOW + 30
    assert advance(candidates, 0, state, "m", NOW) == 1
    assert advance(candidates, 1, state, "m", NOW) is None


def test_t48_cooled_profiles_skipped_at_selection_and_rotation() -> None:
    candidates = ["p1", "p2", "p3"]
    state = with_usage(
        p1=ProfileUsage(cooldown_until=NOW + 9), p2=ProfileUsage(cooldown_until=NOW + 9)
    )
    assert select_initial(candidates, state, "m", NOW).index == 2
    assert advance(candidates, -1, state, "m", NOW) == 2
    scoped = with_usage(
        p1=ProfileUsage(cooldown_until=NOW + 9, cooldown_reason=R.RATE_LIMIT, cooldown_model="x")
    )
    assert select_initial(candidates, scoped, "m", NOW).index == 0  # checked for this model


def test_t48_user_locked_profile_never_rotated_and_used_in_cooldown() -> None:
    state = with_usage(p1=ProfileUsage(cooldown_until=NOW + 9))
    candidates = candidate_list(["p2"], locked="p1")
    assert select_initial(candidates, state, "m", NOW, locked="p1").index == 0
    assert advance(candidates, 0, ProfileState(), "m", NOW, locked="p1") is None


def test_no_profile_candidate_is_always_usable() -> None:
    assert select_initial([None], ProfileState(), "m", NOW).index == 0


def test_all_cooled_probe_only_when_allowed_and_probeable() -> None:
    rate = ProfileUsage(cooldown_until=NOW + 9, failure_counts={R.RATE_LIMIT: 1})
    state = with_usage(p1=rate, p2=rate)
    got = select_initial(["p1", "p2"], state, "m", NOW, allow_transient_probe=True)
    assert (got.index, got.probe) == (0, True)
    got = select_initial(["p1", "p2"], state, "m", NOW)
    assert (got.index, got.reason) == (None, R.RATE_LIMIT)
    auth = ProfileUsage(disabled_until=NOW + 9, disabled_reason=R.AUTH_PERMANENT)
    got = select_initial(["p1"], with_usage(p1=auth), "m", NOW, allow_transient_probe=True)
    assert (got.index, got.probe, got.reason) == (None, False, R.AUTH_PERMANENT)
    bare = with_usage(p1=ProfileUsage(cooldown_until=NOW + 9))
    got = select_initial(["p1"], bare, "m", NOW, allow_transient_probe=True)
    assert (got.index, got.probe) == (0, True)  # inferred unknown is probe-able


def test_a_retry_after_on_another_model_moves_an_active_window_out() -> None:
    """A profile cooling for model A (a second left) gets a 429 on model B asking for 900 s: the
    window widens to the whole profile and ends when the provider said. Without the flag (runs
    recorded before it), the active window is kept as it was, the Retry-After lost."""
    cooling = ProfileState(
        usage={
            "p": ProfileUsage(
                cooldown_until=NOW + 1,
                cooldown_reason=R.RATE_LIMIT,
                cooldown_model="a",
                error_count=1,
                last_failure_at=NOW - 30,
            )
        }
    )
    kw = dict(provider="anthropic", now=NOW, model_id="b", retry_after=900.0)
    told = mark_failure(cooling, "p", R.RATE_LIMIT, told_lengthens=True, **kw)  # type: ignore[arg-type]
    assert told.usage["p"].cooldown_until == NOW + 900
    assert told.usage["p"].cooldown_model is None
    kept = mark_failure(cooling, "p", R.RATE_LIMIT, **kw)  # type: ignore[arg-type]
    assert kept.usage["p"].cooldown_until == NOW + 1
    # Never moved in: a shorter Retry-After leaves a longer window as it is.
    short = mark_failure(
        told,
        "p",
        R.RATE_LIMIT,
        told_lengthens=True,
        provider="anthropic",
        now=NOW,
        model_id="b",
        retry_after=5.0,
    )
    assert short.usage["p"].cooldown_until == NOW + 900
