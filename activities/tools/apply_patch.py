"""apply_patch: several file changes in one call, in the patch format OpenAI's models write.

    *** Begin Patch
    *** Add File: path/new.txt
    +every line of the new file
    *** Update File: path/old.py
    *** Move to: path/renamed.py          (optional)
    @@ def some_function():               (optional: a line to find first)
     context line (space)
    -removed line
    +added line
    *** End of File                       (optional: the hunk ends at the end of the file)
    *** Delete File: path/gone.txt
    *** End Patch

Context and removed lines must match the file exactly (no whitespace or fuzzy matching): a hunk
that does not match fails the whole patch with an error naming the file and the hunk, and no
file is changed. Every path is confined to the workspace like any file tool.

All or nothing: every change is computed in memory first; only then is the plan (each file's new
content, or its deletion) saved beside the transcript and written out. A retried attempt after a
crash finds that plan and finishes it (rolls forward) instead of applying the patch a second
time, so a patch is applied exactly once whatever the attempt it lands in.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from activities.tools.results import ToolResult
from activities.tools.text_files import NotUtf8Text, decode, write_keeping_mode
from activities.tools.workspace import display_path, resolve_in_workspace

BEGIN = "*** Begin Patch"
END = "*** End Patch"
ADD = "*** Add File: "
UPDATE = "*** Update File: "
DELETE = "*** Delete File: "
MOVE = "*** Move to: "
EOF_MARK = "*** End of File"
# The largest file a patch may update (`edit`'s bound, activities/tools/file_tools.py).
MAX_PATCHED_BYTES = 5_000_000


class PatchError(ValueError):
    """The patch is malformed or does not apply; nothing was changed."""


@dataclass
class Hunk:
    context: str | None  # the text after `@@ `, a line to find before the hunk's lines
    old: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    at_end: bool = False


@dataclass
class FileOp:
    kind: str  # "add", "update" or "delete"
    path: str
    move_to: str | None = None
    lines: list[str] = field(default_factory=list)  # add: the new file's lines
    hunks: list[Hunk] = field(default_factory=list)


def parse_patch(text: str) -> list[FileOp]:
    lines = text.strip().splitlines()
    if not lines or lines[0].strip() != BEGIN:
        raise PatchError(f"the patch must start with '{BEGIN}'")
    if lines[-1].strip() != END:
        raise PatchError(f"the patch must end with '{END}'")
    ops: list[FileOp] = []
    body = lines[1:-1]
    i = 0
    while i < len(body):
        line = body[i]
        if line.startswith(ADD):
            op = FileOp("add", _path(line, ADD, i))
            i += 1
            while i < len(body) and not body[i].startswith("*** "):
                if not body[i].startswith("+"):
                    raise PatchError(
                        f"line {i + 2}: every line of an added file starts with '+' "
                        f"(in {op.path}: {body[i]!r})"
                    )
                op.lines.append(body[i][1:])
                i += 1
            ops.append(op)
        elif line.startswith(DELETE):
            ops.append(FileOp("delete", _path(line, DELETE, i)))
            i += 1
        elif line.startswith(UPDATE):
            op = FileOp("update", _path(line, UPDATE, i))
            i += 1
            if i < len(body) and body[i].startswith(MOVE):
                op.move_to = _path(body[i], MOVE, i)
                i += 1
            i = _parse_hunks(body, i, op)
            if not op.hunks and op.move_to is None:
                raise PatchError(f"the update of {op.path} has no hunks")
            ops.append(op)
        elif not line.strip():
            i += 1
        else:
            raise PatchError(
                f"line {i + 2}: expected '{ADD}', '{UPDATE}' or '{DELETE}', got {line!r}"
            )
    if not ops:
        raise PatchError("the patch changes no file")
    return ops


def _path(line: str, prefix: str, index: int) -> str:
    path = line[len(prefix) :].strip()
    if not path:
        raise PatchError(f"line {index + 2}: '{prefix.strip()}' needs a path")
    return path


def _parse_hunks(body: list[str], i: int, op: FileOp) -> int:
    hunk: Hunk | None = None
    while i < len(body):
        line = body[i]
        if line.startswith("@@"):
            hunk = Hunk(context=line[2:].strip() or None)
            op.hunks.append(hunk)
        elif line.strip() == EOF_MARK:
            if hunk is None:
                raise PatchError(f"line {i + 2}: '{EOF_MARK}' outside a hunk of {op.path}")
            hunk.at_end = True
        elif line.startswith("*** "):
            break
        else:
            if hunk is None:  # the first hunk may leave out its `@@`
                hunk = Hunk(context=None)
                op.hunks.append(hunk)
            tag, rest = (line[:1], line[1:]) if line else (" ", "")
            if tag == " ":
                hunk.old.append(rest)
                hunk.new.append(rest)
            elif tag == "-":
                hunk.old.append(rest)
            elif tag == "+":
                hunk.new.append(rest)
            else:
                raise PatchError(
                    f"line {i + 2}: a hunk line starts with ' ', '-' or '+' (in {op.path}: "
                    f"{line!r})"
                )
        i += 1
    return i


def _find(lines: list[str], seq: list[str], start: int) -> int:
    n = len(seq)
    for pos in range(start, len(lines) - n + 1):
        if lines[pos : pos + n] == seq:
            return pos
    return -1


def apply_hunks(text: str, hunks: list[Hunk], shown: str) -> str:
    """The file's new text; `PatchError` naming the file and hunk that did not match."""
    crlf = "\r\n" in text
    if crlf:
        text = text.replace("\r\n", "\n")
    ends_with_newline = text.endswith("\n")
    lines = text.split("\n") if text else []
    if ends_with_newline:
        lines.pop()
    out: list[str] = []
    cursor = 0
    for number, hunk in enumerate(hunks, start=1):
        where = f"hunk {number} of {len(hunks)} in {shown} did not apply"
        if hunk.context is not None:
            found = _find(lines, [hunk.context], cursor)
            if found < 0:
                raise PatchError(f"{where}: the line after '@@' was not found: {hunk.context!r}")
            out.extend(lines[cursor : found + 1])
            cursor = found + 1
        if not hunk.old:
            at = cursor if hunk.context is not None else len(lines)
        elif hunk.at_end:
            at = len(lines) - len(hunk.old)
            if at < cursor or lines[at:] != hunk.old:
                at = -1
        else:
            at = _find(lines, hunk.old, cursor)
        if at < 0:
            expected = "\n".join(hunk.old)
            raise PatchError(
                f"{where}: these lines were not found exactly"
                f"{' at the end of the file' if hunk.at_end else ''}"
                f"{f' after line {cursor}' if cursor else ''}:\n{expected}"
            )
        out.extend(lines[cursor:at])
        out.extend(hunk.new)
        cursor = at + len(hunk.old)
    out.extend(lines[cursor:])
    result = "\n".join(out) + ("\n" if ends_with_newline or not lines else "")
    return result.replace("\n", "\r\n") if crlf else result


