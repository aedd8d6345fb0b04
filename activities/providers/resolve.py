"""Maps a model reference to a provider instance and the credentials it needs.

Credentials are resolved here, inside the activity, from the auth store or the environment;
workflows only ever name a provider, a model and a profile id.
"""

from __future__ import annotations

from dataclasses import dataclass

from activities.providers.base import Credentials, ModelProvider
from activities.providers.offline import OfflineProvider
from agentlane.run import ModelRef


class UnknownProvider(Exception):
    pass


@dataclass(frozen=True)
class ResolvedModel:
    provider: ModelProvider
    model_id: str
    credentials: Credentials | None


class ProviderResolver:
    def __init__(self) -> None:
        self._offline = OfflineProvider()

    def resolve(self, ref: ModelRef, profile_id: str | None = None) -> ResolvedModel:
        if ref.provider == "offline":
            return ResolvedModel(self._offline, ref.model, None)
        raise UnknownProvider(f"unknown model provider {ref.provider!r} (model {ref.label()})")
