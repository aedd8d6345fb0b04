"""Contracts of the activities behind auth-profile routing: which profiles a provider has (ids,
types, never keys) with the shared cooldown state every session sees, and the race-free update
of one profile's usage (compare-and-set: a run recomputes from the fresh state when another run
changed the profile first). SPEC §7."""

from __future__ import annotations

from pydantic import BaseModel, Field

from agentlane.profile_state import ProfileCredential, ProfileState, ProfileUsage

LIST_PROFILES = "list_profiles"
UPDATE_PROFILE_USAGE = "update_profile_usage"


class ListProfilesInput(BaseModel):
    provider: str


class ListedProfiles(BaseModel):
    profiles: list[ProfileCredential] = Field(default_factory=list)
    configured_order: list[str] = Field(default_factory=list)
    # The shared state of these profiles as the store holds it now.
    state: ProfileState = Field(default_factory=ProfileState)


class UsageUpdate(BaseModel):
    profile_id: str
    # What the run saw (None: no usage recorded); the update applies only if it still holds.
    expected: ProfileUsage | None = None
    new: ProfileUsage


class UsageUpdateResult(BaseModel):
    applied: bool
    # The profile's usage in the store after the call (the run's, or another run's).
    current: ProfileUsage | None = None
