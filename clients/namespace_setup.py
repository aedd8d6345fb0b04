"""`agentlane setup-namespace`: register the custom search attributes
(agentlane/search_attributes.py) on a Temporal cluster's namespace, through the operator
service, as `temporal operator search-attribute create` does. The dev server registers them at
start (temporal-dev/devserver.py); a cluster needs this once per namespace, before any session
starts: a workflow that sets an attribute the namespace does not know fails its workflow task.

Idempotent: an attribute already there with the same type is left alone. One there with another
type cannot be changed in place (Temporal has no such operation), so it is reported and nothing
is added.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.client import Client

from agentlane import search_attributes as sa

INDEXED_TYPES: dict[sa.AttributeType, IndexedValueType.ValueType] = {
    sa.AttributeType.KEYWORD: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    sa.AttributeType.INT: IndexedValueType.INDEXED_VALUE_TYPE_INT,
    sa.AttributeType.DOUBLE: IndexedValueType.INDEXED_VALUE_TYPE_DOUBLE,
}


class AttributeTypeConflict(Exception):
    """An attribute of ours is registered with another type."""


@dataclass
class SetupReport:
    added: list[str] = field(default_factory=list)
    present: list[str] = field(default_factory=list)


def commands_text(namespace: str, address: str) -> list[str]:
    """The equivalent `temporal` CLI commands, one line each, ready to paste."""
    return [shlex.join(cmd) for cmd in sa.operator_commands(namespace, address)]


async def register(client: Client, namespace: str) -> SetupReport:
    listed = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=namespace)
    )
    existing = dict(listed.custom_attributes)
    report = SetupReport()
    conflicts: list[str] = []
    missing: dict[str, IndexedValueType.ValueType] = {}
    for attr in sa.ALL:
        want = INDEXED_TYPES[attr.type]
        have = existing.get(attr.name)
        if have is None:
            missing[attr.name] = want
        elif have == want:
            report.present.append(attr.name)
        else:
            conflicts.append(
                f"{attr.name} is registered as {_type_name(have)}, agentlane needs "
                f"{attr.type.value}"
            )
    if conflicts:
        raise AttributeTypeConflict(
            f"namespace {namespace}: " + "; ".join(conflicts) + ". A search attribute's type "
            "cannot be changed: remove it (`temporal operator search-attribute remove`) on a "
            "namespace no workflow uses it in, or use another namespace."
        )
    if missing:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(namespace=namespace, search_attributes=missing)
        )
        report.added = list(missing)
    return report


def _type_name(value: IndexedValueType.ValueType) -> str:
    return IndexedValueType.Name(value).removeprefix("INDEXED_VALUE_TYPE_").title()
