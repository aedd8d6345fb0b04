"""Contracts of the activities behind auth-profile routing: which profiles a provider has (ids,
types, never keys) with the shared cooldown state every session sees, and the race-free update
of one profile's usage (compare-and-set: a run recomputes from the fresh state when another run
changed the profile first). SPEC §7."""

from __future__ import annotations

from pydantic import BaseModel, Field

from agentlane.config import AuthProfile
from agentlane.profile_state import AuthCooldowns, ProfileCredential, ProfileState, ProfileUsage

LIST_PROFILES = "list_profiles"
UPDATE_PROFILE_USAGE = "update_profile_usage"


class ListProfilesInput(BaseModel):
    provider: str
    # Set at a run's start: the answer then also carries what the config says about failover
    # for this agent and model (`FailoverConfig`), read once so that replay decides the same.
    agent_id: str | None = None
    model: str | None = None


class ModelOption(BaseModel):
    """A model a run may use (the requested one, the agent's primary, its fallbacks)."""

    ref: str
    context_window: int | None = None
    window_source: str = "model"


class FailoverConfig(BaseModel):
    """The config's failover settings for one run (SPEC §4.1 steps 7-8, §8.1).

    `primary` is the agent's configured model, None when the agent is not configured (then
    nothing is appended to the chain: a session on a real provider never silently falls back to
    the offline default). `models` holds the windows of every ref named here that exists.
    """

    primary: str | None = None
    fallbacks: list[str] = Field(default_factory=list)
    models: dict[str, ModelOption] = Field(default_factory=dict)
    cooldowns: AuthCooldowns = Field(default_factory=AuthCooldowns)


class ListedProfiles(BaseModel):
    profiles: list[ProfileCredential] = Field(default_factory=list)
    configured_order: list[str] = Field(default_factory=list)
    # The shared state of these profiles as the store holds it now.
    state: ProfileState = Field(default_factory=ProfileState)
    # `auth.profiles` entries of this provider (their mode decides eligibility, SPEC §7.2).
    configured: dict[str, AuthProfile] = Field(default_factory=dict)
    failover: FailoverConfig | None = None


class UsageUpdate(BaseModel):
    profile_id: str
    # What the run saw (None: no usage recorded); the update applies only if it still holds.
    expected: ProfileUsage | None = None
    new: ProfileUsage
    # On success (SPEC §7.7 markAuthProfileGood): the provider whose last good profile this is.
    good_for: str | None = None
    # A success on a profile with no error state: only `new.last_used` is taken (the later of
    # it and the stored one), whatever else changed meanwhile. It commutes with every other
    # update, so it needs no compare-and-set (and runs ending together do not collide).
    touch: bool = False


class UsageUpdateResult(BaseModel):
    applied: bool
    # The profile's usage in the store after the call (the run's, or another run's).
    current: ProfileUsage | None = None
