"""The progress record: what a run has done, kept as data next to every summary so no summariser
can lose it (issue 10; SPEC §11.3 step 2, §19 #5224 and #57410).

A summary written by a model can drop the task, forget which files changed or invent that a
failed command succeeded. The record is built from the transcript itself:

* the task as the user first gave it, and the latest user instruction;
* files read (`read`) and modified (`write`, `edit`), from the `path` argument of calls whose
  result came back without an error, most recent last;
* commands run (`exec`'s `command`), most recent last;
* tool failures: error results, deduplicated by call id, the 8 most recent kept at ≤ 240
  characters each with `status=` / `exitCode=` where known, and a count of all of them;
* open tool calls: calls with no result yet (not those of turns that ended in error, abort or
  idle timeout, which will never get one).

`update_progress_record` folds new entries into an older record: entries up to the record's last
entry are skipped, so folding the same entries twice changes nothing. `render_progress_record`
gives the sections appended to a compaction summary (`safeguard_summary.assemble_summary`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final

from pydantic import BaseModel, ConfigDict

from activities.context.safeguard_summary import format_file_lists
from activities.context.transcript_repair import NO_SYNTHESIS_STOP_REASONS
from agentlane.transcript import Role, ToolCall, TranscriptEntry

READ_TOOLS: Final = frozenset({"read"})
WRITE_TOOLS: Final = frozenset({"write", "edit"})
EXEC_TOOLS: Final = frozenset({"exec"})
MAX_TOOL_FAILURES: Final = 8
MAX_TOOL_FAILURE_CHARS: Final = 240
MAX_USER_TEXT_CHARS: Final = 2_000
MAX_FILES: Final = 200
MAX_COMMANDS: Final = 10
MAX_COMMAND_CHARS: Final = 200
MAX_OPEN_CALLS: Final = 20
_EXIT_CODE_TEXT: Final = re.compile(r"^\s*exit code (-?\d+)")
_TRUNCATED_USER_TEXT: Final = " …[truncated]"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolFailure(_Frozen):
    call_id: str
    tool_name: str
    summary: str
    meta: str = ""  # "status=… exitCode=…"


class OpenToolCall(_Frozen):
    call_id: str
    tool_name: str
    path: str | None = None
    command: str | None = None


class ProgressRecord(_Frozen):
    task: str = ""
    last_user_instruction: str = ""
    files_read: tuple[str, ...] = ()
    files_modified: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    tool_failures: tuple[ToolFailure, ...] = ()
    tool_failures_total: int = 0
    open_tool_calls: tuple[OpenToolCall, ...] = ()
    last_entry_id: str | None = None


def _clip_user_text(text: str) -> str:
    text = text.strip()
    if len(text) <= MAX_USER_TEXT_CHARS:
        return text
    return text[: MAX_USER_TEXT_CHARS - len(_TRUNCATED_USER_TEXT)] + _TRUNCATED_USER_TEXT


def _string_arg(arguments: dict[str, Any], key: str) -> str | None:
    value = arguments.get(key)
    if not isinstance(value, str) or not value.strip():
        return None
    return value.strip()


def _open_call(call: ToolCall) -> OpenToolCall:
    command = _string_arg(call.arguments, "command")
    if command is not None:
        command = command.splitlines()[0][:MAX_COMMAND_CHARS]
    return OpenToolCall(
        call_id=call.id,
        tool_name=call.name,
        path=_string_arg(call.arguments, "path"),
        command=command,
    )


def _touch(items: list[str], item: str, limit: int) -> None:
    """Move `item` to the most recent end, dropping the oldest beyond `limit`."""
    if item in items:
        items.remove(item)
    items.append(item)
    del items[:-limit]


def _failure_meta(entry: TranscriptEntry) -> str:
    parts: list[str] = []
    status = entry.meta.get("status")
    if isinstance(status, str) and status.strip():
        parts.append(f"status={status.strip()}")
    exit_code = entry.meta.get("exit_code", entry.meta.get("exitCode"))
    if not isinstance(exit_code, int) or isinstance(exit_code, bool):
        match = _EXIT_CODE_TEXT.match(entry.text)
        exit_code = int(match.group(1)) if match else None
    if exit_code is not None:
        parts.append(f"exitCode={exit_code}")
    return " ".join(parts)


def _failure(entry: TranscriptEntry, call: OpenToolCall | None) -> ToolFailure:
    meta = _failure_meta(entry)
    text = " ".join(entry.text.split())
    summary = text or ("failed" if meta else "failed (no output)")
    if len(summary) > MAX_TOOL_FAILURE_CHARS:
        summary = summary[: MAX_TOOL_FAILURE_CHARS - 3] + "..."
    name = (entry.tool_name or "").strip() or (call.tool_name if call else "") or "tool"
    return ToolFailure(
        call_id=entry.tool_call_id or entry.id, tool_name=name, summary=summary, meta=meta
    )


def _new_entries(
    record: ProgressRecord, entries: Sequence[TranscriptEntry]
) -> Sequence[TranscriptEntry]:
    if record.last_entry_id is None:
        return entries
    for index in range(len(entries) - 1, -1, -1):
        if entries[index].id == record.last_entry_id:
            return entries[index + 1 :]
    return entries


def update_progress_record(
    record: ProgressRecord | None, entries: Sequence[TranscriptEntry]
) -> ProgressRecord:
    """`record` (or an empty one) with `entries` folded in, in order."""
    base = record or ProgressRecord()
    new = _new_entries(base, entries)
    if not new:
        return base
    task, last = base.task, base.last_user_instruction
    read, modified, commands = list(base.files_read), list(base.files_modified), list(base.commands)
    failures = list(base.tool_failures)
    failure_ids = {f.call_id for f in failures}
    total = base.tool_failures_total
    open_calls = {c.call_id: c for c in base.open_tool_calls}
    for entry in new:
        if entry.role == Role.USER and entry.text.strip():
            task = task or _clip_user_text(entry.text)
            last = _clip_user_text(entry.text)
        elif entry.role == Role.ASSISTANT and entry.stop_reason not in NO_SYNTHESIS_STOP_REASONS:
            for tool_call in entry.tool_calls:
                open_calls[tool_call.id] = _open_call(tool_call)
        elif entry.role == Role.TOOL:
            call = open_calls.pop(entry.tool_call_id or "", None)
            if entry.is_error:
                failure = _failure(entry, call)
                if failure.call_id not in failure_ids:
                    failure_ids.add(failure.call_id)
                    failures.append(failure)
                    total += 1
            elif call is not None and call.path is not None:
                if call.tool_name in READ_TOOLS:
                    _touch(read, call.path, MAX_FILES)
                elif call.tool_name in WRITE_TOOLS:
                    _touch(modified, call.path, MAX_FILES)
            if call is not None and call.tool_name in EXEC_TOOLS and call.command:
                _touch(commands, call.command, MAX_COMMANDS)
    return ProgressRecord(
        task=task,
        last_user_instruction=last,
        files_read=tuple(read),
        files_modified=tuple(modified),
        commands=tuple(commands),
        tool_failures=tuple(failures[-MAX_TOOL_FAILURES:]),
        tool_failures_total=total,
        open_tool_calls=tuple(list(open_calls.values())[-MAX_OPEN_CALLS:]),
        last_entry_id=new[-1].id,
    )


# -- rendering -------------------------------------------------------------------------------


def format_tool_failures(record: ProgressRecord) -> str:
    """§11.3's "## Tool Failures" section: up to 8, then "...and N more"."""
    if not record.tool_failures:
        return ""
    lines = [
        f"- {f.tool_name}{f' ({f.meta})' if f.meta else ''}: {f.summary}"
        for f in record.tool_failures[:MAX_TOOL_FAILURES]
    ]
    hidden = record.tool_failures_total - len(lines)
    if hidden > 0:
        lines.append(f"- ...and {hidden} more")
    return "\n\n## Tool Failures\n" + "\n".join(lines)


def render_file_lists(record: ProgressRecord) -> str:
    """Files read but not modified, and files modified, most recent first (under the length
    caps the newest matter most)."""
    modified = list(reversed(record.files_modified))
    changed = set(modified)
    read = [path for path in reversed(record.files_read) if path not in changed]
    return format_file_lists(read, modified)


def render_progress_record(record: ProgressRecord) -> str:
    """The record as summary sections (empty when there is nothing to say)."""
    parts: list[str] = []
    if record.task:
        parts.append(f"## Task as first given\n{record.task}")
    if record.last_user_instruction and record.last_user_instruction != record.task:
        parts.append(f"## Latest user instruction\n{record.last_user_instruction}")
    if record.open_tool_calls:
        lines = []
        for call in record.open_tool_calls:
            detail = call.command or call.path
            lines.append(f"- {call.tool_name} ({call.call_id})" + (f": {detail}" if detail else ""))
        parts.append("## Open tool calls\n" + "\n".join(lines))
    if record.commands:
        recent = "\n".join(f"- {command}" for command in reversed(record.commands))
        parts.append(f"## Recent commands\n{recent}")
    text = "".join(f"\n\n{part}" for part in parts)
    return text + format_tool_failures(record) + render_file_lists(record)
