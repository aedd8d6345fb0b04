"""The Temporal side of the search attributes (issue 12): read what the workflow carries now and
upsert what `workflows/policy/search_attributes.py` says changed.

Every new upsert changes what existing workflow code does (a command, so a history event):
callers check `SEARCH_ATTRIBUTES_PATCH` once per workflow run so recorded histories replay.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributeUpdate

with workflow.unsafe.imports_passed_through():
    from agentlane.search_attribute_values import KEYS, Value, Values, read

SEARCH_ATTRIBUTES_PATCH = "search-attributes"


def current() -> Values:
    """The values this workflow carries now: set at its start, or by its last upserts (the SDK
    updates `info().typed_search_attributes` on each)."""
    return read(workflow.info().typed_search_attributes)


def upsert(changed: Mapping[str, Value | None]) -> None:
    """One upsert (one history event) for all the changes; nothing when there are none."""
    updates: list[SearchAttributeUpdate[Any]] = [
        KEYS[name].value_unset() if value is None else KEYS[name].value_set(value)
        for name, value in changed.items()
    ]
    if updates:
        workflow.upsert_search_attributes(updates)


class CarriedAttributes:
    """What this workflow run carries, read from its info once and then kept as it upserts:
    the SDK keeps them in a list, scanned per key at every read, and a run compares them before
    every model call."""

    def __init__(self) -> None:
        self._values: Values | None = None

    def upsert_changes(self, changed: Mapping[str, Value | None]) -> None:
        upsert(changed)
        self.values().update(changed)

    def values(self) -> Values:
        if self._values is None:
            self._values = current()
        return self._values
