"""Step inputs are small on the wire (they land in every step's history) and read back whole."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from activities.tools.specs import tool_spec
from agentlane.data_converter import CompactPydanticPayloadConverter
from agentlane.events import EventKind, turn_boundary
from agentlane.ids import assistant_entry_id, chain_of_entry_id
from agentlane.model_calls import ModelCallInput, ModelCallResult
from agentlane.run import ModelRef
from agentlane.tool_calls import ToolCallInput, ToolCallOutcome

CONVERTER = CompactPydanticPayloadConverter()


def wire(value: object) -> bytes:
    return CONVERTER.to_payloads([value])[0].data


def back(data: bytes, kind: type) -> object:
    payload = CONVERTER.to_payloads([None])[0]
    payload.data = data
    payload.metadata["encoding"] = b"json/plain"
    return CONVERTER.from_payloads([payload], [kind])[0]


def model_input(**overrides: object) -> ModelCallInput:
    fields: dict[str, object] = dict(
        session_key="slack:C1:t9",
        run_id="session:slack:C1:t9:run:4",
        turn_index=3,
        workspace="",
        model=ModelRef(),
        assistant_entry_id=assistant_entry_id("session:slack:C1:t9:run:4", "0a1b2c3d4e", 3),
    )
    fields.update(overrides)
    return ModelCallInput.model_validate(fields)


def test_session_key_and_entry_id_are_left_out_and_restored() -> None:
    inp = model_input(close_turn=True, open_turn=True)
    data = wire(inp)
    assert b"session_key" not in data and b"assistant_entry_id" not in data
    assert b'"chain":"0a1b2c3d4e"' in data
    assert back(data, ModelCallInput) == inp


def test_ids_that_cannot_be_derived_are_spelled_out() -> None:
    inp = model_input(session_key="other", assistant_entry_id="custom-id")
    data = wire(inp)
    assert b'"session_key":"other"' in data and b'"assistant_entry_id":"custom-id"' in data
    assert back(data, ModelCallInput) == inp


def test_a_key_containing_run_marker_is_kept() -> None:
    # "a:run:b" is a valid session key; splitting its run id at ":run:" gives "a", so the key
    # must travel in full.
    inp = model_input(session_key="a:run:b", run_id="session:a:run:b:run:1", assistant_entry_id="x")
    assert back(wire(inp), ModelCallInput) == inp
    assert b'"session_key":"a:run:b"' in wire(inp)


def test_inputs_written_in_full_by_earlier_versions_still_read() -> None:
    full = (
        b'{"session_key":"k","run_id":"session:k:run:1","turn_index":0,"workspace":"/w",'
        b'"model":{},"tools":["read"],"assistant_entry_id":"session:k:run:1.abc:t0",'
        b'"announce":[{"kind":"turn_start","ts":1.5,"turn_index":0}]}'
    )
    inp = back(full, ModelCallInput)
    assert isinstance(inp, ModelCallInput)
    assert inp.assistant_entry_id == "session:k:run:1.abc:t0" and inp.session_key == "k"
    assert inp.announce[0].ts == 1.5
    tool = back(
        b'{"session_key":"k","run_id":"session:k:run:1","turn_index":0,"workspace":"/w",'
        b'"assistant_entry_id":"e","tool_call_id":"c","tool_name":"read"}',
        ToolCallInput,
    )
    assert isinstance(tool, ToolCallInput) and tool.assistant_entry_id == "e"
    old_result = back(b'{"entry_id":"e","stop_reason":"end_turn"}', ModelCallResult)
    assert isinstance(old_result, ModelCallResult) and old_result.entry_id == "e"
    old_outcome = back(
        b'{"tool_call_id":"c","is_error":true,"summary":"s","duration_ms":3}', ToolCallOutcome
    )
    assert isinstance(old_outcome, ToolCallOutcome) and old_outcome.is_error


def test_a_steady_step_input_carries_only_what_changes() -> None:
    inp = model_input(workspace="", close_turn=True, open_turn=True)
    assert set(json.loads(wire(inp))) == {
        "run_id",
        "turn_index",
        "model",
        "close_turn",
        "open_turn",
        "chain",
    }


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ("session:k:run:1.abc:t2", "abc"),
        ("session:k:run:1.abc:t3", None),
        ("session:k:run:2.abc:t2", None),
        ("session:k:run:1.:t2", None),
    ],
)
def test_chain_of_entry_id(entry: str, expected: str | None) -> None:
    assert chain_of_entry_id(entry, "session:k:run:1", 2) == expected


def test_turn_boundary() -> None:
    events = turn_boundary(4, close_turn=False, open_turn=True)
    assert [(e.kind, e.turn_index, e.has_tool_calls) for e in events] == [
        (EventKind.TURN_END, 3, False),
        (EventKind.TURN_START, 4, None),
    ]
    assert turn_boundary(0, close_turn=None, open_turn=True)[0].kind == EventKind.TURN_START
    assert turn_boundary(2, close_turn=None, open_turn=False) == []
    assert all(e.ts is None for e in events)  # stamped when published


def test_tool_spec_is_a_fresh_copy_each_time() -> None:
    first = tool_spec("write")
    first.parameters["properties"].clear()
    assert tool_spec("write").parameters["properties"]


async def test_later_calls_use_the_workspace_the_first_call_recorded(tmp_path: Path) -> None:
    from temporalio.exceptions import ApplicationError

    from activities.model_call import ModelCallActivity
    from activities.transcript_store import TranscriptStore
    from agentlane.settings import Settings
    from store.open import open_store

    settings = Settings(data_dir=tmp_path)
    holder = SimpleNamespace(store=TranscriptStore(await open_store(settings)), settings=settings)
    ws = tmp_path / "ws"
    ws.mkdir()
    later = model_input(turn_index=1, assistant_entry_id="session:slack:C1:t9:run:4.abc:t1")
    with pytest.raises(ApplicationError, match="no workspace recorded"):
        await ModelCallActivity._workspace(holder, later)  # type: ignore[arg-type]
    first = model_input(
        turn_index=0, workspace=str(ws), assistant_entry_id="session:slack:C1:t9:run:4.abc:t0"
    )
    assert await ModelCallActivity._workspace(holder, first) == str(ws)  # type: ignore[arg-type]
    assert await ModelCallActivity._workspace(holder, later) == str(ws)  # type: ignore[arg-type]
    # A default workspace is named relative to the data dir: this worker's.
    default = model_input(
        turn_index=0, workspace="workspaces/k", assistant_entry_id="session:k:run:1.abc:t0"
    )
    (tmp_path / "workspaces" / "k").mkdir(parents=True)
    made = await ModelCallActivity._workspace(holder, default)  # type: ignore[arg-type]
    assert made == str(tmp_path / "workspaces" / "k")
    later_default = model_input(turn_index=1, assistant_entry_id="session:k:run:1.abc:t1")
    again = await ModelCallActivity._workspace(holder, later_default)  # type: ignore[arg-type]
    assert again == str(tmp_path / "workspaces" / "k")
