"""The auth store: provider keys, read only inside activities (DESIGN decision 2).

Keys come from, in order of precedence for a profile id P of provider X:

1. the environment variable `AGENTLANE_KEY_<P>` (P upper-cased, every character that is not a
   letter or digit turned into `_`: `anthropic:work` -> `AGENTLANE_KEY_ANTHROPIC_WORK`);
2. the store (`store/`: `agentlane auth set`; the embedded SQLite file in the data dir, or
   PostgreSQL): per profile P its provider X, type (`api_key` | `token` | `oauth`), key,
   `base_url`, `auth_header` (`x-api-key` | `bearer` | `none`) and `headers` {NAME: VALUE};
   `auth_header` and `headers` are for gateways and proxies (agentlane/headers.py), and header
   values are treated like the key: key and headers are sealed with the payload key when
   encryption is on (store/sealing.py). An older `<data_dir>/auth.json` is brought in by
   `agentlane db import`;
3. for the env-backed profiles `anthropic:env` and `openai:env`, `ANTHROPIC_API_KEY` and
   `OPENAI_API_KEY`.

No message or repr of this module ever contains a key or a header value.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from activities.providers.base import Credentials
from agentlane.config import ENV_KEY_VARIABLES, ENV_PROFILE_SUFFIX, AuthProfile
from agentlane.headers import AuthHeader, HeaderError, check_auth_header, check_headers
from agentlane.settings import Settings
from store.interface import Store
from store.models import ProfileRow
from store.open import describe
from store.sync import run_sync

ProfileType = Literal["oauth", "token", "api_key"]
_PROFILE_TYPES = ("oauth", "token", "api_key")


class AuthStoreError(Exception):
    pass


class MissingCredentialsError(AuthStoreError):
    pass


class InvalidProfileError(AuthStoreError):
    pass


@dataclass(frozen=True)
class StoredProfile:
    id: str
    provider: str
    type: str
    key: str | None
    base_url: str | None
    source: str
    auth_header: AuthHeader | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        return (
            f"StoredProfile(id={self.id!r}, provider={self.provider!r}, type={self.type!r}, "
            f"key=<redacted>, auth_header={self.auth_header!r}, "
            f"headers={sorted(self.headers)!r}, source={self.source!r})"
        )


def env_variable_for(profile_id: str) -> str:
    return "AGENTLANE_KEY_" + re.sub(r"[^A-Za-z0-9]", "_", profile_id).upper()


def env_profile_id(provider: str) -> str:
    return f"{provider}:{ENV_PROFILE_SUFFIX}"


class AuthStore:
    """Synchronous for the CLI and tests (each call opens the store); activities `load` a
    snapshot from the store they hold first, then resolve from it."""

    def __init__(
        self,
        settings: Settings,
        env: Mapping[str, str] | None = None,
        declared: Mapping[str, AuthProfile] | None = None,
        env_where: str = "this process's environment",
    ) -> None:
        """`declared`: the config's profiles (`[auth.profiles."<id>"]`), which count with their
        key in `AGENTLANE_KEY_<P>` alone, nothing stored for them (a container given its keys
        in the environment). `env_where`: whose environment `env` is, for messages (a key
        exported in a shell does not reach a worker started elsewhere)."""
        self.env_where = env_where
        self.settings = settings
        self.where = f"the auth store ({describe(settings)})"
        self._env = os.environ if env is None else env
        self._declared = declared or {}
        self._snapshot: dict[str, dict[str, Any]] | None = None

    @classmethod
    def for_data_dir(
        cls,
        data_dir: Path,
        env: Mapping[str, str] | None = None,
        declared: Mapping[str, AuthProfile] | None = None,
    ) -> AuthStore:
        """The store of `data_dir` (or `AGENTLANE_DATABASE_URL`'s, when set)."""
        url = os.environ.get("AGENTLANE_DATABASE_URL") or None
        return cls(Settings(data_dir=data_dir, database_url=url), env, declared)

    async def load(self, store: Store) -> AuthStore:
        """Read the stored profiles once; later reads use this snapshot."""
        self._snapshot = {row.id: _spec(row) for row in await store.profiles()}
        return self

    # --- reading ---------------------------------------------------------------------------

    def profiles(self) -> dict[str, StoredProfile]:
        """Stored profiles, the config's profiles with a key in the environment, and the
        env-backed ones; each with its key resolved (or None)."""
        found: dict[str, StoredProfile] = {}
        for pid, spec in self._read_file().items():
            auth_header, headers = self._gateway_settings(pid, spec)
            found[pid] = self._with_env_override(
                StoredProfile(
                    id=pid,
                    provider=str(spec.get("provider", "")),
                    type=str(spec.get("type", "api_key")),
                    key=_opt_str(spec.get("key")),
                    base_url=_opt_str(spec.get("base_url")),
                    source=self.where,
                    auth_header=auth_header,
                    headers=headers,
                )
            )
        for pid, declared in self._declared.items():
            variable = env_variable_for(pid)
            if pid not in found and not declared.implied and self._env.get(variable):
                found[pid] = StoredProfile(
                    pid, declared.provider, declared.type, self._env[variable], None, variable
                )
        for provider, variable in ENV_KEY_VARIABLES.items():
            pid = env_profile_id(provider)
            if pid not in found and self._env.get(variable):
                found[pid] = self._with_env_override(
                    StoredProfile(pid, provider, "api_key", self._env[variable], None, variable)
                )
        return found

    def profile_ids(self, provider: str, order: Sequence[str] | None = None) -> list[str]:
        """Profiles of `provider` with a usable key: `order` first, then the rest by id."""
        usable = {pid for pid, p in self.profiles().items() if p.provider == provider and p.key}
        ordered = [pid for pid in (order or []) if pid in usable]
        return ordered + sorted(usable - set(ordered))

    def resolve(
        self, profile_id: str | None, provider: str, *, order: Sequence[str] | None = None
    ) -> Credentials:
        if profile_id is None:
            candidates = self.profile_ids(provider, order)
            if not candidates:
                raise MissingCredentialsError(self._nothing_for_provider(provider))
            profile_id = candidates[0]
        profiles = self.profiles()
        profile = profiles.get(profile_id)
        if profile is None:
            # A profile known only by its env variable (AGENTLANE_KEY_<P>) still counts.
            key = self._env.get(env_variable_for(profile_id))
            if key:
                return Credentials(profile_id=profile_id, api_key=key)
            raise MissingCredentialsError(self._nothing_for_profile(profile_id, provider))
        if profile.provider and profile.provider != provider:
            raise MissingCredentialsError(
                f"auth profile {profile_id!r} belongs to provider {profile.provider!r}, "
                f"not {provider!r}"
            )
        if not profile.key:
            raise MissingCredentialsError(self._nothing_for_profile(profile_id, provider))
        return Credentials(
            profile_id=profile_id,
            api_key=profile.key,
            base_url=profile.base_url,
            kind=profile.type,
            auth_header=profile.auth_header,
            headers=dict(profile.headers),
        )

    # --- writing ---------------------------------------------------------------------------

    def set_key(
        self,
        profile_id: str,
        provider: str,
        key: str,
        *,
        type: ProfileType = "api_key",
        base_url: str | None = None,
        auth_header: AuthHeader | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> str:
        """Store a key (sealed when encryption is on), in one write; return where. The
        profile's previous settings are replaced, not merged."""
        if not key.strip():
            raise AuthStoreError(f"refusing to store an empty key for profile {profile_id!r}")
        if type not in _PROFILE_TYPES:
            raise AuthStoreError(f"profile type must be one of {_PROFILE_TYPES}, not {type!r}")
        try:
            check_auth_header(auth_header)
            check_headers(headers or {}, allow_env=False)
        except HeaderError as err:
            raise InvalidProfileError(f"profile {profile_id!r}: {err}") from None
        row = ProfileRow(
            id=profile_id,
            provider=provider,
            type=type,
            key=key,
            base_url=base_url or None,
            auth_header=auth_header or None,
            headers=dict(headers or {}),
        )
        run_sync(self.settings, lambda store: store.put_profile(row))
        self._snapshot = None
        return self.where

    def remove(self, profile_id: str) -> bool:
        removed = run_sync(self.settings, lambda store: store.delete_profile(profile_id))
        self._snapshot = None
        return removed

    # --- internals -------------------------------------------------------------------------

    def _read_file(self) -> dict[str, dict[str, Any]]:
        if self._snapshot is None:
            rows = run_sync(self.settings, lambda store: store.profiles())
            return {row.id: _spec(row) for row in rows}
        return self._snapshot

    def _gateway_settings(
        self, pid: str, spec: Mapping[str, Any]
    ) -> tuple[AuthHeader | None, dict[str, str]]:
        """A profile's `auth_header` and `headers`, checked like the config file's; a mistake is
        an error naming the profile and the header, never quoting a value."""
        where = f'{self.where}: profiles."{pid}"'
        try:
            auth_header = check_auth_header(spec.get("auth_header"))
        except HeaderError as err:
            raise InvalidProfileError(f"{where}.auth_header: {err}") from None
        headers = spec.get("headers") or {}
        if not isinstance(headers, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
        ):
            raise InvalidProfileError(
                f"{where}.headers must be an object of header names to string values"
            )
        try:
            check_headers(headers, allow_env=False)
        except HeaderError as err:
            raise InvalidProfileError(f"{where}.headers: {err}") from None
        return auth_header, dict(headers)

    def _with_env_override(self, profile: StoredProfile) -> StoredProfile:
        variable = env_variable_for(profile.id)
        key = self._env.get(variable)
        if not key:
            return profile
        return dataclasses.replace(profile, key=key, source=variable)

    def _nothing_for_profile(self, profile_id: str, provider: str) -> str:
        unset = f"(unset in {self.env_where})"
        places = [f"environment variable {env_variable_for(profile_id)} {unset}"]
        places.append(f"{self.where} (no such profile or no key)")
        if profile_id == env_profile_id(provider) and provider in ENV_KEY_VARIABLES:
            places.append(f"environment variable {ENV_KEY_VARIABLES[provider]} {unset}")
        return (
            f"No API key for auth profile {profile_id!r} (provider {provider}); looked in: "
            + "; ".join(places)
        )

    def _nothing_for_provider(self, provider: str) -> str:
        places = [f"{self.where} (no profile with a key)"]
        if provider in ENV_KEY_VARIABLES:
            places.append(
                f"environment variable {ENV_KEY_VARIABLES[provider]} (unset in {self.env_where})"
            )
        places.append(
            f"environment variables AGENTLANE_KEY_<PROFILE> of configured profiles (in "
            f"{self.env_where})"
        )
        return f"No API key found for provider {provider}; looked in: " + "; ".join(places)


def _spec(row: ProfileRow) -> dict[str, Any]:
    """A stored profile in the shape the checks read (the shape of the old auth.json)."""
    spec: dict[str, Any] = {"provider": row.provider, "type": row.type, "key": row.key}
    if row.base_url:
        spec["base_url"] = row.base_url
    if row.auth_header:
        spec["auth_header"] = row.auth_header
    if row.headers:
        spec["headers"] = row.headers  # checked by _gateway_settings
    return spec


def resolve_credentials(
    profile_id: str | None,
    provider: str,
    *,
    data_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
    order: Sequence[str] | None = None,
) -> Credentials:
    """Credentials for `profile_id`, or the first usable profile of `provider` when None."""
    return _store(data_dir, env).resolve(profile_id, provider, order=order)


def set_key(
    profile_id: str,
    provider: str,
    key: str,
    *,
    data_dir: Path | None = None,
    type: ProfileType = "api_key",
    base_url: str | None = None,
    auth_header: AuthHeader | None = None,
    headers: Mapping[str, str] | None = None,
) -> str:
    return _store(data_dir, None).set_key(
        profile_id,
        provider,
        key,
        type=type,
        base_url=base_url,
        auth_header=auth_header,
        headers=headers,
    )


def _store(data_dir: Path | None, env: Mapping[str, str] | None) -> AuthStore:
    if data_dir is None:
        from agentlane.settings import Settings

        data_dir = Settings.from_env().data_dir
    return AuthStore.for_data_dir(data_dir, env)


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
