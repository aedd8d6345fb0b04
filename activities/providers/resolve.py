"""Maps a model reference to a provider instance and the credentials it needs.

Credentials are resolved here, inside the activity, from the auth store or the environment,
and completed with the model entry's header settings (`call_credentials`); workflows only ever
name a provider, a model and a profile id.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass

from activities.auth_store import AuthStore, AuthStoreError, MissingCredentialsError
from activities.providers.base import Credentials, ModelProvider
from activities.providers.call_credentials import HeaderVariableError, for_call
from activities.providers.catalog import build_provider
from agentlane.config import (
    AgentlaneConfig,
    ApiKind,
    ConfigError,
    ConfigWatcher,
    ModelEntry,
    UnknownModelError,
)
from agentlane.run import ModelRef
from agentlane.settings import Settings
from store.interface import Store
from store.open import shared_store

log = logging.getLogger(__name__)


class ModelUnavailable(Exception):
    """The model cannot be used as configured (unknown model, no key, unreadable config)."""


class UnknownModel(ModelUnavailable):
    """This host's config does not have the model: a failed candidate (SPEC §3.3, the original's
    `model_not_found`), which a fallback model can stand in for."""


class NoCredentials(ModelUnavailable):
    """No key for the model's provider (or its profile): a failed candidate too (SPEC §3.6,
    reason `auth`); a fallback on another provider can still answer."""


@dataclass(frozen=True)
class ResolvedModel:
    provider: ModelProvider
    model_id: str
    credentials: Credentials | None
    entry: ModelEntry
    # The configuration the model was resolved in: the rest of the call reads the same one.
    config: AgentlaneConfig | None = None


class ProviderResolver:
    def __init__(
        self, settings: Settings, env: Mapping[str, str] | None = None, store: Store | None = None
    ) -> None:
        self.settings = settings
        self.store = store
        self._env = os.environ if env is None else env
        self._config: AgentlaneConfig | None = None
        self._watcher = ConfigWatcher(settings.data_dir, env)
        self._providers: dict[str, ModelProvider] = {}

    def config(self) -> AgentlaneConfig:
        try:
            config = self._watcher.current()
        except ConfigError as err:
            raise ModelUnavailable(str(err)) from err
        if config is not self._config:
            # A changed model entry needs a new provider (base URL, API kind).
            self._providers.clear()
            self._config = config
        return config

    def _env_where(self) -> str:
        # Keys exported in a shell reach only processes started from it: say which one looked.
        return f"the environment of worker pid {os.getpid()} on host {self.settings.host_id}"

    async def aresolve(self, ref: ModelRef, profile_id: str | None = None) -> ResolvedModel:
        """`resolve` with the auth profiles read from the store first (one query, off the
        event loop's thread) when the model needs them. The config file is checked once a call."""
        try:
            config = self.config()
        except ModelUnavailable:
            return self.resolve(ref, profile_id)  # which says what is wrong
        try:
            offline = config.model(ref.label()).api == ApiKind.OFFLINE
        except ConfigError:
            offline = True  # resolve() says what is wrong
        if offline:
            return self.resolve(ref, profile_id, config=config)
        auth = AuthStore(self.settings, self._env, config.auth_profiles, self._env_where())
        await auth.load(self.store or await shared_store(self.settings))
        return self.resolve(ref, profile_id, auth, config)

    def resolve(
        self,
        ref: ModelRef,
        profile_id: str | None = None,
        auth: AuthStore | None = None,
        config: AgentlaneConfig | None = None,
    ) -> ResolvedModel:
        config = self.config() if config is None else config
        try:
            entry = config.model(ref.label())
        except UnknownModelError as err:
            # Every worker host reads its own file: say which host and which file lacks it.
            raise UnknownModel(
                f"{err} (worker host {self.settings.host_id} reads {self._watcher.where()}; "
                "every host needs the model in its own config file)"
            ) from err
        except ConfigError as err:
            raise ModelUnavailable(str(err)) from err
        provider = self._providers.get(entry.ref)
        if provider is None:
            provider = self._providers[entry.ref] = build_provider(entry)
        credentials: Credentials | None = None
        if entry.api != ApiKind.OFFLINE:
            try:
                auth = auth or AuthStore(
                    self.settings, self._env, config.auth_profiles, self._env_where()
                )
                credentials = auth.resolve(
                    profile_id, entry.provider, order=config.auth_order.get(entry.provider)
                )
            except AuthStoreError as err:
                if entry.needs_key:
                    if isinstance(err, MissingCredentialsError):
                        raise NoCredentials(str(err)) from err
                    raise ModelUnavailable(str(err)) from err
                if not isinstance(err, MissingCredentialsError):
                    # The call goes on without a profile; say why, or a gateway's 401 is a puzzle.
                    log.warning("%s: calling %s without an auth profile", err, entry.ref)
            try:
                credentials = for_call(entry, credentials, self._env)
            except HeaderVariableError as err:
                raise ModelUnavailable(str(err)) from err
        return ResolvedModel(provider, entry.id, credentials, entry, config)
