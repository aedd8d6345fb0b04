"""The secret values this worker knows, for redacting what tools show (previews in history,
heartbeat details): every auth profile's key and header values, and the worker's environment
variables named like secrets (a tool's command inherits that environment and may print it).

Read through the auth store, at most once per `REFRESH_SECONDS`: a key added meanwhile is
still caught by the shape rules of `agentlane/redaction.py` if it looks like a key.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping

from activities.auth_store import AuthStore
from agentlane.redaction import secret_env_values
from agentlane.settings import Settings
from store.interface import Store

REFRESH_SECONDS = 30.0

log = logging.getLogger(__name__)


class KnownSecrets:
    def __init__(
        self, settings: Settings, state: Store, env: Mapping[str, str] | None = None
    ) -> None:
        self.settings = settings
        self.state = state
        self.env = os.environ if env is None else env
        self._values: list[str] = []
        self._read_at: float | None = None

    async def values(self) -> list[str]:
        now = time.monotonic()
        if self._read_at is None or now - self._read_at > REFRESH_SECONDS:
            self._read_at = now
            found = secret_env_values(self.env)
            try:
                auth = await AuthStore(self.settings, self.env).load(self.state)
                for profile in auth.profiles().values():
                    found.extend(v for v in (profile.key, *profile.headers.values()) if v)
            except Exception as err:  # an unreadable store must not fail a tool call
                log.warning("auth store not read for redaction: %s", err)
            self._values = found
        return self._values
