"""read: a workspace file as the model can use it.

* Text is paged: `offset` (0-based first line) and `limit` (lines), and never more than
  `PAGE_BYTES` (50 KB) in one page; a page that stops before the end says how to ask for the next
  one. A single line longer than a page is cut (the note says so and names `exec` for the rest).
* An image (PNG, JPEG, GIF, WebP) up to `MAX_IMAGE_BYTES` comes back as a short text plus the
  image itself, which the provider's request builder sends as an image block to a model that
  sees images (and replaces with a clear note for one that does not).
* Any other binary file is reported as binary, with its size and type, never as bytes.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from activities.tools.file_kinds import FileKind, sniff
from activities.tools.results import ToolResult, clip
from activities.tools.specs import ReadArgs
from activities.tools.workspace import display_path, resolve_in_workspace

PAGE_BYTES = 50 * 1024
# Anthropic's limit for one image (OpenAI's is higher): one the model cannot take is not sent.
MAX_IMAGE_BYTES = 5 * 1024 * 1024
_COUNT_CHUNK = 1 << 20


def human_size(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KB ({n} bytes)"
    return f"{n / (1024 * 1024):.1f} MB ({n} bytes)"


def count_lines(path: Path) -> int:
    """Lines as `str.splitlines` would count them for a file ending with or without a newline."""
    count = 0
    last = b""
    with path.open("rb") as f:
        while chunk := f.read(_COUNT_CHUNK):
            count += chunk.count(b"\n")
            last = chunk
    if last and not last.endswith(b"\n"):
        count += 1
    return count


def _lines(f: BinaryIO, cap: int) -> Iterator[tuple[bytes, bool]]:
    """The file's lines, each at most `cap` bytes (whether it was longer): a file that is one
    100 MB line is never held in memory."""
    while raw := f.readline(cap):
        if raw.endswith(b"\n") or len(raw) < cap:
            yield raw, False
            continue
        while (more := f.readline(cap)) and not more.endswith(b"\n"):
            pass
        yield raw, True


def _skip_lines(f: BinaryIO, count: int) -> None:
    """Move past `count` lines, a MiB at a time: newlines are counted in C (a page near the end
    of a 100-million-line file took 28 s line by line, a pool thread all that time)."""
    while count > 0:
        chunk = f.read(_COUNT_CHUNK)
        if not chunk:
            return
        found = chunk.count(b"\n")
        if found < count:
            count -= found
            continue
        at = -1
        for _ in range(count):
            at = chunk.index(b"\n", at + 1)
        f.seek(at + 1 - len(chunk), 1)
        return


def read_page(
    path: Path, offset: int, limit: int, page_bytes: int = PAGE_BYTES
) -> tuple[list[str], bool]:
    """Lines `offset`..`offset+limit` (fewer if the page fills up); whether a line was cut."""
    lines: list[str] = []
    used = 0
    cut = False
    with path.open("rb") as f:
        _skip_lines(f, offset)
        for raw, long in _lines(f, page_bytes):
            if len(lines) >= limit:
                break
            text = raw.rstrip(b"\r\n").decode("utf-8", errors="replace")
            size = len(text.encode("utf-8")) + 1
            if long or used + size > page_bytes:
                if lines:
                    break  # the page is full: this line starts the next page
                # One line longer than a whole page: its start is all a page can hold.
                text = text.encode("utf-8")[: page_bytes - 1].decode("utf-8", errors="ignore")
                cut = True
                lines.append(text)
                break
            lines.append(text)
            used += size
    return lines, cut


def _read_text(path: Path, shown: str, args: ReadArgs) -> ToolResult:
    total = count_lines(path)
    if total == 0:
        return ToolResult(f"{shown} is empty.", summary="empty")
    if args.offset >= total:
        return ToolResult(
            f"offset {args.offset} is past the end of {shown}: it has {total} lines "
            f"(offsets 0 to {total - 1}).",
            is_error=True,
            summary="offset past the end",
        )
    lines, cut = read_page(path, args.offset, args.limit)
    end = args.offset + len(lines)
    text = "\n".join(lines)
    notes: list[str] = []
    if cut:
        notes.append(
            f"line {args.offset} is longer than {PAGE_BYTES // 1024} KB and was cut; use exec "
            f"(for example `cut -c` or `head -c`) to see the rest of it"
        )
    if end < total:
        notes.append(
            f"lines {args.offset}-{end - 1} of {total} shown ({total - end} more); "
            f"call read with offset={end} for the next page"
        )
    if notes:
        text += "\n… [" + "; ".join(notes) + "]"
    return ToolResult(text, summary=f"{total} lines" if end >= total else f"lines to {end}")


def _read_image(path: Path, shown: str, kind: FileKind, size: int) -> ToolResult:
    dims = f", {kind.width}x{kind.height}" if kind.width and kind.height else ""
    head = f"Image file {shown} ({kind.label}{dims}, {human_size(size)})."
    if size > MAX_IMAGE_BYTES:
        return ToolResult(
            f"{head} It is larger than {MAX_IMAGE_BYTES // (1024 * 1024)} MB, the most a model "
            "takes in one image, so it is not shown; make a smaller copy with exec first.",
            summary=f"image too large ({size} bytes)",
        )
    image = {
        "media_type": kind.media_type,
        "data": base64.b64encode(path.read_bytes()).decode("ascii"),
        "path": shown,
        "bytes": size,
    }
    return ToolResult(head, summary=f"{kind.label} image", images=(image,))


# A folder read by mistake is listed, up to this many entries (a `node_modules` or a mail spool
# holds millions: listed whole, one call put 12 MB in the transcript).
MAX_LISTED_ENTRIES = 1000
# Past this the rest is not even counted.
MAX_COUNTED_ENTRIES = 100_000


def _list_folder(path: Path, shown: str) -> ToolResult:
    names: list[str] = []
    more = 0
    with os.scandir(path) as entries:
        for entry in entries:
            if len(names) < MAX_LISTED_ENTRIES:
                try:
                    folder = entry.is_dir()
                except OSError:
                    folder = False
                names.append(entry.name + ("/" if folder else ""))
            elif len(names) + more < MAX_COUNTED_ENTRIES:
                more += 1
            else:
                more = -1
                break
    names.sort()
    counted = f"{more} more entries" if more > 0 else f"more than {MAX_COUNTED_ENTRIES} entries"
    rest = (
        f"\n… and {counted} (the first {MAX_LISTED_ENTRIES} found are listed); use exec with "
        "`ls` or `find` to look for what you need"
        if more
        else ""
    )
    text = f"{shown} is a folder containing:\n" + "\n".join(names) + rest
    return ToolResult(clip(text), is_error=True, summary="a folder")


def read_file(workspace: str, args: ReadArgs) -> ToolResult:
    path = resolve_in_workspace(workspace, args.path)
    shown = display_path(workspace, path)
    if not path.exists():
        return ToolResult(f"File not found: {shown}", is_error=True, summary="not found")
    if path.is_dir():
        return _list_folder(path, shown)
    if not path.is_file():
        return ToolResult(f"{shown} is not a regular file", is_error=True, summary="not a file")
    size = path.stat().st_size
    kind = sniff(path)
    if kind.kind == "image":
        return _read_image(path, shown, kind, size)
    if kind.kind == "binary":
        return ToolResult(
            f"{shown} is a binary file ({kind.label}, {human_size(size)}); its bytes are not "
            "shown. Use exec with a tool that understands the format to look inside.",
            summary=f"binary, {size} bytes",
        )
    return _read_text(path, shown, args)
