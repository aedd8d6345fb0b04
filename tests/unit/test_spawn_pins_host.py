"""A spawn in a session not pinned to a host yet makes the default workspace where its first
step runs and names that host (the parent and every child then work there)."""

from __future__ import annotations

from pathlib import Path

from activities.subagent_calls import SubagentActivities
from agentlane.settings import Settings
from agentlane.subagents import SpawnReadInput


def step(create: bool) -> SpawnReadInput:
    return SpawnReadInput(
        session_key="s",
        run_id="session:s:run:1",
        turn_index=0,
        assistant_entry_id="e",
        tool_call_id="c",
        workspace="workspaces/s",
        create_workspace=create,
    )


async def test_the_step_makes_the_workspace_and_names_its_host(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, host_id="h1", workspaces="host")
    acts = SubagentActivities(store=None, publishers=None, settings=settings)  # type: ignore[arg-type]
    assert await acts._workspace_here(step(True)) == "h1"
    assert (tmp_path / "workspaces" / "s").is_dir()
    assert await acts._workspace_here(step(False)) is None


async def test_shared_workspaces_name_no_host(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, host_id="h1", workspaces="shared")
    acts = SubagentActivities(store=None, publishers=None, settings=settings)  # type: ignore[arg-type]
    assert await acts._workspace_here(step(True)) is None
