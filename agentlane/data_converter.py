"""The data converter every role uses: pydantic models as JSON, large payloads offloaded.

Offload uses the SDK's own ExternalStorage with a driver over the store (`store/payload_driver.py`,
the embedded SQLite file or PostgreSQL), so every host that reaches the store reads them;
payloads earlier versions wrote as files under the data folder stay readable there.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter
from pydantic_core import to_json
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter
from temporalio.converter import (
    CompositePayloadConverter,
    DataConverter,
    DefaultPayloadConverter,
    EncodingPayloadConverter,
    ExternalStorage,
    JSONPlainPayloadConverter,
    PayloadCodec,
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
)

from agentlane.failure_converter import QuietEncodedFailureConverter, QuietFailureConverter
from agentlane.ids import storage_name
from agentlane.private_files import write_private
from agentlane.settings import Settings
from agentlane.wire import CompactModel
from store.interface import Store
from store.open import shared_store
from store.payload_driver import StorePayloadDriver, owner_of

# One cache of type adapters for the process. The SDK gives each converter instance its own,
# but it makes a new converter for every workflow activation and payload sequence (each
# `DataConverter` copy with a serialization or storage context builds its payload converter
# afresh), so a per-instance cache was always empty: decoding a dataclass (the workflow
# streams' publish and poll payloads) built its pydantic schema every time, about 1 ms each.
_TYPE_ADAPTERS: functools._lru_cache_wrapper[TypeAdapter[Any]] = functools.lru_cache(maxsize=1024)(
    TypeAdapter
)


class _CompactJSONConverter(PydanticJSONPlainPayloadConverter):
    """Leaves out model fields whose value is None, and, for activity contracts
    (`CompactModel`), every field equal to its default.

    Every optional field of the contracts defaults to None (a unit test checks it), so nothing
    changes on the way back, and each event and activity input in history gets much smaller.
    """

    def __init__(self) -> None:
        super().__init__(max_cached_type_adapters=0)
        self._type_adapter = _TYPE_ADAPTERS

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._type_adapter = _TYPE_ADAPTERS

    def to_payload(self, value: Any) -> Payload | None:
        if isinstance(value, CompactModel):
            data = value.__pydantic_serializer__.to_json(value, exclude_defaults=True)
        else:
            data = to_json(value, exclude_none=True)
        return Payload(metadata={"encoding": self.encoding.encode()}, data=data)


@functools.cache
def _encoding_converters() -> tuple[EncodingPayloadConverter, ...]:
    compact = _CompactJSONConverter()
    return tuple(
        compact if isinstance(c, JSONPlainPayloadConverter) else c
        for c in DefaultPayloadConverter.default_encoding_payload_converters
    )


class CompactPydanticPayloadConverter(CompositePayloadConverter):
    """The SDK's pydantic converter with `_CompactJSONConverter` for JSON.

    Its encoding converters are made once per process and shared: they hold no state of their
    own, and the SDK makes a new instance of this class for every copy of the data converter
    (every workflow activation, payload sequence and activity task)."""

    def __init__(self) -> None:
        super().__init__(*_encoding_converters())


# The folder of payloads owned by workflows: `wf/<workflow id>/<run id or "any">/`.
OWNED = "wf"
ANY_RUN = "any"
OWNER_FILE = ".owner"


@dataclass(frozen=True)
class PayloadOwner:
    """The workflow whose history references a folder of offloaded payloads (the SDK names it
    in the store context: the workflow itself, the child or signalled workflow a command
    targets, or the parent that receives a child's result). `run_id` None: any run of the id
    (a child's input, stored before the child has a run id)."""

    folder: Path
    workflow_id: str
    run_id: str | None


class LocalFileStorageDriver(StorageDriver):
    """Stores each payload once per owner, named by the SHA-256 of its bytes (so retries are
    free), under its owner's folder, so it can be removed once its owner can no longer read it
    (`agentlane/payload_gc.py`). Payloads without a workflow owner (a client's own inputs) go
    to the flat layout earlier versions used for everything, removed after the retention."""

    def __init__(self, root: Path) -> None:
        self._root = root

    def name(self) -> str:
        return "local-file"

    def _path(self, digest: str, owner: str | None = None) -> Path:
        if owner is None:
            return self._root / digest[:2] / digest
        return self._root / owner / digest

    @staticmethod
    def _owner_of(context: StorageDriverStoreContext) -> tuple[str, str, str | None] | None:
        owner = owner_of(context)
        if owner is None:
            return None
        run = storage_name(owner.run_id or ANY_RUN)
        folder = f"{OWNED}/{storage_name(owner.workflow_id)}/{run}"
        if not _OWNER_CLAIM.fullmatch(folder):
            return None  # e.g. a workflow id "..": kept in the flat layout
        return folder, owner.workflow_id, owner.run_id

    def _write(self, data: bytes, owner: tuple[str, str, str | None] | None) -> dict[str, str]:
        digest = hashlib.sha256(data).hexdigest()
        folder = owner[0] if owner else None
        path = self._path(digest, folder)
        if not path.exists():
            if owner is not None and not (path.parent / OWNER_FILE).exists():
                record = {"workflow_id": owner[1], "run_id": owner[2]}
                write_private(path.parent / OWNER_FILE, json.dumps(record).encode())
            write_private(path, data)  # payloads hold messages and tool output: 0600
        return {"sha256": digest, **({"owner": folder} if folder else {})}

    def _read(self, claim: Mapping[str, str]) -> bytes:
        digest = claim["sha256"]
        if len(digest) != 64 or not all(c in "0123456789abcdef" for c in digest):
            raise ValueError(f"malformed payload claim {digest!r}")
        owner = claim.get("owner")
        if owner is not None and not _OWNER_CLAIM.fullmatch(owner):
            raise ValueError(f"malformed payload claim owner {owner!r}")
        return self._path(digest, owner).read_bytes()

    async def store(
        self, context: StorageDriverStoreContext, payloads: Sequence[Payload]
    ) -> list[StorageDriverClaim]:
        owner = self._owner_of(context)
        claims = []
        for payload in payloads:
            data = await asyncio.to_thread(self._write, payload.SerializeToString(), owner)
            claims.append(StorageDriverClaim(claim_data=data))
        return claims

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        out = []
        for claim in claims:
            data = await asyncio.to_thread(self._read, claim.claim_data)
            payload = Payload()
            payload.ParseFromString(data)
            out.append(payload)
        return out

    # -- clean-up (agentlane/payload_gc.py decides what) -----------------------------------

    def owners(self) -> list[PayloadOwner]:
        found = []
        for owner_file in sorted(self._root.glob(f"{OWNED}/*/*/{OWNER_FILE}")):
            try:
                record = json.loads(owner_file.read_text())
            except (OSError, ValueError):
                continue
            found.append(PayloadOwner(owner_file.parent, record["workflow_id"], record["run_id"]))
        return found

    @staticmethod
    def remove_owner(owner: PayloadOwner) -> tuple[int, int]:
        """Remove an owner's payloads; (files, bytes) removed."""
        files = size = 0
        for path in owner.folder.iterdir():
            if path.name != OWNER_FILE:
                files += 1
                size += path.stat().st_size
            path.unlink()
        owner.folder.rmdir()
        with contextlib.suppress(OSError):
            owner.folder.parent.rmdir()  # the workflow id's folder, once it holds no run
        return files, size

    def remove_unowned_older_than(self, cutoff: float) -> tuple[int, int]:
        """Remove payloads of the flat layout last written before `cutoff` (epoch seconds)."""
        files = size = 0
        for path in self._root.glob("??/*"):
            stat = path.stat()
            if stat.st_mtime < cutoff:
                files += 1
                size += stat.st_size
                path.unlink()
        return files, size


_OWNER_CLAIM = re.compile(rf"{OWNED}/(?!\.\.?/)[A-Za-z0-9.@%-]+/(?!\.\.?$)[A-Za-z0-9.@%-]+")


def make_data_converter(
    place: Settings | Path, threshold: int = 128 * 1024, codec: PayloadCodec | None = None
) -> DataConverter:
    """`place`: the settings (or a data dir) that say where the store is. Offloaded payloads go
    to the store (`store/payload_driver.py`), owned by their workflow and collected
    (`agentlane/payload_gc.py`), so every host that reaches the store reads what any host
    offloaded; files offloaded by earlier versions stay readable where they are. `codec`:
    payload encryption (`agentlane/encryption.py`), applied before offloading, so offloaded
    payloads are encrypted too."""
    settings = place if isinstance(place, Settings) else Settings(data_dir=place)
    files = LocalFileStorageDriver(settings.payloads_dir)

    async def opener() -> Store:
        # Opened on the first offload or retrieval, shared with the process's other users.
        return await shared_store(settings)

    shared = StorePayloadDriver(opener)
    storage = ExternalStorage(
        drivers=[shared, files],
        driver_selector=lambda _context, _payload: shared,
        payload_size_threshold=threshold,
    )
    return DataConverter(
        payload_converter_class=CompactPydanticPayloadConverter,
        # Encrypted histories encrypt failure messages too (a run's error can quote the user).
        failure_converter_class=(
            QuietFailureConverter if codec is None else QuietEncodedFailureConverter
        ),
        payload_codec=codec,
        external_storage=storage,
    )
