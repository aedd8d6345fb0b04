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


class ApplyPatchArgs(_Args):
    input: str = Field(
        description="The whole patch, from '*** Begin Patch' to '*** End Patch'",
    )


class ProcessArgs(_Args):
    action: Literal["start", "poll", "write", "kill", "list"] = Field(
        description="start a command in the background; poll its output and exit; write to its "
        "stdin; kill it; list this session's processes"
    )
    command: str | None = Field(default=None, description="start: the shell command (bash)")
    id: str | None = Field(default=None, description="poll / write / kill: the process id")
    input: str | None = Field(default=None, description="write: text for the process's stdin")
    close_stdin: bool = Field(default=False, description="write: close stdin after writing")
    wait_seconds: float = Field(
        default=0,
        ge=0,
        le=60,
        description="poll: wait up to this long for the process to exit or print more",
    )


TOOL_ARGS: dict[str, type[_Args]] = {
    "read": ReadArgs,
    "write": WriteArgs,
    "edit": EditArgs,
    "apply_patch": ApplyPatchArgs,
    "exec": ExecArgs,
    "process": ProcessArgs,
}

TOOL_DESCRIPTIONS = {
    "read": "Read a file from the workspace. Text comes in pages of lines (offset/limit, at most "
    "50 KB a page; the result says how to get the next page); images (PNG, JPEG, GIF, WebP) "
    "are shown to models that see images; other binary files are described, not dumped.",
    "apply_patch": "Change several files at once with a patch: '*** Begin Patch', then for each "
    "file '*** Add File: path' (lines starting with '+'), '*** Update File: path' (optional "
    "'*** Move to: path', then hunks: '@@' optionally followed by a line to find, and lines "
    "starting with ' ' (context), '-' (remove) or '+' (add); context must match exactly) or "
    "'*** Delete File: path', then '*** End Patch'. All files change or none.",
    "process": "Background commands that outlive this call: start one (returns its id), poll "
    "its new output and exit code, write to its stdin, kill it, or list them. At most 8 run "
    "at once per session.",
    "write": "Create or overwrite a file in the workspace with the given content.",
    "edit": "Replace one exact occurrence of old_string with new_string in a workspace file.",
    "exec": "Run a shell command in the workspace and return its exit code and output.",
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


def tool_specs(names: list[str]) -> list[ToolSpec]:
    return [tool_spec(n) for n in names if n in TOOL_ARGS]


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
