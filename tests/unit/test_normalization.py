"""Text normalisation of runtime output (seed 004 "Text Normalization", TurnExecutor rules)."""

from __future__ import annotations

import random

import pytest

from activities.model_output.block_chunker import BlockChunker, BlockChunkingConfig
from activities.model_output.normalization import (
    HEARTBEAT_TOKEN,
    SILENT_REPLY_TOKEN,
    NormalizationOptions,
    StreamingNormalizer,
    has_meaningful_content,
    normalize_streaming_text,
    normalize_text,
    strip_heartbeat_token,
    strip_silent_token,
    undelivered_text,
)


def test_tokens_are_openclaws() -> None:
    assert HEARTBEAT_TOKEN == "HEARTBEAT_OK"
    assert SILENT_REPLY_TOKEN == "NO_REPLY"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("HEARTBEAT_OK", None, id="token-only"),
        pytest.param("  HEARTBEAT_OK \n", None, id="token-with-whitespace"),
        pytest.param("**HEARTBEAT_OK**", None, id="bold"),
        pytest.param("`HEARTBEAT_OK`", None, id="code"),
        pytest.param("<b>HEARTBEAT_OK</b>", None, id="html"),
        pytest.param("HEARTBEAT_OK.", None, id="trailing-period"),
        pytest.param("HEARTBEAT_OK HEARTBEAT_OK", None, id="repeated"),
        pytest.param("Done. HEARTBEAT_OK", "Done.", id="content-then-token"),
        pytest.param(
            "HEARTBEAT_OK\n\nReminder: call mom", "Reminder: call mom", id="token-then-content"
        ),
        pytest.param("**HEARTBEAT_OK** Note: x", "Note: x", id="bold-token-then-content"),
        pytest.param("👍 HEARTBEAT_OK", "👍", id="emoji-is-content"),
        pytest.param("HEARTBEAT_OKAY", "HEARTBEAT_OKAY", id="longer-word-kept"),
        pytest.param("xHEARTBEAT_OK", "xHEARTBEAT_OK", id="glued-word-kept"),
        pytest.param("say HEARTBEAT_OK now", "say HEARTBEAT_OK now", id="middle-kept"),
        pytest.param("heartbeat_ok", "heartbeat_ok", id="case-sensitive"),
    ],
)
def test_heartbeat_token(text: str, expected: str | None) -> None:
    assert normalize_text(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("NO_REPLY", None, id="token-only"),
        pytest.param("  NO_REPLY  ", None, id="padded"),
        pytest.param("*NO_REPLY*", None, id="emphasis"),
        pytest.param("NO_REPLY: the user only said thanks", None, id="leading-token-is-silence"),
        pytest.param("Thanks! NO_REPLY", "Thanks!", id="trailing-token-stripped"),
        pytest.param("NO_REPLYING", "NO_REPLYING", id="longer-word-kept"),
        pytest.param("no_reply", "no_reply", id="case-sensitive"),
        pytest.param("It said NO_REPLY twice", "It said NO_REPLY twice", id="middle-kept"),
    ],
)
def test_silent_token(text: str, expected: str | None) -> None:
    assert normalize_text(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(None, None, id="none"),
        pytest.param("", None, id="empty"),
        pytest.param(" \n\t ", None, id="whitespace"),
        pytest.param("\x00\x07", None, id="controls-only"),
        pytest.param("<think>only reasoning</think>", None, id="reasoning-only"),
        pytest.param("<think>r</think>Answer", "Answer", id="reasoning-stripped"),
        pytest.param("<think>r</think>NO_REPLY", None, id="reasoning-then-silent"),
        pytest.param("<think>r</think>HEARTBEAT_OK", None, id="reasoning-then-heartbeat"),
        pytest.param("Answer <think>unclosed", "Answer", id="unclosed-reasoning-dropped"),
        pytest.param("<final>Answer</final>", "Answer", id="final-tags-removed"),
        pytest.param("hi\r\nthere\rnow\x00\ufeff", "hi\nthere\nnow", id="sanitized"),
        pytest.param("  Answer  \n", "Answer", id="trimmed"),
        pytest.param("a\n\n\n\nb", "a\n\n\n\nb", id="blank-lines-kept-by-default"),
    ],
)
def test_normalize_text(text: str | None, expected: str | None) -> None:
    assert normalize_text(text) == expected


