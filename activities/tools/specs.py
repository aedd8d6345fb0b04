"""The base tools (pipeline layer 1): argument models and the specs the model sees.

Argument models are the single source of truth: the JSON schema sent to the model is generated
from them and the same models validate what the model sends back.
"""

from __future__ import annotations

import copy
import functools
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from activities.providers.base import ToolSpec


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ReadArgs(_Args):
    path: str = Field(description="File path, relative to the workspace")
    offset: int = Field(default=0, ge=0, description="First line to return (0-based)")
    limit: int = Field(default=2000, ge=1, le=20000, description="Maximum number of lines")


class WriteArgs(_Args):
    path: str = Field(description="File path, relative to the workspace")
    content: str = Field(description="Full new content of the file")


class EditArgs(_Args):
    path: str = Field(description="File path, relative to the workspace")
    old_string: str = Field(description="Exact text to replace; must occur exactly once")
    new_string: str = Field(description="Replacement text")


class ExecArgs(_Args):
    command: str = Field(description="Shell command, run with bash in the workspace")
    timeout: int | None = Field(
        default=None, ge=1, le=3600, description="Seconds before the command is killed"
    )


class SpawnArgs(_Args):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    task: str = Field(min_length=1, description="What the sub-agent should do, in full")
    label: str = Field(default="", description="A short name for the sub-agent's session")
    agent_id: str | None = Field(
        default=None,
        alias="agentId",
        description="The agent to run the task (default: this agent)",
    )


class ApplyPatchArgs(_Args):
    input: str = Field(description="The whole patch")


class ProcessArgs(_Args):
    action: Literal["start", "poll", "write", "kill", "list"]
    command: str | None = Field(default=None, description="start: shell command")
    id: str | None = Field(default=None, description="poll, write, kill: process id")
    input: str | None = Field(default=None, description="write: text for stdin")
    close_stdin: bool = Field(default=False, description="write: then close stdin")
    wait_seconds: float = Field(
        default=0, ge=0, le=60, description="poll: wait this long for output or exit"
    )


TOOL_ARGS: dict[str, type[_Args]] = {
    "read": ReadArgs,
    "write": WriteArgs,
    "edit": EditArgs,
    "apply_patch": ApplyPatchArgs,
    "exec": ExecArgs,
    "sessions_spawn": SpawnArgs,
    "process": ProcessArgs,
}

# Kept short: every request carries them twice (system prompt and tool schemas).
TOOL_DESCRIPTIONS = {
    "read": "Read a workspace file: text in pages (offset/limit; the result says how to get "
    "the next page); images are shown to models that see images; binary files are described.",
    "write": "Create or overwrite a file in the workspace with the given content.",
    "edit": "Replace one exact occurrence of old_string with new_string in a workspace file.",
    "apply_patch": "Apply a patch ('*** Begin Patch' ... '*** End Patch'; Add File, Update File "
    "with @@ hunks, Delete File, Move to). Context must match exactly; all files change or none.",
    "exec": "Run a shell command in the workspace and return its exit code and output.",
    "sessions_spawn": "Hand a task to a sub-agent: it runs in its own session with its own "
    "tools and its final reply is this call's result. Several calls in one turn run at once.",
    "process": "Background commands: start (returns an id), poll (new output, exit code), "
    "write (stdin), kill, list. At most 8 run at once per session.",
}


@functools.cache
def _schema(name: str) -> dict[str, Any]:
    # Built once per process: pydantic's schema generation costs about a millisecond per tool,
    # and every model call asks for the specs.
    schema = TOOL_ARGS[name].model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return schema


def tool_spec(name: str) -> ToolSpec:
    # A copy: provider adapters may rewrite a schema for their wire format.
    schema = copy.deepcopy(_schema(name))
    return ToolSpec(name=name, description=TOOL_DESCRIPTIONS[name], parameters=schema)


@functools.lru_cache(maxsize=64)
def _specs(names: tuple[str, ...]) -> tuple[ToolSpec, ...]:
    return tuple(tool_spec(n) for n in names if n in TOOL_ARGS)


def tool_specs(names: list[str]) -> list[ToolSpec]:
    """The specs a request offers, shared by every request that offers the same tools (every
    model call asks): read them, never change them. The provider adapters copy a schema before
    rewriting it for their wire format (`activities/providers/tool_schemas.py`)."""
    return list(_specs(tuple(names)))


class InvalidToolArguments(Exception):
    pass


A = TypeVar("A", bound=_Args)


def parse_args(model: type[A], arguments: dict[str, object]) -> A:
    try:
        return model.model_validate(arguments)
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}"
            for e in err.errors()
        )
        raise InvalidToolArguments(f"invalid arguments: {problems}") from err
