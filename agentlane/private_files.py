"""Files the project writes are readable by its user only (0600 files, 0700 folders): they hold
conversations, tool output and settings. Created with the mode rather than chmod-ed after, so
there is no moment at which another user could open them."""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path
from typing import IO, Any

FILE_MODE = 0o600
DIR_MODE = 0o700


def make_private_dir(path: Path) -> None:
    """`path` and the folders above it that do not exist yet, each 0700 (`mkdir -p` would
    make those above with the default mode: `sessions/` readable by all lists session keys)."""
    missing = []
    for folder in (path, *path.parents):
        if folder.is_dir():
            break
        missing.append(folder)
    for folder in reversed(missing):
        folder.mkdir(mode=DIR_MODE, exist_ok=True)


def private_open(path: Path, mode: str) -> IO[Any]:
    """`open(path, mode)` for append or write modes, creating the file 0600."""
    flags = os.O_CREAT | (os.O_APPEND if "a" in mode else os.O_TRUNC if "w" in mode else 0)
    flags |= os.O_RDWR if "+" in mode else os.O_WRONLY
    fd = os.open(path, flags, FILE_MODE)
    return os.fdopen(fd, mode)


def write_private(path: Path, data: bytes) -> None:
    """Write a whole file atomically (temporary file, then rename), 0600."""
    make_private_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with private_open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        # A full disk: nothing half-written left behind.
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
