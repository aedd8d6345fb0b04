"""Which trace headers move into an activity's input (workers/trace_carriage.py); the move and
the spans it keeps whole are checked end to end in tests/e2e/test_telemetry.py."""

from __future__ import annotations

import temporalio.converter
from temporalio.api.common.v1 import Payload

from agentlane.context_ops import CompactionInput
from agentlane.data_converter import CompactPydanticPayloadConverter
from agentlane.model_calls import ModelCallInput
from agentlane.run import ModelRef
from workers.trace_carriage import carried_traceparent

PARENT = "00-4e3c0007782b14225f6e296a37642a4f-ea0b51cb0aa96d30-01"


def header(carrier: object) -> Payload:
    return temporalio.converter.PayloadConverter.default.to_payloads([carrier])[0]


def call(**fields: object) -> ModelCallInput:
    return ModelCallInput(
        session_key="k",
        run_id="session:k:run:1",
        turn_index=0,
        assistant_entry_id="a",
        model=ModelRef(provider="offline", model="planner"),
        **fields,  # type: ignore[arg-type]
    )


def test_a_lone_traceparent_moves_into_a_step_input() -> None:
    assert carried_traceparent(call(), header({"traceparent": PARENT})) == PARENT
    compaction = CompactionInput(
        session_key="k", run_id="r", entry_id="e", model=ModelRef(provider="o", model="m")
    )
    assert carried_traceparent(compaction, header({"traceparent": PARENT})) == PARENT


def test_anything_else_keeps_its_header() -> None:
    # Baggage or a tracestate would be lost in the input: the header stays.
    assert carried_traceparent(call(), header({"traceparent": PARENT, "baggage": "a=b"})) is None
    assert carried_traceparent(call(), header({"traceparent": PARENT, "tracestate": "x"})) is None
    # An input that cannot hold it, or holds one already, or no header at all.
    assert carried_traceparent({"run_id": "r"}, header({"traceparent": PARENT})) is None
    assert carried_traceparent(call(traceparent=PARENT), header({"traceparent": PARENT})) is None
    assert carried_traceparent(call(), None) is None


def test_the_input_carries_it_only_when_set() -> None:
    converter = CompactPydanticPayloadConverter()
    assert b"traceparent" not in converter.to_payloads([call()])[0].data
    assert PARENT.encode() in converter.to_payloads([call(traceparent=PARENT)])[0].data
