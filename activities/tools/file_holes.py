"""Releasing the disk behind a stretch of a file while keeping its size (Linux `fallocate` with
FALLOC_FL_PUNCH_HOLE): a command's output file can grow for as long as the command writes, yet
hold on disk only the part still to be read. ext4, xfs, btrfs and tmpfs support it."""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import sys

_FALLOC_FL_KEEP_SIZE = 0x01
_FALLOC_FL_PUNCH_HOLE = 0x02
BLOCK = 4096


def _libc_fallocate() -> ctypes._NamedFuncPointer | None:
    if not sys.platform.startswith("linux"):
        return None
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        fallocate = ctypes.CDLL(name, use_errno=True).fallocate
    except (OSError, AttributeError):
        return None
    fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong]
    fallocate.restype = ctypes.c_int
    return fallocate


_fallocate = _libc_fallocate()


def punch_hole(fd: int, offset: int, length: int) -> bool:
    """Free the blocks of [offset, offset + length) (whole blocks only; reads there return zeros).
    False when this system or filesystem cannot."""
    start = -(-offset // BLOCK) * BLOCK
    end = (offset + length) // BLOCK * BLOCK
    if end <= start:
        return True
    if _fallocate is None:
        return False
    if _fallocate(fd, _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE, start, end - start) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EOPNOTSUPP, errno.ENOSYS):
        return False
    raise OSError(err, os.strerror(err))
