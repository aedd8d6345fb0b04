"""Text from tools and models as a terminal shows it: control characters in caret notation
(`^[` for ESC, `^@` for NUL, as `cat -v` does), so a file or a command's output cannot move the
cursor, recolour, retitle or clear the operator's terminal, or hide lines behind a bare CR."""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")


def _caret(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return "^" + chr(code + 0x40)
    if code == 0x7F:
        return "^?"
    return f"M-^{chr(code - 0x80 + 0x40)}"


def printable(text: str) -> str:
    """`text` safe to print: newlines and tabs kept (a CRLF is a newline), every other control
    character shown in caret notation."""
    if not _CONTROL.search(text):
        return text
    return _CONTROL.sub(_caret, text.replace("\r\n", "\n"))
