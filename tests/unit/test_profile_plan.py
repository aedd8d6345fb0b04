"""A run's auth-profile candidates (SPEC §4.1 step 5, §7.3-§7.5) and `mark_used` on state shared
by many sessions."""

from __future__ import annotations

from agentlane.config import AuthProfile
from agentlane.errors import FailoverReason as R
from agentlane.profile_state import ProfileCredential, ProfilePin, ProfileState, ProfileUsage
from workflows.policy.auth_profiles import mark_failure, mark_used, plan_profiles

NOW = 1_800_000_000.0


def cred(pid: str, provider: str = "anthropic", type_: str = "api_key") -> ProfileCredential:
    return ProfileCredential(id=pid, provider=provider, type=type_)


CREDS = [cred("anthropic:a"), cred("anthropic:b"), cred("anthropic:c")]


def cooling(*pids: str) -> ProfileState:
    return ProfileState(
        usage={
            pid: ProfileUsage(cooldown_until=NOW + 60, cooldown_reason=R.RATE_LIMIT, error_count=1)
            for pid in pids
        }
    )


def used(**last: float) -> ProfileState:
    return ProfileState(
        usage={pid.replace("_", ":"): ProfileUsage(last_used=t) for pid, t in last.items()}
    )


def test_a_new_session_takes_the_least_recently_used_profile() -> None:
    state = used(anthropic_a=300.0, anthropic_b=100.0, anthropic_c=200.0)
    plan = plan_profiles(state, "anthropic", CREDS, NOW, pin=None)
    assert plan.candidates == ["anthropic:b", "anthropic:c", "anthropic:a"]
    assert plan.pin == ProfilePin(profile_id="anthropic:b", source="auto")
    assert plan.locked is None and plan.error is None


def test_an_auto_pin_is_preferred_while_it_is_usable() -> None:
    state = used(anthropic_a=300.0, anthropic_b=100.0, anthropic_c=200.0)
    pin = ProfilePin(profile_id="anthropic:a", source="auto")
    plan = plan_profiles(state, "anthropic", CREDS, NOW, pin=pin)
    assert plan.candidates[0] == "anthropic:a" and plan.locked is None


def test_an_auto_pin_cooling_down_gives_way_to_the_first_available() -> None:
    pin = ProfilePin(profile_id="anthropic:a", source="auto")
    plan = plan_profiles(cooling("anthropic:a"), "anthropic", CREDS, NOW, pin=pin)
    assert plan.candidates[0] == "anthropic:b"
    assert plan.candidates[-1] == "anthropic:a", "cooling profiles go last (§7.3)"


def test_an_auto_pin_moves_on_after_a_compaction() -> None:
    pin = ProfilePin(profile_id="anthropic:a", source="auto", compaction_count=0)
    plan = plan_profiles(ProfileState(), "anthropic", CREDS, NOW, pin=pin, compaction_count=1)
    assert plan.pin is not None and plan.pin.profile_id == "anthropic:b"


def test_a_user_pin_locks_the_run_even_while_it_cools_down() -> None:
    pin = ProfilePin(profile_id="anthropic:c", source="user")
    plan = plan_profiles(cooling("anthropic:c"), "anthropic", CREDS, NOW, pin=pin)
    assert plan.candidates == ["anthropic:c"] and plan.locked == "anthropic:c"
    assert plan.pin == pin


def test_a_user_pin_of_another_provider_is_ignored() -> None:
    creds = [*CREDS, cred("openai:x", provider="openai")]
    pin = ProfilePin(profile_id="openai:x", source="user")
    plan = plan_profiles(ProfileState(), "anthropic", creds, NOW, pin=pin)
    assert plan.locked is None and plan.error is None and len(plan.candidates) == 3


def test_a_user_pin_configured_for_the_provider_but_not_usable_is_an_error() -> None:
    configured = {"anthropic:gone": AuthProfile(id="anthropic:gone", provider="anthropic")}
    pin = ProfilePin(profile_id="anthropic:gone", source="user")
    plan = plan_profiles(
        ProfileState(), "anthropic", CREDS, NOW, pin=pin, configured_profiles=configured
    )
    assert plan.error == 'Auth profile "anthropic:gone" is not configured for anthropic.'


