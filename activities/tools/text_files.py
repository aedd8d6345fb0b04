"""Editing a text file changes the lines edited, nothing else: its line endings (CRLF stays
CRLF), its UTF-8 byte-order mark and its mode (a script stays executable, a 0600 file stays
0600) are kept, as the original's edit tool keeps them. Edits match on the text with LF line
endings (what `read` shows and the model writes); a file that is not UTF-8 is refused rather
than written back with its other bytes replaced.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

UTF8_BOM = "\ufeff"


class NotUtf8Text(ValueError):
    def __init__(self, shown: str, err: UnicodeDecodeError) -> None:
        super().__init__(
            f"{shown} is not UTF-8 text (byte 0x{err.object[err.start]:02x} at offset "
            f"{err.start}); only UTF-8 text files are edited here, so nothing was changed "
            "(use exec for other encodings)"
        )


@dataclass(frozen=True)
class TextStyle:
    bom: bool = False
    crlf: bool = False

    def apply(self, text: str) -> str:
        """`text` (LF line endings) as the file writes it."""
        body = text.replace("\r\n", "\n").replace("\n", "\r\n") if self.crlf else text
        return UTF8_BOM + body if self.bom else body


def decode(data: bytes, shown: str) -> tuple[str, TextStyle]:
    """A file's bytes as text with LF line endings, and the style to write it back in."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise NotUtf8Text(shown, err) from err
    bom = text.startswith(UTF8_BOM)
    if bom:
        text = text[len(UTF8_BOM) :]
    crlf = "\r\n" in text
    return (text.replace("\r\n", "\n") if crlf else text), TextStyle(bom, crlf)


def normalized(text: str) -> str:
    """A string the model wrote, with the LF line endings edits match on."""
    return text.replace("\r\n", "\n")


def write_keeping_mode(path: Path, content: str) -> None:
    """Replace `path` with `content` (UTF-8, written as given) at once: a new file beside it
    renamed over it, with the old file's mode (and owner, where this process may set it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        before: os.stat_result | None = path.stat()
    except FileNotFoundError:
        before = None
    tmp, fd = _new_beside(path)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(content)
        if before is not None:
            os.chmod(tmp, stat.S_IMODE(before.st_mode))
            if (before.st_uid, before.st_gid) != (os.getuid(), os.getgid()):
                with contextlib.suppress(PermissionError):
                    os.chown(tmp, before.st_uid, before.st_gid)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _new_beside(path: Path) -> tuple[Path, int]:
    """A file of a name nobody chose, made here and now (O_EXCL, never through a symlink): a
    fixed name could be a symlink the workspace holds (a cloned repository's), and writing
    through it would reach outside the workspace. Mode 0666 less the umask, as `open` makes."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    for _ in range(100):
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.agentlane-tmp")
        try:
            return tmp, os.open(tmp, flags, 0o666)
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path.name}")
