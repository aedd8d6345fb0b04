"""write / edit, confined to the workspace (read is `read_tool.py`)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

from activities.tools.results import ToolResult
from activities.tools.specs import EditArgs, WriteArgs
from activities.tools.text_files import (
    NotUtf8Text,
    TextStyle,
    decode,
    normalized,
    write_keeping_mode,
)
from activities.tools.workspace import display_path, resolve_in_workspace

MAX_READ_BYTES = 5_000_000


def _read_text(path: Path, shown: str) -> tuple[str, TextStyle]:
    if path.stat().st_size > MAX_READ_BYTES:
        raise ValueError(f"file is larger than {MAX_READ_BYTES} bytes")
    return decode(path.read_bytes(), shown)


def write_file(workspace: str, args: WriteArgs) -> ToolResult:
    if args.path.endswith(("/", "\\")):
        # `resolve` drops the slash: "a.txt/" would write the file a.txt.
        return ToolResult(f"{args.path} names a folder; give a file's path", is_error=True)
    path = resolve_in_workspace(workspace, args.path)
    if path.is_dir():
        return ToolResult(f"{display_path(workspace, path)} is a folder", is_error=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Writing is idempotent, so a retried attempt after a crash repeats it harmlessly.
    write_keeping_mode(path, args.content)
    shown = display_path(workspace, path)
    return ToolResult(f"Wrote {len(args.content)} characters to {shown}", summary=shown)


def content_digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def edit_file(
    workspace: str,
    args: EditArgs,
    applied_digest: str | None = None,
    before_write: Callable[[str], None] | None = None,
) -> ToolResult:
    """`applied_digest`: the digest an earlier attempt of this same call recorded just before
    writing; if the file now has exactly that content, the edit already landed (this matters when
    new_string contains old_string, where the text alone cannot tell). `before_write` receives
    the digest of the content about to be written."""
    path = resolve_in_workspace(workspace, args.path)
    shown = display_path(workspace, path)
    if not path.is_file():
        return ToolResult(f"File not found: {shown}", is_error=True)
    if not args.old_string:
        return ToolResult("old_string must not be empty", is_error=True)
    try:
        text, style = _read_text(path, shown)
    except NotUtf8Text as err:
        return ToolResult(f"Error: {err}", is_error=True, summary="not UTF-8 text")
    old_string, new_string = normalized(args.old_string), normalized(args.new_string)
    if applied_digest is not None and content_digest(text) == applied_digest:
        return ToolResult(f"Edited {shown} (already applied)", summary=shown)
    count = text.count(old_string)
    if count == 0:
        # Not "already applied" because new_string is somewhere in the file: that is often
        # true of an edit that never happened. A retry of one that did is known by its digest.
        return ToolResult(f"old_string not found in {shown}", is_error=True)
    if count > 1:
        return ToolResult(
            f"old_string occurs {count} times in {shown}; include more context so it is unique",
            is_error=True,
        )
    updated = text.replace(old_string, new_string, 1)
    if before_write is not None:
        before_write(content_digest(updated))
    write_keeping_mode(path, style.apply(updated))
    return ToolResult(f"Edited {shown}", summary=shown)