def test_the_configured_order_is_kept() -> None:
    plan = plan_profiles(
        used(anthropic_c=1.0),
        "anthropic",
        CREDS,
        NOW,
        pin=None,
        configured_order=["anthropic:c", "anthropic:a", "anthropic:b"],
    )
    assert plan.candidates == ["anthropic:c", "anthropic:a", "anthropic:b"]


def test_no_stored_profile_is_one_default_candidate() -> None:
    plan = plan_profiles(ProfileState(), "anthropic", [], NOW, pin=None)
    assert plan.candidates == [None] and plan.pin is None


def test_mark_used_clears_the_error_state_of_the_profile_that_answered() -> None:
    state = mark_failure(ProfileState(), "anthropic:a", R.RATE_LIMIT, provider="anthropic", now=NOW)
    cleared = mark_used(state, "anthropic:a", NOW + 5, succeeded_at=NOW + 4)
    usage = cleared.usage["anthropic:a"]
    assert usage.cooldown_until is None and usage.error_count == 0
    assert usage.last_used == NOW + 5


def test_mark_used_keeps_a_failure_recorded_after_the_success() -> None:
    """Another session's fresh 429 is newer news than this run's last success."""
    state = mark_failure(
        ProfileState(), "anthropic:a", R.RATE_LIMIT, provider="anthropic", now=NOW + 10
    )
    kept = mark_used(state, "anthropic:a", NOW + 11, succeeded_at=NOW + 2)
    usage = kept.usage["anthropic:a"]
    assert usage.cooldown_until == NOW + 40 and usage.error_count == 1
    assert usage.last_used == NOW + 11


def test_a_retry_after_sets_a_rate_limit_window_to_what_the_provider_said() -> None:
    def window(reason: R, retry_after: float | None) -> float | None:
        state = mark_failure(
            ProfileState(), "p", reason, provider="anthropic", now=NOW, retry_after=retry_after
        )
        until = state.usage["p"].cooldown_until
        return None if until is None else until - NOW

    assert window(R.RATE_LIMIT, 7) == 7
    assert window(R.OVERLOADED, 2.5) == 2.5
    assert window(R.RATE_LIMIT, 0.2) == 1, "never below a second"
    assert window(R.RATE_LIMIT, 700) == 700, "longer than the ladder's step: as said"
    assert window(R.RATE_LIMIT, 3 * 86400) == 86400, "at most a day"
    assert window(R.RATE_LIMIT, None) == 30
    assert window(R.AUTH, 5) == 30, "only rate limits and overloads take the hint"


def test_an_active_window_is_not_shortened_by_a_later_retry_after() -> None:
    first = mark_failure(ProfileState(), "p", R.RATE_LIMIT, provider="anthropic", now=NOW)
    again = mark_failure(first, "p", R.RATE_LIMIT, provider="anthropic", now=NOW + 1, retry_after=1)
    assert again.usage["p"].cooldown_until == NOW + 30


def test_new_sessions_starting_together_spread_over_equally_rested_profiles() -> None:
    firsts = {
        plan_profiles(
            ProfileState(), "anthropic", CREDS, NOW, pin=None, spread_seed=seed
        ).candidates[0]
        for seed in range(12)
    }
    assert firsts == {"anthropic:a", "anthropic:b", "anthropic:c"}


def test_spreading_prefers_the_rested_and_keeps_an_explicit_order() -> None:
    busy = used(anthropic_a=NOW - 1, anthropic_b=NOW - 2)  # c never used: the only rested one
    picks = {
        plan_profiles(busy, "anthropic", CREDS, NOW, pin=None, spread_seed=s).candidates[0]
        for s in range(12)
    }
    assert picks == {"anthropic:c"}
    ordered = [
        plan_profiles(
            ProfileState(),
            "anthropic",
            CREDS,
            NOW,
            pin=None,
            spread_seed=s,
            configured_order=["anthropic:b", "anthropic:a", "anthropic:c"],
        ).candidates[0]
        for s in range(12)
    ]
    assert set(ordered) == {"anthropic:b"}
