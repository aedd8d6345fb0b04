"""The system prompt, built inside the activity so it never enters workflow history."""

from __future__ import annotations

from activities.providers.base import ToolSpec


def build_system_prompt(workspace: str, tools: list[ToolSpec], agent_id: str = "main") -> str:
    tool_lines = "\n".join(f"- {t.name}: {t.description}" for t in tools) or "- (no tools)"
    return (
        f"You are the agent '{agent_id}', working in the workspace folder {workspace}.\n"
        "Use the tools to inspect and change files in the workspace; paths are relative to it "
        "and tools cannot reach outside it. Keep replies short and say what you did.\n\n"
        f"Tools:\n{tool_lines}"
    )
