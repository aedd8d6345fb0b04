"""read: paging by lines and by size, binary files described, images for vision models, and the
request builders turning a tool result's images into each API's image blocks (or a note)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from activities.context.token_estimate import IMAGES_META_KEY
from activities.providers.anthropic_request import build_messages_body
from activities.providers.base import ModelRequest
from activities.providers.openai_request import (
    OpenAIOptions,
    build_chat_body,
    build_responses_body,
)
from activities.tools.read_tool import MAX_IMAGE_BYTES, PAGE_BYTES, count_lines, read_file
from activities.tools.specs import ReadArgs
from agentlane.transcript import Role, ToolCall, TranscriptEntry
from tests.fakes.images import JPEG_START, TINY_GIF, WEBP_START, tiny_png


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


def test_pages_stop_at_50_kb_and_say_where_the_next_starts(ws: Path) -> None:
    line = "y" * 99  # 100 bytes with its newline
    (ws / "wide.txt").write_text((line + "\n") * 1200)
    first = read_file(str(ws), ReadArgs(path="wide.txt"))
    shown = first.text.split("\n… [")[0].splitlines()
    assert len(shown) == PAGE_BYTES // 100
    assert first.text.endswith(
        f"lines 0-{len(shown) - 1} of 1200 shown ({1200 - len(shown)} more); call read with "
        f"offset={len(shown)} for the next page]"
    )
    pages = [shown]
    offset = len(shown)
    while offset < 1200:
        page = read_file(str(ws), ReadArgs(path="wide.txt", offset=offset)).text
        lines = page.split("\n… [")[0].splitlines()
        assert len("\n".join(lines).encode()) <= PAGE_BYTES
        pages.append(lines)
        offset += len(lines)
    assert sum(len(p) for p in pages) == 1200


def test_line_count_with_and_without_a_final_newline(ws: Path) -> None:
    (ws / "a").write_text("x\ny\n")
    (ws / "b").write_text("x\ny")
    (ws / "c").write_text("")
    assert [count_lines(ws / n) for n in "abc"] == [2, 2, 0]
    assert read_file(str(ws), ReadArgs(path="c")).text == "c is empty."


def test_multibyte_text_is_text(ws: Path) -> None:
    (ws / "u.txt").write_text("héllo wörld ✓\n" * 3000)
    res = read_file(str(ws), ReadArgs(path="u.txt", limit=2))
    assert res.text.startswith("héllo wörld ✓\nhéllo wörld ✓\n… [lines 0-1 of 3000")


@pytest.mark.parametrize(
    ("data", "label"),
    [
        (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n" + b"\x00" * 100, "PDF document"),
        (b"PK\x03\x04" + b"\x00" * 100, "ZIP archive"),
        (b"\x7fELF\x02\x01\x01" + b"\x00" * 100, "ELF executable"),
        (bytes(range(256)) * 4, "unrecognised binary data"),
    ],
)
def test_binary_files_are_described_not_dumped(ws: Path, data: bytes, label: str) -> None:
    (ws / "blob").write_bytes(data)
    res = read_file(str(ws), ReadArgs(path="blob"))
    assert not res.is_error
    assert res.text.startswith(f"blob is a binary file ({label}")
    assert f"{len(data)} bytes" in res.text
    assert "\x00" not in res.text and not res.images


@pytest.mark.parametrize(
    ("name", "data", "head"),
    [
        ("red.png", tiny_png(2, 3), "Image file red.png (PNG, 2x3, "),
        ("dot.gif", TINY_GIF, "Image file dot.gif (GIF, 1x1, "),
        ("photo.jpg", JPEG_START, "Image file photo.jpg (JPEG, "),
        ("pic.webp", WEBP_START, "Image file pic.webp (WebP, "),
    ],
)
def test_images_come_back_as_images(ws: Path, name: str, data: bytes, head: str) -> None:
    (ws / name).write_bytes(data)
    res = read_file(str(ws), ReadArgs(path=name))
    assert res.text.startswith(head)
    (image,) = res.images
    assert base64.b64decode(image["data"]) == data
    assert image["path"] == name and image["bytes"] == len(data)


def test_an_image_too_large_for_a_model_is_not_sent(ws: Path) -> None:
    (ws / "huge.png").write_bytes(tiny_png() + b"\x00" * MAX_IMAGE_BYTES)
    res = read_file(str(ws), ReadArgs(path="huge.png"))
    assert not res.images
    assert "larger than 5 MB" in res.text


def _request(images: bool) -> ModelRequest:
    png = base64.b64encode(tiny_png()).decode()
    entries = [
        TranscriptEntry(id="u", role=Role.USER, ts=0, text="look at red.png"),
        TranscriptEntry(
            id="a",
            role=Role.ASSISTANT,
            ts=1,
            tool_calls=[
                ToolCall(id="c1", name="read", arguments={"path": "red.png"}),
                ToolCall(id="c2", name="read", arguments={"path": "b.txt"}),
            ],
        ),
        TranscriptEntry(
            id="c1:result",
            role=Role.TOOL,
            ts=2,
            tool_call_id="c1",
            tool_name="read",
            text="Image file red.png (PNG, 2x3, 70 bytes).",
            meta={IMAGES_META_KEY: [{"media_type": "image/png", "data": png, "path": "red.png"}]},
        ),
        TranscriptEntry(
            id="c2:result", role=Role.TOOL, ts=3, tool_call_id="c2", tool_name="read", text="b"
        ),
    ]
    return ModelRequest(model="m", system="", entries=entries, tools=[], images=images)


def test_anthropic_tool_result_holds_the_image_block() -> None:
    body = build_messages_body(_request(True), max_tokens=100)
    results = body["messages"][2]["content"]
    text, image = results[0]["content"]
    assert text == {"type": "text", "text": "Image file red.png (PNG, 2x3, 70 bytes)."}
    assert image["type"] == "image"
    assert image["source"]["media_type"] == "image/png"
    assert base64.b64decode(image["source"]["data"]) == tiny_png()
    blind = build_messages_body(_request(False), max_tokens=100)
    content = blind["messages"][2]["content"][0]["content"]
    assert isinstance(content, str)
    assert "is not shown: this model does not take images" in content


def test_openai_chat_images_follow_the_tool_messages() -> None:
    options = OpenAIOptions(max_tokens=100, thinking_levels=["off"])
    messages = build_chat_body(_request(True), options)["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "user"]
    text, image = messages[-1]["content"]
    assert "c1" in text["text"]
    assert image["image_url"]["url"].startswith("data:image/png;base64,")
    blind = build_chat_body(_request(False), options)["messages"]
    assert [m["role"] for m in blind] == ["user", "assistant", "tool", "tool"]
    assert "is not shown" in blind[2]["content"]


def test_openai_responses_images_follow_the_tool_outputs() -> None:
    options = OpenAIOptions(max_tokens=100, thinking_levels=["off"])
    items = build_responses_body(_request(True), options)["input"]
    assert items[-1]["role"] == "user"
    assert items[-1]["content"][1]["type"] == "input_image"
    assert items[-2]["type"] == "function_call_output"
