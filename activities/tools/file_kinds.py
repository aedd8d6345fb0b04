"""What kind of file a path holds, from its first bytes: text, an image the model may see, or
other binary data (named by its magic number where it has a well-known one)."""

from __future__ import annotations

import mimetypes
import struct
from dataclasses import dataclass
from pathlib import Path

SNIFF_BYTES = 8192

# (magic prefix, media type, label) for images a vision model takes (PNG, JPEG, GIF, WebP).
_IMAGES: tuple[tuple[bytes, str, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png", "PNG"),
    (b"\xff\xd8\xff", "image/jpeg", "JPEG"),
    (b"GIF87a", "image/gif", "GIF"),
    (b"GIF89a", "image/gif", "GIF"),
)

# Binary formats worth naming (the model can then pick a tool to look inside).
_BINARY: tuple[tuple[bytes, str], ...] = (
    (b"%PDF-", "PDF document"),
    (b"PK\x03\x04", "ZIP archive (or a format built on it: docx, xlsx, jar, ...)"),
    (b"\x1f\x8b", "gzip-compressed data"),
    (b"BZh", "bzip2-compressed data"),
    (b"\xfd7zXZ\x00", "xz-compressed data"),
    (b"7z\xbc\xaf\x27\x1c", "7-Zip archive"),
    (b"\x7fELF", "ELF executable or library"),
    (b"SQLite format 3\x00", "SQLite database"),
    (b"\x00asm", "WebAssembly module"),
    (b"BM", "BMP image (not a format models take)"),
    (b"II*\x00", "TIFF image (not a format models take)"),
    (b"MM\x00*", "TIFF image (not a format models take)"),
    (b"OggS", "Ogg media"),
    (b"fLaC", "FLAC audio"),
    (b"ID3", "MP3 audio"),
)


@dataclass(frozen=True)
class FileKind:
    kind: str  # "text", "image" or "binary"
    media_type: str = ""
    label: str = ""
    width: int | None = None
    height: int | None = None


def _image(head: bytes) -> FileKind | None:
    for magic, media, label in _IMAGES:
        if head.startswith(magic):
            width, height = _dimensions(head, media)
            return FileKind("image", media, label, width, height)
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return FileKind("image", "image/webp", "WebP")
    return None


def _dimensions(head: bytes, media: str) -> tuple[int | None, int | None]:
    """Width and height where the header holds them at a fixed place (PNG, GIF)."""
    if media == "image/png" and len(head) >= 24:
        width, height = struct.unpack(">II", head[16:24])
        return int(width), int(height)
    if media == "image/gif" and len(head) >= 10:
        width, height = struct.unpack("<HH", head[6:10])
        return int(width), int(height)
    return None, None


def _looks_like_text(head: bytes) -> bool:
    if b"\x00" in head:
        return False
    try:
        head.decode("utf-8")
        return True
    except UnicodeDecodeError as err:
        # A multi-byte character cut by the sniff window is still text.
        if err.start >= len(head) - 3 and err.reason == "unexpected end of data":
            return True
    # Mostly printable Latin-1 (an old text file) reads fine with replacement characters.
    printable = sum(1 for b in head if b >= 0x20 or b in (9, 10, 12, 13))
    return printable / max(1, len(head)) > 0.97


def sniff(path: Path) -> FileKind:
    with path.open("rb") as f:
        head = f.read(SNIFF_BYTES)
    image = _image(head)
    if image is not None:
        return image
    if _looks_like_text(head):
        return FileKind("text", "text/plain")
    for magic, label in _BINARY:
        if head.startswith(magic):
            return FileKind("binary", label=label)
    guessed, _ = mimetypes.guess_type(path.name)
    return FileKind("binary", guessed or "", guessed or "unrecognised binary data")
