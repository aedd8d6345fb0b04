"""The project's data converter: compact JSON, lossless for the contracts."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
    StorageDriverWorkflowInfo,
)

from agentlane.data_converter import LocalFileStorageDriver, make_data_converter
from agentlane.events import AgentEvent, EventKind
from agentlane.run import ExecutionError, ExecutionErrorKind


def test_no_contract_field_allows_none_with_another_default() -> None:
    """The data converter leaves None fields out of payloads; that is lossless only while every
    optional field defaults to None."""
    import importlib
    import inspect
    import pkgutil
    import typing

    from pydantic import BaseModel

    import agentlane

    offenders = []
    for info in pkgutil.iter_modules(agentlane.__path__):
        module = importlib.import_module(f"agentlane.{info.name}")
        for obj in vars(module).values():
            if not (inspect.isclass(obj) and issubclass(obj, BaseModel)):
                continue
            for name, field in obj.model_fields.items():
                if type(None) in typing.get_args(field.annotation) and (
                    field.is_required() or field.default is not None
                ):
                    offenders.append(f"{obj.__name__}.{name}")
    assert offenders == []


def test_round_trip_drops_nothing(tmp_path: Path) -> None:
    converter = make_data_converter(tmp_path).payload_converter
    event = AgentEvent(
        kind=EventKind.TURN_END,
        event_id="r/turn_end/0",
        session_key="s",
        run_id="r",
        turn_index=0,
        has_tool_calls=False,
        data={"kept": None},
    )
    payload = converter.to_payloads([event])[0]
    assert b"null" not in payload.data.replace(b'"kept":null', b"")
    assert b"tool_call_id" not in payload.data
    assert converter.from_payloads([payload], [AgentEvent])[0] == event
    error = ExecutionError(kind=ExecutionErrorKind.TIMEOUT, message="m")
    back = converter.from_payloads(converter.to_payloads([error]), [ExecutionError])[0]
    assert back == error and back.failure is None


def test_activity_contracts_omit_defaults_and_round_trip(tmp_path: Path) -> None:
    from agentlane.events import Announcement
    from agentlane.model_calls import ModelCallInput
    from agentlane.run import ModelRef

    converter = make_data_converter(tmp_path).payload_converter
    call = ModelCallInput(
        session_key="s",
        run_id="r",
        turn_index=2,
        workspace="/w",
        model=ModelRef(),
        tools=["read"],
        assistant_entry_id="r:t2",
        announce=[Announcement(kind=EventKind.TURN_START, ts=1.5, turn_index=2)],
    )
    call.append_user.clear()
    payload = converter.to_payloads([call])[0]
    for left_out in (b"thinking", b"append_user", b"idle_timeout_seconds", b"reasoning_mode"):
        assert left_out not in payload.data
    assert converter.from_payloads([payload], [ModelCallInput])[0] == call
    event = call.announce[0].to_event("s", "r")
    assert event.event_id == "r/turn_start/2" and event.turn_index == 2


async def test_offloaded_payloads_are_filed_under_their_owner(tmp_path: Path) -> None:
    driver = LocalFileStorageDriver(tmp_path)
    owned = StorageDriverStoreContext(
        target=StorageDriverWorkflowInfo(namespace="default", id="run:a/1", run_id="r-1")
    )
    unowned = StorageDriverStoreContext(target=None)
    payload = Payload(metadata={"encoding": b"json/plain"}, data=b'"x"')
    [claim] = await driver.store(owned, [payload])
    [flat] = await driver.store(unowned, [payload])
    assert claim.claim_data["owner"] == "wf/run%3Aa%2F1/r-1" and "owner" not in flat.claim_data
    [owner] = driver.owners()
    assert (owner.workflow_id, owner.run_id) == ("run:a/1", "r-1")
    retrieve = StorageDriverRetrieveContext()
    assert await driver.retrieve(retrieve, [claim, flat]) == [payload, payload]
    # A claim cannot point outside the payload folder.
    for bad in ("wf/../x", "wf/a/..", "../../etc"):
        forged = StorageDriverClaim(claim_data={**claim.claim_data, "owner": bad})
        with pytest.raises(ValueError):
            await driver.retrieve(retrieve, [forged])
    assert driver.remove_owner(owner) == (1, len(payload.SerializeToString()))
    assert driver.owners() == [] and not (tmp_path / "wf" / "run%3Aa%2F1").exists()
    assert driver.remove_unowned_older_than(0) == (0, 0)
    assert driver.remove_unowned_older_than(1e12)[0] == 1


async def test_converter_copies_share_their_type_adapters(tmp_path: Path) -> None:
    """The SDK copies the data converter for every workflow activation and payload sequence (a
    serialization or storage context), and each copy makes a new payload converter: decoding
    through copies must not build a type's pydantic schema again (about 1 ms for a dataclass,
    such as the workflow streams' publish payload, on every signal)."""
    import dataclasses

    from temporalio.contrib.workflow_streams._types import PublishEntry, PublishInput

    from agentlane.data_converter import _TYPE_ADAPTERS

    converter = make_data_converter(tmp_path)
    sent = PublishInput(items=[PublishEntry(topic="events", data="eA==")], publisher_id="p")
    payloads = converter.payload_converter.to_payloads([sent])
    await dataclasses.replace(converter).decode(payloads, [PublishInput])
    before = _TYPE_ADAPTERS.cache_info()
    for _ in range(3):
        [got] = await dataclasses.replace(converter).decode(payloads, [PublishInput])
        assert got == sent
    after = _TYPE_ADAPTERS.cache_info()
    assert after.misses == before.misses
    assert after.hits == before.hits + 3


def test_converter_copies_share_their_encoding_converters(tmp_path: Path) -> None:
    """Each copy of the data converter makes a new payload converter; the encoding converters
    inside are made once per process (they hold no state), and a copy converts the same."""
    import dataclasses

    from agentlane.events import AgentEvent, EventKind

    converter = make_data_converter(tmp_path)
    copy = dataclasses.replace(converter)
    assert copy.payload_converter is not converter.payload_converter
    inner = [
        c._inner_payload_converter  # type: ignore[attr-defined]
        for c in (converter.payload_converter, copy.payload_converter)
    ]
    assert inner[0] is not inner[1]
    pairs = zip(inner[0].converters.values(), inner[1].converters.values(), strict=True)
    assert all(a is b for a, b in pairs)
    event = AgentEvent(kind=EventKind.AGENT_START, session_key="s", run_id="r", event_id="e")
    payloads = converter.payload_converter.to_payloads([event])
    assert copy.payload_converter.to_payloads([event]) == payloads
    assert copy.payload_converter.from_payloads(payloads, [AgentEvent]) == [event]
