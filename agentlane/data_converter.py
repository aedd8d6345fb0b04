"""The data converter every role uses: pydantic models as JSON, large payloads offloaded.

Offload uses the SDK's own ExternalStorage with a driver over the store (`store/payload_driver.py`),
so every host that reaches the store reaches the payloads.
"""

from __future__ import annotations

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
)

from agentlane.settings import Settings
from agentlane.wire import CompactModel
from store.interface import Store
from store.open import shared_store
from store.payload_driver import LegacyFileClaims, StorePayloadDriver


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


def make_data_converter(
    place: Settings | Path, threshold: int = 128 * 1024, codec: PayloadCodec | None = None
) -> DataConverter:
    """`place`: the settings whose store holds offloaded payloads (or a data dir: its embedded
    store). `codec`: payload encryption (`agentlane/encryption.py`), applied before offloading,
    so offloaded payloads are encrypted too."""
    settings = place if isinstance(place, Settings) else Settings(data_dir=place)

    async def opener() -> Store:
        # Opened on the first offload or retrieval, shared with the process's other users.
        return await shared_store(settings)

    driver = StorePayloadDriver(opener)
    return DataConverter(
        payload_converter_class=CompactPydanticPayloadConverter,
        payload_codec=codec,
        external_storage=ExternalStorage(
            drivers=[driver, LegacyFileClaims(opener, settings.payloads_dir)],
            driver_selector=lambda _context, _payload: driver,
            payload_size_threshold=threshold,
        ),
    )