def test_options_turn_rules_off() -> None:
    keep_all = NormalizationOptions(
        strip_heartbeat=False, strip_thinking=False, strip_silent=False, sanitize=False
    )
    assert normalize_text("HEARTBEAT_OK", keep_all) == "HEARTBEAT_OK"
    assert normalize_text("NO_REPLY", keep_all) == "NO_REPLY"
    assert normalize_text("<think>r</think>A", keep_all) == "<think>r</think>A"
    assert normalize_text("a\x00b", keep_all) == "a\x00b"
    assert normalize_text("   ", keep_all) is None


def test_whitespace_normalisation_collapses_blank_line_runs() -> None:
    options = NormalizationOptions(normalize_whitespace=True)
    assert normalize_text("a\n\n\n \n\nb\n\nc", options) == "a\n\nb\n\nc"


def test_custom_tokens() -> None:
    options = NormalizationOptions(heartbeat_token="PING_OK", silent_token="SKIP")
    assert normalize_text("PING_OK", options) is None
    assert normalize_text("SKIP", options) is None
    assert normalize_text("HEARTBEAT_OK", options) == "HEARTBEAT_OK"


def test_token_helpers_directly() -> None:
    assert strip_heartbeat_token("plain") == "plain"
    assert strip_heartbeat_token("HEARTBEAT_OK!") is None
    assert strip_silent_token("plain") == "plain"
    assert strip_silent_token("**Done** NO_REPLY") == "**Done**"
    assert not has_meaningful_content(" **.** <br> ")
    assert has_meaningful_content("ok")


# --- streaming ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("partial", "expected"),
    [
        pytest.param("Hello ", "Hello ", id="trailing-space-kept"),
        pytest.param("  Hello\n", "Hello\n", id="leading-trimmed-trailing-newline-kept"),
        pytest.param("Hello <thi", "Hello ", id="partial-tag-held-back"),
        pytest.param("<think>partial reasoning", None, id="open-reasoning-hidden"),
        pytest.param("<think>r</think>Ans", "Ans", id="closed-reasoning-removed"),
        pytest.param("a `code", "a ", id="unfinished-code-span-held-back"),
        pytest.param("N", None, id="could-become-silent"),
        pytest.param("NO_RE", None, id="silent-prefix"),
        pytest.param("NO_REPLY", None, id="silent"),
        pytest.param("HEART", None, id="heartbeat-prefix"),
        pytest.param("HEARTBEAT_OK", None, id="heartbeat"),
        pytest.param("HEARTBEAT_OK\n\nRemin", "Remin", id="heartbeat-then-content"),
        pytest.param("No problem ", "No problem ", id="not-a-token"),
        pytest.param("NOTE: ", "NOTE: ", id="diverged-from-token"),
        pytest.param("", None, id="empty"),
        pytest.param("   ", None, id="blank"),
    ],
)
def test_normalize_streaming_text(partial: str, expected: str | None) -> None:
    assert normalize_streaming_text(partial) == expected


def test_streaming_and_final_agree_once_complete() -> None:
    text = "<think>plan</think>Here is the answer.\n\nWith two paragraphs."
    streamed = normalize_streaming_text(text)
    assert streamed is not None
    assert streamed.strip() == normalize_text(text)


