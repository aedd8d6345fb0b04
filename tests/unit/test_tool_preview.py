"""Tool previews and redaction (agentlane/tool_preview.py, agentlane/redaction.py): what a tool
call shows in history is bounded and carries no secret."""

from __future__ import annotations

import pytest

from agentlane.redaction import REDACTED, redact, redact_known, secret_env_values
from agentlane.tool_preview import PREVIEW_BYTES, head_and_tail, tool_preview

OPENAI = "sk-proj-" + "x" * 24
ANTHROPIC = "sk-ant-api03-" + "y" * 24


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (f"curl -H 'Authorization: Bearer {OPENAI}' https://api", OPENAI),
        ("curl -H 'Authorization: Bearer abc.def-ghi_jkl' x", "abc.def-ghi_jkl"),
        (f"OPENAI_API_KEY={OPENAI} python run.py", OPENAI),
        ("export MY_SERVICE_KEY=plainvalue123 && go", "plainvalue123"),
        ('{"password": "hunter2hunter2", "user": "bob"}', "hunter2hunter2"),
        ("mysql --host db password=s3cr3t! -e 'select 1'", "s3cr3t!"),
        ("GITHUB_TOKEN: ghp_" + "A" * 36, "ghp_" + "A" * 36),
        ("git clone https://bob:tops3cret@example.com/r.git", "tops3cret"),
        (f"the key is {ANTHROPIC}.", ANTHROPIC),
        # Built, so no key-shaped literal sits in the source.
        ("aws " + "AKIA" + "X" * 16 + " configure", "AKIA" + "X" * 16),
        ("client_secret='xyzzy-42-plugh'", "xyzzy-42-plugh"),
    ],
)
def test_secret_shapes_are_redacted(text: str, secret: str) -> None:
    shown = redact(text)
    assert secret not in shown
    assert REDACTED in shown


@pytest.mark.parametrize(
    "text",
    [
        "max_tokens: 1024",
        "pytest -q tests/unit",
        "the token budget is spent",
        "sort key order",
        "Wrote 12 characters to notes.md",
        # Asterisks alone are markup, not a masked key (apply_patch's headers, Markdown rules).
        "*** Begin Patch\n*** Update File: a.txt\n*** End Patch",
        "---\n***\n**bold** and ****",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact(text) == text


def test_known_secrets_go_whole_even_without_a_shape() -> None:
    # Longest first: a secret containing another is not left half shown.
    shown = redact("value=abcd1234 and abcd1234efgh", ["abcd1234", "abcd1234efgh"])
    assert "abcd" not in shown
    assert redact_known("xyz", ["xyz"]) == "xyz"  # too short to be told from a word
    assert redact_known("masked sk-ab***wxyz here", []) == f"masked {REDACTED} here"
    assert redact_known("tail ***wxyz and head ab***", []) == f"tail {REDACTED} and head {REDACTED}"


def test_secret_env_values_are_picked_by_name() -> None:
    env = {"OPENAI_API_KEY": OPENAI, "HOME": "/root", "GH_TOKEN": "t" * 20, "DB_PASSWORD": "short"}
    assert sorted(secret_env_values(env)) == sorted([OPENAI, "t" * 20])


def test_small_preview_holds_arguments_and_output_whole() -> None:
    preview = tool_preview({"path": "f0.txt", "content": "x"}, "Wrote 1 characters to f0.txt")
    assert preview == "path=f0.txt content=x\nWrote 1 characters to f0.txt"
    assert tool_preview({"command": "ls -la"}, "") == 'command="ls -la"\n'
    assert tool_preview("not json {\n}", "Error") == "not json { }\nError"


@pytest.mark.parametrize(
    ("args_size", "out_size"), [(10, 5000), (5000, 10), (5000, 5000), (700, 700), (2, 1021)]
)
def test_preview_is_bounded_and_keeps_head_and_tail(args_size: int, out_size: int) -> None:
    output = "HEAD" + "é" * out_size + "TAIL"
    preview = tool_preview({"content": "a" * args_size}, output)
    assert len(preview.encode()) <= PREVIEW_BYTES
    first, _, rest = preview.partition("\n")
    assert first.startswith("content=a")
    assert rest.startswith("HEAD")
    assert rest.endswith("TAIL")


def test_long_arguments_leave_room_for_the_output() -> None:
    preview = tool_preview({"content": "a" * 10_000}, "b" * 10_000)
    args, _, out = preview.partition("\n")
    assert " … [" in args and "\n… [" in preview
    assert preview.count("b") >= 500  # the output keeps most of the room
    assert len(preview.encode()) <= PREVIEW_BYTES
    assert args.startswith("content=aaa")
    assert out


def test_redaction_happens_before_the_cut() -> None:
    output = "x" * 3000 + f" OPENAI_API_KEY={OPENAI} " + "y" * 3000
    preview = tool_preview({"command": f"env OPENAI_API_KEY={OPENAI}"}, output, [OPENAI])
    assert OPENAI not in preview
    assert OPENAI[:12] not in preview  # nor a part of it at a cut
    assert f"OPENAI_API_KEY={REDACTED}" in preview


def test_configured_secret_is_redacted_wherever_it_appears() -> None:
    preview = tool_preview(
        {"command": "echo plain-looking-value-1"},
        "plain-looking-value-1",
        ["plain-looking-value-1"],
    )
    assert "plain-looking-value-1" not in preview


def test_head_and_tail_counts_bytes_and_says_what_it_left_out() -> None:
    assert head_and_tail("short", 10) == "short"
    cut = head_and_tail("ab" * 1000, 100)
    assert len(cut.encode()) <= 100
    assert cut.startswith("abab") and cut.endswith("abab")
    assert "bytes] …" in cut
    multibyte = head_and_tail("€" * 500, 64)
    assert len(multibyte.encode()) <= 64
    multibyte.encode()  # no split character left behind


def test_a_long_output_is_redacted_only_where_it_can_be_shown() -> None:
    # Only the ends of a long output are redacted (cheap); a secret anywhere else, even cut
    # where the redacted ends stop, never reaches the preview.
    for at in range(1500, 2600, 7):
        output = "a" * at + OPENAI + "b" * 100_000
        preview = tool_preview({}, output)
        assert OPENAI[:8] not in preview and "sk-" not in preview, at
        assert len(preview.encode()) <= PREVIEW_BYTES


def test_the_event_streams_tool_previews_are_redacted_too() -> None:
    from activities.tool_calls import preview_args, stream_text

    shown = preview_args({"command": f"curl -H 'x-api-key: {OPENAI}' h", "n": 2})
    assert OPENAI not in shown["command"] and shown["n"] == 2
    long = preview_args({"content": "a" * 1990 + f" TOKEN={OPENAI} " + "b" * 5000})
    assert OPENAI[:6] not in long["content"] and long["content"].endswith("more characters]")
    # A secret across the cut is redacted whole before the cut, never shown in part.
    assert "sk-" not in stream_text("a" * 1994 + " " + ANTHROPIC, 2000)


def test_an_apply_patch_call_keeps_its_file_headers_on_the_stream() -> None:
    """The `⚙ apply_patch update a.txt` line is read from the stream's redacted preview."""
    from activities.tool_calls import preview_args
    from clients.tool_line import tool_input_preview

    patch = (
        "*** Begin Patch\n*** Update File: a.txt\n@@\n+x\n*** Add File: b.txt\n+y\n*** End Patch\n"
    )
    assert tool_input_preview("apply_patch", preview_args({"input": patch})) == (
        "update a.txt, add b.txt"
    )
