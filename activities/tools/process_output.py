"""A background process's output, bounded: the last `OUTPUT_KEEP_BYTES` of it are kept.

The process writes into a pipe this worker reads (on its event loop, without a thread); what it
reads is appended to the output file beside the process's record. When the file holds twice the
limit, it is cut back to the last `OUTPUT_KEEP_BYTES` (written to a new file that replaces the
old one), so a chatty process that runs for days costs at most 2 MiB of disk, however much it
prints. Offsets are counted in bytes since the process started: a reader that falls behind
the cut learns exactly how many bytes it missed (`Chunk.skipped`).

A pipe rather than the file itself (as `exec` does): a file cannot be cut at its start while
another process appends to it. The pipe also gives back-pressure: a process that prints faster
than the worker writes simply waits.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from agentlane.private_files import private_open, write_private

# What is kept of a process's output: its last MiB (what `poll` returns past it is counted).
OUTPUT_KEEP_BYTES = 1024 * 1024
READ_CHUNK = 64 * 1024


@dataclass(frozen=True)
class Chunk:
    data: bytes
    # Bytes between the offset asked for and `data` that were dropped (beyond the kept tail).
    skipped: int
    # Bytes after `data` that are kept and not yet read.
    rest: int


class BoundedOutput:
    def __init__(self, path: Path, keep: int = OUTPUT_KEEP_BYTES) -> None:
        self.path = path
        self.keep = keep
        # Bytes the process wrote so far, and how many of the first of them were dropped: the
        # file holds bytes [dropped, total).
        self.total = 0
        self.dropped = 0
        self.eof = asyncio.Event()
        self._file = private_open(path, "wb")
        read_fd, write_fd = os.pipe()
        self._read_fd: int | None = read_fd
        # For the spawn; closed here once the process has its copy.
        self.writer: IO[bytes] = os.fdopen(write_fd, "wb", buffering=0)

    def follow(self) -> None:
        """Start reading (call once the process is started: the write end is closed here)."""
        self.writer.close()
        assert self._read_fd is not None
        os.set_blocking(self._read_fd, False)
        asyncio.get_running_loop().add_reader(self._read_fd, self._readable)

    def _readable(self) -> None:
        assert self._read_fd is not None
        try:
            data = os.read(self._read_fd, READ_CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.close()
            return
        self._file.write(data)
        self._file.flush()
        self.total += len(data)
        if self.total - self.dropped >= 2 * self.keep:
            self._cut()

    def _cut(self) -> None:
        """Keep the last `keep` bytes: written to a new file that replaces the old one."""
        self._file.close()
        with self.path.open("rb") as f:
            f.seek(-self.keep, os.SEEK_END)
            tail = f.read()
        write_private(self.path, tail)
        self.dropped = self.total - len(tail)
        self._file = private_open(self.path, "ab")

    def read(self, offset: int, limit: int) -> Chunk:
        """Up to `limit` bytes from `offset` (bytes since the start), or from the first byte
        kept when `offset` was dropped."""
        start = max(offset, self.dropped)
        with self.path.open("rb") as f:
            f.seek(start - self.dropped)
            data = f.read(min(limit, self.total - start))
        return Chunk(data, start - offset, self.total - start - len(data))

    def close(self) -> None:
        if self._read_fd is not None:
            asyncio.get_running_loop().remove_reader(self._read_fd)
            os.close(self._read_fd)
            self._read_fd = None
        if not self.writer.closed:
            self.writer.close()
        self._file.close()
        self.eof.set()
