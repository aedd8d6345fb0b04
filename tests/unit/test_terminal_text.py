"""Tool output and model text reach the operator's terminal without control sequences."""

from __future__ import annotations

from clients.terminal_text import printable


def test_control_characters_are_shown_not_obeyed() -> None:
    assert printable("ok\x00bad\x1b[31mred\n") == "ok^@bad^[[31mred\n"
    assert printable("line\r\nnext\rhidden\x7f\x9b") == "line\nnext^Mhidden^?M-^["
    assert printable("tab\tand\nnewline, café") == "tab\tand\nnewline, café"


def test_the_transcript_prints_them_so() -> None:
    from agentlane.transcript import Role, TranscriptEntry
    from clients.session_text import transcript_lines

    entry = TranscriptEntry(
        id="c1:result", role=Role.TOOL, ts=1.0, text="\x1b]0;pwned\x07done", tool_call_id="c1"
    )
    assert transcript_lines([entry])[-1] == "^[]0;pwned^Gdone"
