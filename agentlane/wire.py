"""Marker for contracts that travel in activity inputs and results, and so in every step's
history: their fields equal to the default are left out on the wire.

Only for these short-lived payloads. State carried across continue-as-new is written in full,
because a default changed in a later version must not silently change a running session.
Changing a default of a `CompactModel` changes what in-flight activity calls see on a retry.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, SerializerFunctionWrapHandler, model_serializer, model_validator

from agentlane.ids import assistant_entry_id, chain_of_entry_id, session_key_from_workflow_id


class CompactModel(BaseModel):
    pass


class TraceCarrier(CompactModel):
    """An activity input that carries its step's trace context itself when tracing is on
    (workers/trace_carriage.py), where the SDK's plugin would write a header."""

    # The W3C traceparent of the span the activity belongs to (its run's). None when tracing is
    # off, and then absent on the wire.
    traceparent: str | None = None


class RunStepInput(TraceCarrier):
    """An activity input about one step of a run. The session key and the assistant entry id
    are spelled out in memory, but on the wire they are left out (the session key is part of
    the run id) or shortened to the chain token, since the input of every step lands in the
    run's history. Inputs written in full (by earlier versions) read the same."""

    session_key: str
    run_id: str
    turn_index: int
    assistant_entry_id: str

    @model_validator(mode="before")
    @classmethod
    def _expand(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not isinstance(data.get("run_id"), str):
            return data
        data = dict(data)
        run_id: str = data["run_id"]
        if not data.get("session_key") and run_id.startswith("session:"):
            data["session_key"] = session_key_from_workflow_id(run_id)
        chain = data.pop("chain", None)
        if isinstance(chain, str) and not data.get("assistant_entry_id"):
            data["assistant_entry_id"] = assistant_entry_id(
                run_id, chain, int(data.get("turn_index", 0))
            )
        return data

    @model_serializer(mode="wrap")
    def _compact(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if not isinstance(data, dict):
            return data
        if (
            self.run_id.startswith("session:")
            and session_key_from_workflow_id(self.run_id) == self.session_key
        ):
            data.pop("session_key", None)
        chain = chain_of_entry_id(self.assistant_entry_id, self.run_id, self.turn_index)
        if chain is not None and "assistant_entry_id" in data:
            del data["assistant_entry_id"]
            data["chain"] = chain
        return data
