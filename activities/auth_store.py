"""The auth store: provider keys, read only inside activities (DESIGN decision 2).

Keys come from, in order of precedence for a profile id P of provider X:

1. the environment variable `AGENTLANE_KEY_<P>` (P upper-cased, every character that is not a
   letter or digit turned into `_`: `anthropic:work` -> `AGENTLANE_KEY_ANTHROPIC_WORK`);
2. `<data_dir>/auth.json`, a file of mode 0600: `{"profiles": {P: {"provider": X, "type":
   "api_key" | "token" | "oauth", "key": "...", "base_url": "...", "auth_header": "x-api-key" |
   "bearer" | "none", "headers": {NAME: VALUE}}}}`; `auth_header` and `headers` are for gateways
   and proxies (agentlane/headers.py), and header values are treated like the key;
3. for the env-backed profiles `anthropic:env` and `openai:env`, `ANTHROPIC_API_KEY` and
   `OPENAI_API_KEY`.

A file that group or others can read or write is refused rather than trusted. No message or repr
of this module ever contains a key or a header value.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import re
import stat
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from activities.providers.base import Credentials
from agentlane.config import ENV_KEY_VARIABLES, ENV_PROFILE_SUFFIX
from agentlane.headers import AuthHeader, HeaderError, check_auth_header, check_headers

AUTH_FILE_NAME = "auth.json"
ProfileType = Literal["oauth", "token", "api_key"]
_PROFILE_TYPES = ("oauth", "token", "api_key")


class AuthStoreError(Exception):
    pass


class InsecureAuthFileError(AuthStoreError):
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
    def __init__(self, path: Path, env: Mapping[str, str] | None = None) -> None:
        self.path = path
        self._env = os.environ if env is None else env

    @classmethod
    def for_data_dir(cls, data_dir: Path, env: Mapping[str, str] | None = None) -> AuthStore:
        return cls(data_dir / AUTH_FILE_NAME, env)

    # --- reading ---------------------------------------------------------------------------

    def profiles(self) -> dict[str, StoredProfile]:
        """File profiles plus env-backed ones, each with its key resolved (or None)."""
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
                    source=str(self.path),
                    auth_header=auth_header,
                    headers=headers,
                )
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
    ) -> Path:
        """Store a key, creating the file with mode 0600; the write is atomic. The profile's
        previous settings are replaced, not merged."""
        if not key.strip():
            raise AuthStoreError(f"refusing to store an empty key for profile {profile_id!r}")
        if type not in _PROFILE_TYPES:
            raise AuthStoreError(f"profile type must be one of {_PROFILE_TYPES}, not {type!r}")
        try:
            check_auth_header(auth_header)
            check_headers(headers or {}, allow_env=False)
        except HeaderError as err:
            raise InvalidProfileError(f"profile {profile_id!r}: {err}") from None
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with self._locked():
            data = {"profiles": self._read_file()} if self.path.exists() else {"profiles": {}}
            entry: dict[str, Any] = {"provider": provider, "type": type, "key": key}
            if base_url:
                entry["base_url"] = base_url
            if auth_header:
                entry["auth_header"] = auth_header
            if headers:
                entry["headers"] = dict(headers)
            data["profiles"][profile_id] = entry
            self._write_atomic(data)
        return self.path

    def remove(self, profile_id: str) -> bool:
        if not self.path.exists():
            return False
        with self._locked():
            profiles = self._read_file()
            if profiles.pop(profile_id, None) is None:
                return False
            self._write_atomic({"profiles": profiles})
        return True

    # --- internals -------------------------------------------------------------------------

    def _read_file(self) -> dict[str, dict[str, Any]]:
        try:
            info = self.path.stat()
        except FileNotFoundError:
            return {}
        mode = stat.S_IMODE(info.st_mode)
        if mode & 0o077:
            raise InsecureAuthFileError(
                f"auth store {self.path} is accessible by group or others (mode {mode:04o}); "
                f"it holds provider keys, so it is not read. Fix it with: chmod 600 {self.path}"
            )
        try:
            data = json.loads(self.path.read_text(encoding="utf-8") or "{}")
        except (OSError, ValueError) as err:
            # The parser's message may quote file content, so it is not passed on.
            raise AuthStoreError(
                f"auth store {self.path} is not valid JSON ({type(err).__name__})"
            ) from None
        if not isinstance(data, dict):
            raise AuthStoreError(f"auth store {self.path} must hold a JSON object")
        profiles = data.get("profiles", data)
        if not isinstance(profiles, dict):
            raise AuthStoreError(f"auth store {self.path}: 'profiles' must be an object")
        return {str(pid): dict(spec) for pid, spec in profiles.items() if isinstance(spec, dict)}

    def _gateway_settings(
        self, pid: str, spec: Mapping[str, Any]
    ) -> tuple[AuthHeader | None, dict[str, str]]:
        """A profile's `auth_header` and `headers`, checked like the config file's; a mistake is
        an error naming the profile and the header, never quoting a value."""
        where = f'auth store {self.path}: profiles."{pid}"'
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
        places = [f"environment variable {env_variable_for(profile_id)} (unset)"]
        state = "no such profile or no key" if self.path.exists() else "absent"
        places.append(f"{self.path} ({state})")
        if profile_id == env_profile_id(provider) and provider in ENV_KEY_VARIABLES:
            places.append(f"environment variable {ENV_KEY_VARIABLES[provider]} (unset)")
        return (
            f"No API key for auth profile {profile_id!r} (provider {provider}); looked in: "
            + "; ".join(places)
        )

    def _nothing_for_provider(self, provider: str) -> str:
        places = [f"{self.path} ({'no profile with a key' if self.path.exists() else 'absent'})"]
        if provider in ENV_KEY_VARIABLES:
            places.append(f"environment variable {ENV_KEY_VARIABLES[provider]} (unset)")
        places.append("environment variables AGENTLANE_KEY_<PROFILE> of configured profiles")
        return f"No API key found for provider {provider}; looked in: " + "; ".join(places)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        lock_path = self.path.with_name(self.path.name + ".lock")
        fd = os.open(lock_path, os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def _write_atomic(self, data: dict[str, Any]) -> None:
        # mkstemp creates the file with mode 0600 before anything is written to it.
        fd, tmp = tempfile.mkstemp(prefix=".auth-", suffix=".tmp", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(data, handle, indent=2, sort_keys=True)
                handle.write("\n")
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise


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
) -> Path:
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