@dataclass(frozen=True)
class Change:
    path: str  # absolute, inside the workspace
    content: str | None  # None: delete


def plan_patch(workspace: str, patch: str) -> tuple[list[Change], list[str]]:
    """Every change the patch makes, computed without touching a file, and a line per file for
    the result; `PatchError` (or `PathOutsideWorkspace`) when any part of it cannot apply."""
    ops = parse_patch(patch)
    changes: list[Change] = []
    report: list[str] = []
    touched: set[Path] = set()

    def claim(path: Path, raw: str) -> None:
        if path in touched:
            raise PatchError(f"{raw} appears twice in the patch; make one change per file")
        touched.add(path)

    for op in ops:
        path = resolve_in_workspace(workspace, op.path)
        shown = display_path(workspace, path)
        claim(path, shown)
        if op.kind == "add":
            if path.exists():
                raise PatchError(f"cannot add {shown}: it already exists (use Update File)")
            content = "\n".join(op.lines) + ("\n" if op.lines else "")
            changes.append(Change(str(path), content))
            report.append(f"A {shown}")
            continue
        if not path.is_file():
            raise PatchError(f"cannot {op.kind} {shown}: file not found")
        if op.kind == "delete":
            changes.append(Change(str(path), None))
            report.append(f"D {shown}")
            continue
        size = path.stat().st_size
        if size > MAX_PATCHED_BYTES:
            # As `edit`: the file is read whole and its new content kept until the patch lands.
            raise PatchError(
                f"cannot update {shown}: it is {size} bytes, more than the {MAX_PATCHED_BYTES} "
                "a patch may change; use exec (sed -i, a script) for a file this large"
            )
        text, style = decode(path.read_bytes(), shown)
        updated = style.apply(apply_hunks(text, op.hunks, shown) if op.hunks else text)
        if op.move_to is not None:
            target = resolve_in_workspace(workspace, op.move_to)
            target_shown = display_path(workspace, target)
            claim(target, target_shown)
            if target.exists():
                raise PatchError(f"cannot move {shown} to {target_shown}: it already exists")
            changes.append(Change(str(target), updated))
            changes.append(Change(str(path), None))
            report.append(f"R {shown} -> {target_shown}")
        else:
            changes.append(Change(str(path), updated))
            report.append(f"M {shown}")
    return changes, report


def _write(path: Path, content: str) -> None:
    write_keeping_mode(path, content)


def carry_out(changes: list[Change]) -> None:
    """Write (or delete) each file that is not yet as planned: a second run of the same plan
    does nothing, and a run after a crash half-way finishes the rest."""
    for change in changes:
        path = Path(change.path)
        if change.content is None:
            path.unlink(missing_ok=True)
            continue
        try:
            current = path.read_bytes().decode("utf-8") if path.is_file() else None
        except UnicodeDecodeError:
            current = None
        if current != change.content:
            _write(path, change.content)


def _summary(report: list[str]) -> str:
    return f"{len(report)} file{'s' if len(report) != 1 else ''}"


def apply_patch(
    workspace: str,
    patch: str,
    saved_plan: dict[str, Any] | None = None,
    save_plan: Callable[[dict[str, Any]], None] | None = None,
) -> ToolResult:
    """`saved_plan`: what an earlier attempt of this same call saved before writing (it is
    finished rather than the patch applied again). `save_plan` receives the plan before the
    first file is written."""
    if saved_plan is not None:
        changes = [Change(c["path"], c["content"]) for c in saved_plan["changes"]]
        carry_out(changes)
        report = list(saved_plan["report"])
        return ToolResult(
            "Applied the patch (finished after an interrupted attempt):\n" + "\n".join(report),
            summary=_summary(report),
        )
    try:
        changes, report = plan_patch(workspace, patch)
    except (PatchError, NotUtf8Text) as err:
        return ToolResult(
            f"Patch not applied, no file was changed: {err}",
            is_error=True,
            summary=str(err).splitlines()[0][:120],
        )
    if save_plan is not None:
        save_plan(
            {
                "changes": [{"path": c.path, "content": c.content} for c in changes],
                "report": report,
            }
        )
    carry_out(changes)
    return ToolResult("Applied the patch:\n" + "\n".join(report), summary=_summary(report))


def load_plan(raw: bytes) -> dict[str, Any]:
    plan = json.loads(raw)
    if not isinstance(plan, dict) or not isinstance(plan.get("changes"), list):
        raise ValueError("the saved apply_patch plan is unreadable")
    return plan
