"""The one table of tools: names, aliases (SPEC §13.1), groups, and what runs locally."""

from __future__ import annotations

from activities.tools.specs import TOOL_ARGS, tool_specs
from agentlane.tool_catalog import (
    DEFAULT_TOOLS,
    TOOLS,
    canonical_tool_name,
    group_tools,
    tool_info,
)
from workflows.activity_options import LOCAL_TOOLS


def test_names_are_normalised_and_aliases_resolved() -> None:
    assert canonical_tool_name(" Apply-Patch ") == "apply_patch"
    assert canonical_tool_name("BASH") == "exec"
    assert canonical_tool_name("Read") == "read"
    assert canonical_tool_name("web_fetch") == "web_fetch"  # unknown here: normalised only
    info = tool_info("apply-patch")
    assert info is not None and info.name == "apply_patch" and info.mutating


def test_groups() -> None:
    assert group_tools("fs") == ["read", "write", "edit", "apply_patch"]
    assert group_tools("runtime") == ["exec", "process"]


def test_every_tool_has_a_schema_and_an_activity_name() -> None:
    assert set(TOOL_ARGS) == {t.name for t in TOOLS}
    assert [s.name for s in tool_specs(list(DEFAULT_TOOLS))] == list(DEFAULT_TOOLS)
    assert {"read", "write", "edit", "apply_patch"} == LOCAL_TOOLS