# Pieces a reply is made of, the tricky ones many times over: tags (partial, in code, across
# deltas), fences, CRLF split between deltas, control characters, tokens at either edge.
_PIECES = [
    "<think>",
    "</think>",
    "<thinking ",
    "x>",
    "<final>",
    "</final>",
    "<",
    ">",
    "<thi",
    "nk>",
    "`",
    "``",
    "```",
    "```py\n",
    "~~~\n",
    "\n",
    "\n\n",
    "\r",
    "\r\n",
    "\x00",
    "\ufeff",
    "NO_REPLY",
    "NO_RE",
    "HEARTBEAT_OK",
    "**",
    "<b>",
    "</b>",
    " ",
    "  ",
    "\t",
    "Hello",
    "world.",
    "a",
    "x = 1",
    "&nbsp;",
    "- item",
    "#",
]


@pytest.mark.parametrize(
    "options",
    [
        NormalizationOptions(),
        NormalizationOptions(sanitize=False, normalize_whitespace=True),
        NormalizationOptions(strip_thinking=False),
    ],
)
def test_the_streaming_normalizer_equals_the_whole_text_function_at_every_delta(
    options: NormalizationOptions,
) -> None:
    rng = random.Random(20261127)
    for _ in range(400):
        raw = "".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 40)))
        # Cut anywhere, pieces not respected: a CR and its LF, a tag, a token split apart.
        cuts = sorted(rng.sample(range(1, len(raw) + 1), k=min(len(raw), rng.randint(1, 12))))
        normalizer = StreamingNormalizer(options)
        for cut in [*cuts, len(raw)]:
            assert normalizer(raw[:cut]) == normalize_streaming_text(raw[:cut], options), (
                raw,
                cut,
            )


def test_the_streaming_normalizer_refuses_a_text_that_shrank() -> None:
    normalizer = StreamingNormalizer()
    normalizer("Hello there")
    with pytest.raises(ValueError, match="only grows"):
        normalizer("Hello")


# --- block / final de-duplication --------------------------------------------------------------


@pytest.mark.parametrize(
    ("blocks", "final", "expected"),
    [
        pytest.param(
            ["First paragraph.", "Second paragraph."],
            "First paragraph.\n\nSecond paragraph.",
            None,
            id="all-delivered",
        ),
        pytest.param(
            ["First paragraph."],
            "First paragraph.\n\nSecond paragraph.",
            "Second paragraph.",
            id="tail-remains",
        ),
        pytest.param(
            ["Intro\n```js\nline1\n```", "```js\nline2\n```"],
            "Intro\n```js\nline1\nline2\n```\n\nAfter",
            "After",
            id="fence-split-blocks-then-tail",
        ),
        pytest.param(
            ["Intro\n```js\nline1\n```"],
            "Intro\n```js\nline1\nline2\n```\n\nAfter",
            "```js\nline2\n```\n\nAfter",
            id="rest-inside-fence-is-reopened",
        ),
        pytest.param(["One two"], "One two three four", "three four", id="cut-mid-line-continues"),
        pytest.param(["  - a\n"], "  - a\n  - b", "- b", id="list-item-on-new-line"),
        pytest.param(["Something else"], "Final answer", "Final answer", id="diverged-send-all"),
        pytest.param([], "Final answer", "Final answer", id="nothing-delivered"),
        pytest.param(["Answer. More."], "Answer.", None, id="final-shorter-than-blocks"),
        pytest.param(["x"], "   ", None, id="blank-final"),
    ],
)
def test_undelivered_text(blocks: list[str], final: str, expected: str | None) -> None:
    assert undelivered_text(blocks, final) == expected


def test_undelivered_text_after_real_chunker_output_is_none() -> None:
    body = "\n".join(f"print({i})" for i in range(30))
    final = f"Here is code:\n```python\n{body}\n```\n\nAnd a closing remark."
    chunker = BlockChunker(BlockChunkingConfig(min_chars=20, max_chars=60))
    chunker.append(final)
    blocks = chunker.drain(force=True)
    assert len(blocks) > 3
    assert undelivered_text(blocks, final) is None
    assert undelivered_text(blocks[:2], final) is not None
