"""Webhook signing secrets, in the store, named by reference (sealed with the payload key when
encryption is on).

A secret is 64 hex characters (32 random bytes). Workflows and their histories see only its
reference; the delivery activity reads the secret from the store, and so does whoever
configures a receiver (`agentlane webhook secret`), from any host. A session whose routing
names no reference signs with its own (`default_secret_ref(key)`), created by the first delivery
if need be (two hosts creating it at once end up with the same one).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from agentlane.settings import Settings
from agentlane.webhooks import check_secret_ref
from store.interface import Store
from store.open import describe
from store.sync import run_sync


class SecretMissing(LookupError):
    pass


def _new_secret() -> bytes:
    return secrets.token_hex(32).encode()


class WebhookSecretStore:
    """Async over a store the caller holds (`aget`, `aensure`), or synchronous (the CLI, tests:
    each call opens the store)."""

    def __init__(self, place: Settings | Path, store: Store | None = None) -> None:
        self.settings = (
            place
            if isinstance(place, Settings)
            else Settings(
                data_dir=place, database_url=os.environ.get("AGENTLANE_DATABASE_URL") or None
            )
        )
        self.store = store

    def _missing(self, ref: str) -> SecretMissing:
        return SecretMissing(
            f"webhook secret {ref!r} is not stored in {describe(self.settings)} "
            f"(create it with `agentlane webhook secret {ref} --ref`)"
        )

    async def aget(self, store: Store, ref: str) -> bytes:
        secret = await store.webhook_secret(check_secret_ref(ref))
        if secret is None:
            raise self._missing(ref)
        return secret

    async def aensure(self, store: Store, ref: str) -> bytes:
        """The secret, created if it does not exist yet."""
        return await store.ensure_webhook_secret(check_secret_ref(ref), _new_secret())

    async def arotate(self, store: Store, ref: str) -> bytes:
        secret = _new_secret()
        await store.set_webhook_secret(check_secret_ref(ref), secret)
        return secret

    def get(self, ref: str) -> bytes:
        return run_sync(self.settings, lambda store: self.aget(store, ref))

    def ensure(self, ref: str) -> bytes:
        return run_sync(self.settings, lambda store: self.aensure(store, ref))

    def rotate(self, ref: str) -> bytes:
        return run_sync(self.settings, lambda store: self.arotate(store, ref))
