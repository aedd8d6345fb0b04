"""Lists a provider's auth profiles for the run workflow: ids and types from the auth store and
the config's order. Keys stay here (DESIGN decision 2)."""

from __future__ import annotations

import asyncio

from temporalio import activity

from activities.auth_store import AuthStore
from agentlane.config import ConfigWatcher
from agentlane.profile_listing import LIST_PROFILES, ListedProfiles, ListProfilesInput
from agentlane.profile_state import ProfileCredential
from agentlane.settings import Settings


class ProfileListing:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.config = ConfigWatcher(settings.data_dir)

    def _list(self, provider: str) -> ListedProfiles:
        order = list(self.config.current().auth_order.get(provider, []))
        store = AuthStore.for_data_dir(self.settings.data_dir)
        stored = store.profiles()
        ids = store.profile_ids(provider, order)
        return ListedProfiles(
            profiles=[
                ProfileCredential(id=pid, provider=provider, type=stored[pid].type, usable=True)
                for pid in ids
            ],
            configured_order=order,
        )

    @activity.defn(name=LIST_PROFILES)
    async def list_profiles(self, inp: ListProfilesInput) -> ListedProfiles:
        return await asyncio.to_thread(self._list, inp.provider)
