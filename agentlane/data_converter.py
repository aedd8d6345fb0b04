"""The data converter every role uses: pydantic models as JSON, large payloads offloaded.

Offload uses the SDK's own ExternalStorage with a driver that writes content-addressed files
under the data folder (shared storage when workers run on several machines).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic_core import to_json
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter
from temporalio.converter import (
    CompositePayloadConverter,
    DataConverter,
    DefaultPayloadConverter,
    ExternalStorage,
    JSONPlainPayloadConverter,
    PayloadCodec,
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
)

from agentlane.private_files import write_private
from agentlane.wire import CompactModel


class _CompactJSONConverter(PydanticJSONPlainPayloadConverter):
    """Leaves out model fields whose value is None, and, for activity contracts
    (`CompactModel`), every field equal to its default.

    Every optional field of the contracts defaults to None (a unit test checks it), so nothing
    changes on the way back, and each event and activity input in history gets much smaller.
    """

    def to_payload(self, value: Any) -> Payload | None:
        if isinstance(value, CompactModel):
            data = value.__pydantic_serializer__.to_json(value, exclude_defaults=True)
        else:
            data = to_json(value, exclude_none=True)
        return Payload(metadata={"encoding": self.encoding.encode()}, data=data)


class CompactPydanticPayloadConverter(CompositePayloadConverter):
    """The SDK's pydantic converter with `_CompactJSONConverter` for JSON."""

    def __init__(self) -> None:
        compact = _CompactJSONConverter()
        super().__init__(
            *(
                compact if isinstance(c, JSONPlainPayloadConverter) else c
                for c in DefaultPayloadConverter.default_encoding_payload_converters
            )
        )


class LocalFileStorageDriver(StorageDriver):
    """Stores each payload once, named by the SHA-256 of its bytes (so retries are free)."""

    def __init__(self, root: Path) -> None:
        self._root = root

    def name(self) -> str:
        return "local-file"

    def _path(self, digest: str) -> Path:
        return self._root / digest[:2] / digest

    def _write(self, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        path = self._path(digest)
        if not path.exists():
            write_private(path, data)  # payloads hold messages and tool output: 0600
        return digest

    def _read(self, digest: str) -> bytes:
        if len(digest) != 64 or not all(c in "0123456789abcdef" for c in digest):
            raise ValueError(f"malformed payload claim {digest!r}")
        return self._path(digest).read_bytes()

    async def store(
        self, context: StorageDriverStoreContext, payloads: Sequence[Payload]
    ) -> list[StorageDriverClaim]:
        claims = []
        for payload in payloads:
            digest = await asyncio.to_thread(self._write, payload.SerializeToString())
            claims.append(StorageDriverClaim(claim_data={"sha256": digest}))
        return claims

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        out = []
        for claim in claims:
            data = await asyncio.to_thread(self._read, claim.claim_data["sha256"])
            payload = Payload()
            payload.ParseFromString(data)
            out.append(payload)
        return out


def make_data_converter(
    payloads_dir: Path, threshold: int = 128 * 1024, codec: PayloadCodec | None = None
) -> DataConverter:
    """`codec`: payload encryption (`agentlane/encryption.py`), applied before offloading, so
    offloaded payloads are encrypted too."""
    return DataConverter(
        payload_converter_class=CompactPydanticPayloadConverter,
        payload_codec=codec,
        external_storage=ExternalStorage(
            drivers=[LocalFileStorageDriver(payloads_dir)], payload_size_threshold=threshold
        ),
    )
