"""The credentials one model call uses: the auth profile's, completed with the model entry's
header settings. Runs inside the activity, so `env:NAME` values are read here, from the worker's
environment, and never appear in any workflow input or result.

Precedence: the profile's auth header style wins over the entry's; the profile's headers win
over the entry's, name by name without regard to case. Values from the profile and values read
from `env:` are secrets (scrubbed from messages like the key); the entry's literal values are not.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from activities.providers.base import Credentials
from agentlane.config import ModelEntry
from agentlane.headers import HeaderError, check_value, env_variable, overlay


class HeaderVariableError(Exception):
    """A header value `env:NAME` whose variable is unset, empty or unsendable where the call
    runs. The message names the variable, never its value."""


def for_call(
    entry: ModelEntry, profile: Credentials | None, env: Mapping[str, str]
) -> Credentials | None:
    """None when there is neither a profile nor anything on the entry to send."""
    if profile is None and entry.auth_header is None and not entry.headers:
        return None
    base = profile if profile is not None else Credentials(profile_id=None)
    headers, public = _entry_headers(entry, env)
    public -= {name.lower() for name in base.headers}
    return dataclasses.replace(
        base,
        auth_header=base.auth_header or entry.auth_header,
        headers=overlay(headers, base.headers),
        public_headers=frozenset(public),
    )


def _entry_headers(entry: ModelEntry, env: Mapping[str, str]) -> tuple[dict[str, str], set[str]]:
    headers: dict[str, str] = {}
    public: set[str] = set()
    for name, value in entry.headers.items():
        variable = env_variable(value)
        if variable is None:
            headers[name] = value
            public.add(name.lower())
            continue
        found = env.get(variable, "")
        if not found.strip():
            state = "is empty" if variable in env else "is not set"
            raise HeaderVariableError(
                f"header {name!r} of model {entry.ref} is read from the environment variable "
                f"{variable}, which {state} where this worker runs"
            )
        try:
            check_value(name, found, allow_env=True)
        except HeaderError as err:
            raise HeaderVariableError(
                f"model {entry.ref}, environment variable {variable}: {err}"
            ) from None
        headers[name] = found
    return headers, public
