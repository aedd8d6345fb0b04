"""Secrets at rest: provider keys and webhook secrets are sealed with the payload key when
encryption is on (`agentlane/encryption.py`), by the same codec that encrypts workflow payloads
(so a key rotation works the same way: prepend a new key, keep the old ones to read)."""

from __future__ import annotations

import json
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

_PLAIN = b"binary/plain"


class Sealer:
    def __init__(self, codec: PayloadCodec | None) -> None:
        self.codec = codec

    async def seal(self, data: bytes) -> bytes:
        payload = Payload(metadata={"encoding": _PLAIN}, data=data)
        if self.codec is not None:
            payload = (await self.codec.encode([payload]))[0]
        return payload.SerializeToString()

    async def open(self, sealed: bytes) -> bytes:
        payload = Payload()
        payload.ParseFromString(sealed)
        if self.codec is not None:
            # A secret written before encryption was on is plain: the codec passes it through.
            payload = (await self.codec.decode([payload]))[0]
        elif payload.metadata.get("encoding") != _PLAIN:
            raise ValueError(
                "a stored secret is encrypted, and no encryption keys are configured "
                "(set AGENTLANE_ENCRYPTION_KEYS_FILE to the keys it was written with)"
            )
        return payload.data

    async def seal_json(self, value: dict[str, Any]) -> bytes:
        return await self.seal(json.dumps(value).encode())

    async def open_json(self, sealed: bytes) -> dict[str, Any]:
        value = json.loads(await self.open(sealed))
        if not isinstance(value, dict):
            raise ValueError("a stored secret is not a JSON object")
        return value
