"""Auth-profile routing state: the small snapshot that enters workflow history (SPEC §7.1).

Only routing facts live here (usage, cooldowns, the stored order, the last good profile, the
session's pin); credentials never do (DESIGN decision 2). A `ProfileCredential` is what an
activity may tell a workflow about a stored profile: its id, provider, type and whether it holds
usable key material, never the key. Times are epoch seconds of workflow time. The models are
frozen: the policy in `workflows/policy/auth_profiles.py` returns new ones instead of mutating.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agentlane.errors import FailoverReason

ProfileType = Literal["oauth", "token", "api_key"]
PinSource = Literal["user", "auto"]


def valid_time(value: float | None) -> float | None:
    """A stored time, or None for junk older writers left (NaN, infinities, zero, negatives;
    SPEC §7.8, T44)."""
    if value is None or not math.isfinite(value) or value <= 0:
        return None
    return value


class ProfileUsage(BaseModel):
    """`ProfileUsageStats` of one profile (SPEC §7.1). Unset windows are None."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    last_used: float | None = None
    cooldown_until: float | None = None
    cooldown_reason: FailoverReason | None = None
    # A rate-limit cooldown may be scoped to the model that hit it (SPEC §7.7); None: all models.
    cooldown_model: str | None = None
    disabled_until: float | None = None
    disabled_reason: FailoverReason | None = None
    error_count: int = 0
    failure_counts: dict[FailoverReason, int] = Field(default_factory=dict)
    last_failure_at: float | None = None

    def unusable_until(self) -> float | None:
        """SPEC §7.8: the later of the valid cooldown and disable ends, or None."""
        ends = [v for v in (valid_time(self.cooldown_until), valid_time(self.disabled_until)) if v]
        return max(ends) if ends else None

    def scoped_to_other_model(self, now: float, model_id: str | None) -> bool:
        """A rate limit is per model: another model may use the profile, unless a profile-wide
        disable is also active (SPEC §7.8 model bypass)."""
        disabled = valid_time(self.disabled_until)
        return bool(
            model_id
            and self.cooldown_reason == FailoverReason.RATE_LIMIT
            and self.cooldown_model
            and self.cooldown_model != model_id
            and not (disabled is not None and now < disabled)
        )

    def blocks(self, now: float, model_id: str | None = None) -> bool:
        """In cooldown or disabled for `model_id` at `now` (SPEC §7.8 `isProfileInCooldown`,
        without the provider bypass, which callers apply)."""
        if self.scoped_to_other_model(now, model_id):
            return False
        until = self.unusable_until()
        return until is not None and now < until


class ProfileState(BaseModel):
    """The routing half of `auth-state.json` (SPEC §7.1): usage per profile id, the stored
    per-provider order override, and the last good profile per provider."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    usage: dict[str, ProfileUsage] = Field(default_factory=dict)
    order: dict[str, list[str]] = Field(default_factory=dict)
    last_good: dict[str, str] = Field(default_factory=dict)


class ProfileCredential(BaseModel):
    """What the auth store says about one stored profile, without its secret (SPEC §7.2).

    `usable`: the credential holds what its type needs (an api_key a key, a token a token, an
    oauth profile an access or refresh token). `expires_at`: a token's expiry, if it has one.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    provider: str
    type: str
    usable: bool = True
    expires_at: float | None = None


class ProfilePin(BaseModel):
    """A session's auth-profile override (SPEC §7.4): the profile, who picked it, and the
    session's compaction count when it was pinned (a later compaction rotates an `auto` pin)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    profile_id: str
    source: PinSource = "auto"
    compaction_count: int = 0


class AuthCooldowns(BaseModel):
    """`[auth.cooldowns]` (SPEC §4.1 step 7, §7.7). Non-positive backoffs fall back to the
    defaults."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Rotations to another profile after a rate limit / an overload before a run escalates to
    # model fallback (only when fallbacks are configured), and the sleep before an overload
    # rotation (0: none).
    rate_limited_profile_rotations: int = Field(default=1, ge=0)
    overloaded_profile_rotations: int = Field(default=1, ge=0)
    overloaded_backoff_ms: int = Field(default=0, ge=0, le=60_000)

    billing_backoff_hours: float = 5.0
    billing_backoff_hours_by_provider: dict[str, float] = Field(default_factory=dict)
    billing_max_hours: float = 24.0
    auth_permanent_backoff_minutes: float = 10.0
    auth_permanent_max_minutes: float = 60.0
    failure_window_hours: float = 24.0
