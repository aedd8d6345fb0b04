"""Offloaded payloads in the store: a driver for the SDK's own `ExternalStorage`
(`temporalio.converter`), content-addressed (a payload is stored once, named by the SHA-256 of
its bytes, so retries are free), reachable by every host that reaches the store, on either
backend. Each is filed under its owner, the workflow whose history references it (the SDK names
it in the store context), so `agentlane/payload_gc.py` removes it once that workflow has closed.

Where an S3-compatible store exists, the SDK's `temporalio.contrib.aws.s3driver` is the other
option (README "Where state lives").
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Sequence

from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
    StorageDriverWorkflowInfo,
)

from store.interface import Store
from store.models import PayloadOwnerRef

Opener = Callable[[], Awaitable[Store]]


def check_digest(digest: str) -> str:
    if len(digest) != 64 or not all(c in "0123456789abcdef" for c in digest):
        raise ValueError(f"malformed payload claim {digest!r}")
    return digest


class PayloadMissing(LookupError):
    pass


def owner_of(context: StorageDriverStoreContext) -> PayloadOwnerRef | None:
    """The workflow whose history will reference what is stored in `context`: the workflow
    itself, the child or signalled workflow a command targets, or the parent that receives a
    child's result. None: no workflow (a client's own input before its workflow exists)."""
    target = context.target
    if not isinstance(target, StorageDriverWorkflowInfo) or not target.id:
        return None
    return PayloadOwnerRef(workflow_id=target.id, run_id=target.run_id or None)


class StorePayloadDriver(StorageDriver):
    def __init__(self, opener: Opener) -> None:
        self._opener = opener

    def name(self) -> str:
        return "agentlane-store"

    async def store(
        self, context: StorageDriverStoreContext, payloads: Sequence[Payload]
    ) -> list[StorageDriverClaim]:
        store = await self._opener()
        owner = owner_of(context)
        claims = []
        for payload in payloads:
            data = payload.SerializeToString()
            digest = hashlib.sha256(data).hexdigest()
            await store.put_payload(digest, data, owner)
            claims.append(StorageDriverClaim(claim_data={"sha256": digest}))
        return claims

    async def _bytes(self, digest: str) -> bytes:
        data = await (await self._opener()).payload(check_digest(digest))
        if data is None:
            raise PayloadMissing(f"offloaded payload {digest} is not in the store")
        return data

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        out = []
        for claim in claims:
            payload = Payload()
            payload.ParseFromString(await self._bytes(claim.claim_data["sha256"]))
            out.append(payload)
        return out
