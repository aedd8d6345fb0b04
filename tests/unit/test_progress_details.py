"""What running activities report in their heartbeats (activities/progress_details.py)."""

from __future__ import annotations

from activities.progress_details import CHARS_PER_TOKEN, LINE_CHARS, ModelProgress, ToolProgress


def test_tool_progress_counts_bytes_and_keeps_the_last_line() -> None:
    progress = ToolProgress("exec", what="make test")
    assert progress.details() == {"tool": "exec", "elapsed_s": 0.0, "call": "make test"}
    progress.feed("compiling a\ncompiling b\n")
    progress.feed("héllo")  # a line still being written is the latest thing shown
    shown = progress.details()
    assert shown["output_bytes"] == len("compiling a\ncompiling b\nhéllo".encode())
    assert shown["last_line"] == "héllo"
    progress.feed(" world\n\n")
    assert progress.details()["last_line"] == "héllo world"
    progress.feed("50%\r75%\r")  # a progress bar rewrites its line
    assert progress.details()["last_line"] == "75%"


def test_tool_progress_redacts_and_bounds_what_it_shows() -> None:
    progress = ToolProgress("exec", what="deploy TOKEN=abcdef123456", secrets=["plainsecret"])
    progress.feed("using plainsecret now\n")
    shown = progress.details()
    assert shown["call"] == "deploy TOKEN=<redacted>"
    assert shown["last_line"] == "using <redacted> now"
    progress.feed("z" * 1000)
    assert progress.details()["last_line"] == "z" * LINE_CHARS


def test_model_progress_reports_deltas_tokens_and_silence() -> None:
    progress = ModelProgress("anthropic/claude")
    shown = progress.details()
    assert shown["deltas"] == 0 and "since_last_delta_s" not in shown
    progress.delta("x" * (CHARS_PER_TOKEN * 10))
    progress.delta("y" * CHARS_PER_TOKEN)
    shown = progress.details()
    assert shown["model"] == "anthropic/claude"
    assert shown["deltas"] == 2
    assert shown["approx_tokens"] == 11
    assert shown["since_last_delta_s"] >= 0
