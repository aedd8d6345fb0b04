"""Contract of the activity that tells a run which auth profiles a provider has (ids, types and
whether a key is there; never the key), in the configured order (SPEC §7.2, §7.3)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from agentlane.profile_state import ProfileCredential

LIST_PROFILES = "list_profiles"


class ListProfilesInput(BaseModel):
    provider: str


class ListedProfiles(BaseModel):
    profiles: list[ProfileCredential] = Field(default_factory=list)
    configured_order: list[str] = Field(default_factory=list)
