"""Block-streaming chunker, coalescer and deduper (SPEC §15; cases T65, T66 of §18.11)."""

from __future__ import annotations

import random
import re

import pytest

from activities.model_output.block_chunker import (
    BlockChunker,
    BlockChunkingConfig,
    BlockCoalescer,
    BlockReplyDeduper,
    BreakPreference,
    coalescer_joiner,
    resolve_block_chunking,
)
from activities.model_output.fences import match_fence_opener, parse_fence_spans


def chunker(
    min_chars: int,
    max_chars: int,
    preference: BreakPreference = BreakPreference.PARAGRAPH,
    *,
    flush_on_paragraph: bool = False,
) -> BlockChunker:
    return BlockChunker(BlockChunkingConfig(min_chars, max_chars, preference, flush_on_paragraph))


def drained(c: BlockChunker, text: str, *, force: bool = False) -> list[str]:
    c.append(text)
    return c.drain(force=force)


# --- T65 / T66 (agents/pi-embedded-block-chunker.test.ts) --------------------------------------


def test_T65_breaks_at_paragraph_right_after_fence_close() -> None:
    c = chunker(1, 40)
    text = "Intro\n```js\nconsole.log('x')\n```\n\nAfter first line\nAfter second line"
    chunks = drained(c, text)
    assert len(chunks) == 1
    assert chunks[0] == "Intro\n```js\nconsole.log('x')\n```"
    assert chunks[0].endswith("```")
    assert "After" not in chunks[0]
    assert c.buffered_text.startswith("After")
    assert c.buffered_text == "After first line\nAfter second line"


def test_T66_flush_on_paragraph_waits_for_min_chars() -> None:
    c = chunker(30, 200, flush_on_paragraph=True)
    chunks = drained(c, "First paragraph.\n\nSecond paragraph.\n\nThird paragraph.")
    assert chunks == ["First paragraph.\n\nSecond paragraph."]
    assert c.buffered_text == "Third paragraph."


def test_T66_flush_on_paragraph_below_min_waits_until_forced() -> None:
    c = chunker(100, 200, flush_on_paragraph=True)
    text = "First paragraph.\n\nSecond paragraph.\n\nThird paragraph."
    assert drained(c, text) == []
    assert c.drain(force=True) == [text]
    assert c.buffered_text == ""


@pytest.mark.parametrize(
    ("text", "expected", "rest"),
    [
        pytest.param("abcdefghijKLMNOP", ["abcdefghij"], "KLMNOP", id="T66-hard-cut-at-max"),
        pytest.param(
            "abcdefghijk\n\nRest", ["abcdefghij", "k"], "Rest", id="T66-cut-then-paragraph"
        ),
    ],
)
def test_T66_flush_on_paragraph_falls_back_to_max_chars(
    text: str, expected: list[str], rest: str
) -> None:
    c = chunker(1, 10, flush_on_paragraph=True)
    assert drained(c, text) == expected
    assert c.buffered_text == rest


# --- drain rules -------------------------------------------------------------------------------


def test_below_min_chars_nothing_is_emitted() -> None:
    c = chunker(50, 100)
    assert drained(c, "short text.\n\nmore") == []
    assert c.has_buffered()


def test_forced_drain_that_fits_emits_whole_buffer() -> None:
    c = chunker(50, 100)
    assert drained(c, "a\n\nb. c", force=True) == ["a\n\nb. c"]
    assert not c.has_buffered()


def test_forced_drain_of_blank_buffer_emits_nothing_and_clears() -> None:
    c = chunker(1, 100)
    assert drained(c, " \n\n ", force=True) == []
    assert c.buffered_text == ""


def test_forced_drain_longer_than_max_splits_and_keeps_tail_whole() -> None:
    c = chunker(10, 28)
    text = "para one is here and long.\n\nb.\n\nc."
    assert drained(c, text, force=True) == ["para one is here and long.", "b.\n\nc."]


def test_non_forced_drain_stops_once_remainder_is_below_max() -> None:
    c = chunker(5, 30)
    chunks = drained(c, "aaaa aaaa.\n\nbbbb bbbb.\n\ncccc cccc cccc")
    assert chunks == ["aaaa aaaa.\n\nbbbb bbbb."]
    assert c.buffered_text == "cccc cccc cccc"


def test_leading_newlines_of_remainder_are_stripped() -> None:
    c = chunker(3, 8, BreakPreference.NEWLINE)
    assert drained(c, "abcdef\n\n\n\nghij") == ["abcdef"]
    assert c.buffered_text == "ghij"


@pytest.mark.parametrize(
    ("preference", "config", "text", "expected", "rest"),
    [
        pytest.param(
            BreakPreference.PARAGRAPH,
            (5, 20),
            "line one\nline two\nline three",
            ["line one\nline two"],
            "line three",
            id="paragraph-pref-falls-back-to-newline",
        ),
        pytest.param(
            BreakPreference.NEWLINE,
            (5, 20),
            "line one\nline two\nline three",
            ["line one\nline two"],
            "line three",
            id="newline-pref",
        ),
        pytest.param(
            BreakPreference.NEWLINE,
            (5, 50),
            "one two three. four five six",
            [],
            "one two three. four five six",
            id="newline-pref-waits-below-max",
        ),
        pytest.param(
            BreakPreference.SENTENCE,
            (5, 30),
            "First one. Second one! Third one? Fourth",
            ["First one. Second one!"],
            "Third one? Fourth",
            id="sentence-pref",
        ),
        pytest.param(
            BreakPreference.SENTENCE,
            (5, 12),
            "Pi is 3.14159 and more",
            ["Pi is", "3.14159 and"],
            "more",
            id="decimal-point-is-not-a-sentence-end",
        ),
        pytest.param(
            BreakPreference.PARAGRAPH,
            (5, 12),
            "alpha beta gamma delta",
            ["alpha beta"],
            "gamma delta",
            id="whitespace-fallback",
        ),
        pytest.param(
            BreakPreference.NEWLINE,
            (5, 12),
            "alpha beta gamma delta",
            ["alpha beta"],
            "gamma delta",
            id="newline-pref-whitespace-once-over-max",
        ),
    ],
)
def test_break_search_order(
    preference: BreakPreference,
    config: tuple[int, int],
    text: str,
    expected: list[str],
    rest: str,
) -> None:
    c = chunker(*config, preference)
    assert drained(c, text) == expected
    assert c.buffered_text == rest


# --- fences ------------------------------------------------------------------------------------


def test_break_never_lands_inside_a_fence_when_a_safe_one_exists() -> None:
    c = chunker(5, 40)
    text = "Intro.\n\n```\nline a\n\nline b\n```\nafter the fence text"
    chunks = drained(c, text)
    assert chunks == ["Intro.", "```\nline a\n\nline b\n```"]
    assert c.buffered_text == "after the fence text"


def test_long_fence_is_closed_and_reopened_at_line_ends() -> None:
    c = chunker(5, 30)
    body = "\n".join(f"line {i}" for i in range(12))
    chunks = drained(c, f"Hi\n```python\n{body}\n```\nafter")
    chunks += c.drain(force=True)
    assert chunks == [
        "Hi\n```python\nline 0\nline 1\n```",
        "```python\nline 2\nline 3\nline 4\n```",
        "```python\nline 5\nline 6\nline 7\n```",
        "```python\nline 8\nline 9\n```",
        "```python\nline 10\nline 11\n```",
        "after",
    ]


def test_single_long_code_line_is_cut_at_max_and_reopened() -> None:
    c = chunker(1, 12)
    chunks = drained(c, "~~~\n" + "x" * 20 + "\n~~~", force=True)
    assert chunks == ["~~~\nxxxxxxxx\n~~~", "~~~\nxxxxxxxx\n~~~", "~~~\nxxxx\n~~~"]


def test_indented_fence_is_reopened_with_its_opening_line() -> None:
    c = chunker(1, 16)
    chunks = drained(c, "  ```sh\necho one\necho two\n  ```", force=True)
    assert chunks == ["  ```sh\necho one\n  ```", "  ```sh\necho two\n  ```"]


def test_cut_landing_on_closing_line_keeps_fence_whole() -> None:
    c = chunker(1, 10)
    assert drained(c, "```\nabcd\n```\nz", force=True) == ["```\nabcd\n```", "z"]


def test_cut_landing_on_opening_line_ends_chunk_before_fence() -> None:
    c = chunker(12, 14)
    chunks = drained(c, "Intro text\n```python\ncode\n```", force=True)
    assert chunks[0] == "Intro text"
    assert chunks[1:] == ["```python\ncode\n```"]


def test_unclosed_streaming_fence_is_split_and_reopened_then_closed_later() -> None:
    c = chunker(5, 20)
    first = drained(c, "```py\nprint(1)\nprint(2)\nprint(3)\n")
    assert first == ["```py\nprint(1)\n```", "```py\nprint(2)\n```"]
    assert c.buffered_text == "```py\nprint(3)\n"
    rest = drained(c, "```\ndone", force=True)
    assert rest == ["```py\nprint(3)\n```", "done"]


def test_unclosed_fence_with_nothing_left_to_reopen_waits() -> None:
    c = chunker(1, 8)
    assert drained(c, "```python\nx") == []
    assert c.drain(force=True) == ["```python\nx"]


def test_closing_line_arriving_char_by_char_is_not_split() -> None:
    c = chunker(2, 9, BreakPreference.NEWLINE)
    chunks: list[str] = []
    for piece in ["zeta\n", "~~~js\nab\n", " ", " ~", "~", "~", "\n\nkappa"]:
        chunks += drained(c, piece)
    chunks += c.drain(force=True)
    assert all(_fences_balanced(chunk) for chunk in chunks), chunks
    assert chunks[-1] == "kappa"


def test_hard_cut_waits_rather_than_split_a_growing_fence_opener() -> None:
    c = chunker(1, 6)
    assert drained(c, "abcde\n`") == ["abcde"]
    assert drained(c, "`") == []
    chunks = drained(c, "`js\nx\n```", force=True)
    assert chunks == ["```js\nx\n```"]


def test_opening_line_longer_than_max_still_terminates_with_valid_chunks() -> None:
    c = chunker(1, 5)
    chunks = drained(c, "```python\nab\ncd\n```", force=True)
    assert all(_fences_balanced(chunk) for chunk in chunks)
    assert _skeleton("\n".join(chunks)) == _skeleton("```python\nab\ncd\n```")


# --- config ------------------------------------------------------------------------------------


def test_defaults_follow_spec() -> None:
    config = BlockChunkingConfig()
    assert (config.min_chars, config.max_chars) == (800, 1200)
    assert config.break_preference is BreakPreference.PARAGRAPH
    assert not config.flush_on_paragraph


def test_channel_limit_caps_max_and_min() -> None:
    config = resolve_block_chunking(text_limit=500, newline_chunk_mode=True)
    assert (config.min_chars, config.max_chars) == (500, 500)
    assert config.flush_on_paragraph
    assert resolve_block_chunking(text_limit=4000).max_chars == 1200


def test_min_above_max_is_clamped() -> None:
    c = BlockChunker(BlockChunkingConfig(min_chars=50, max_chars=10))
    assert drained(c, "x" * 49) == []
    assert drained(c, "x") == ["x" * 50]


# --- invariants over generated inputs ----------------------------------------------------------

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]


def _sentence(rng: random.Random) -> str:
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 9)))
    return words + rng.choice([".", "!", "?", ",", ""])


def _paragraph(rng: random.Random) -> str:
    lines = [
        " ".join(_sentence(rng) for _ in range(rng.randint(1, 4))) for _ in range(rng.randint(1, 3))
    ]
    return "\n".join(lines)


def _fence(rng: random.Random) -> str:
    marker = rng.choice(["```", "````", "~~~"])
    indent = rng.choice(["", "", " ", "   "])
    info = rng.choice(["", "python", "js", "sh"])
    body = [
        rng.choice(["", "    "]) + " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6)))
        for _ in range(rng.randint(1, 12))
    ]
    return "\n".join([f"{indent}{marker}{info}", *body, f"{indent}{marker}"])


def _document(rng: random.Random, *, with_fences: bool) -> str:
    blocks = [
        _fence(rng) if with_fences and rng.random() < 0.35 else _paragraph(rng)
        for _ in range(rng.randint(1, 10))
    ]
    separators = ["\n\n", "\n", "\n \n", "\n\n\n"]
    text = blocks[0]
    for block in blocks[1:]:
        text += rng.choice(separators) + block
    return text


def _random_config(rng: random.Random) -> BlockChunkingConfig:
    min_chars = rng.randint(1, 80)
    return BlockChunkingConfig(
        min_chars=min_chars,
        max_chars=min_chars + rng.randint(0, 120),
        break_preference=rng.choice(list(BreakPreference)),
        flush_on_paragraph=rng.random() < 0.3,
    )


def _stream_through(
    config: BlockChunkingConfig, text: str, rng: random.Random
) -> tuple[list[str], list[str]]:
    """Append `text` in random pieces, draining after each; (non-forced chunks, all chunks)."""
    c = BlockChunker(config)
    soft: list[str] = []
    pos = 0
    largest_piece = rng.choice([5, 40])  # token-sized deltas as well as larger bursts
    while pos < len(text):
        step = rng.randint(1, largest_piece)
        c.append(text[pos : pos + step])
        pos += step
        soft.extend(c.drain(force=False))
    return soft, soft + c.drain(force=True)


def _is_fence_line(line: str) -> bool:
    return match_fence_opener(line) is not None


def _skeleton(text: str) -> str:
    """Content with whitespace and fence delimiter lines removed (what chunking must preserve)."""
    kept = [line for line in text.split("\n") if not _is_fence_line(line)]
    return re.sub(r"\s+", "", "".join(kept))


def _fences_balanced(chunk: str) -> bool:
    return all(span.closed for span in parse_fence_spans(chunk))


@pytest.mark.parametrize("seed", range(60))
def test_invariants_on_plain_text(seed: int) -> None:
    rng = random.Random(seed)
    config = _random_config(rng)
    text = _document(rng, with_fences=False)
    soft, chunks = _stream_through(config, text, rng)
    for chunk in chunks:
        assert chunk.strip(), "no blank chunk"
        assert not chunk.startswith("\n"), chunk
        assert len(chunk) <= config.max_chars, (config, chunk)
    for chunk in soft:
        # A cut inside a run of blank lines counts that run (at most two characters here)
        # towards min_chars, and trailing whitespace is dropped from the chunk.
        assert len(chunk) + 2 >= config.min_chars, (config, chunk)
    assert _skeleton("\n".join(chunks)) == _skeleton(text)


@pytest.mark.parametrize("seed", range(150))
def test_invariants_on_text_with_fences(seed: int) -> None:
    rng = random.Random(1000 + seed)
    config = _random_config(rng)
    text = _document(rng, with_fences=True)
    _, chunks = _stream_through(config, text, rng)
    longest_fence_line = max(
        (len(line) for line in text.split("\n") if _is_fence_line(line)), default=0
    )
    for chunk in chunks:
        assert chunk.strip(), "no blank chunk"
        assert not chunk.startswith("\n"), chunk
        assert _fences_balanced(chunk), (config, chunk)
        # Over max only by the fence line(s) a split adds, or a closing line kept whole.
        assert len(chunk) <= config.max_chars + 2 * longest_fence_line + 2, (config, chunk)
    assert _skeleton("\n".join(chunks)) == _skeleton(text)


@pytest.mark.parametrize("seed", range(40))
def test_chunks_never_split_code_lines_when_lines_fit(seed: int) -> None:
    rng = random.Random(5000 + seed)
    config = BlockChunkingConfig(min_chars=rng.randint(1, 40), max_chars=rng.randint(60, 160))
    text = _document(rng, with_fences=True)
    _, chunks = _stream_through(config, text, rng)
    code_lines = {
        line
        for span in parse_fence_spans(text)
        for line in text[span.open_line_end + 1 : span.close_line_start].split("\n")
        if line.strip()
    }
    emitted_code_lines = {
        line
        for chunk in chunks
        for span in parse_fence_spans(chunk)
        for line in chunk[span.open_line_end + 1 : span.close_line_start].split("\n")
        if line.strip()
    }
    assert emitted_code_lines <= code_lines


# --- coalescer and deduper ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("preference", "joiner"),
    [
        (BreakPreference.PARAGRAPH, "\n\n"),
        (BreakPreference.NEWLINE, "\n"),
        (BreakPreference.SENTENCE, " "),
    ],
)
def test_coalescer_joiner(preference: BreakPreference, joiner: str) -> None:
    assert coalescer_joiner(preference) == joiner


def test_coalescer_holds_until_min_then_flushes_joined() -> None:
    coalescer = BlockCoalescer(min_chars=10, max_chars=100, joiner="\n\n")
    assert coalescer.add("one", now_ms=0) == []
    assert coalescer.add("two", now_ms=10) == []
    assert coalescer.add("three", now_ms=20) == ["one\n\ntwo\n\nthree"]
    assert coalescer.held_text == ""


def test_coalescer_flushes_before_passing_max() -> None:
    coalescer = BlockCoalescer(min_chars=10, max_chars=12, joiner=" ")
    assert coalescer.add("abcdef", now_ms=0) == []
    assert coalescer.add("ghijkl", now_ms=1) == ["abcdef"]
    assert coalescer.held_text == "ghijkl"


def test_coalescer_flushes_after_idle() -> None:
    coalescer = BlockCoalescer(min_chars=50, max_chars=100, joiner=" ", idle_ms=1000)
    coalescer.add("held", now_ms=0)
    assert coalescer.flush_due(now_ms=999) == []
    assert coalescer.flush_due(now_ms=1000) == ["held"]
    assert coalescer.flush_due(now_ms=5000) == []


def test_deduper_suppresses_consecutive_duplicates_and_tool_sent_texts() -> None:
    deduper = BlockReplyDeduper()
    deduper.note_messaging_tool_text("Sent via tool")
    assert deduper.should_send("Hello")
    assert not deduper.should_send(" Hello \n")
    assert deduper.should_send("World")
    assert deduper.should_send("Hello")
    assert not deduper.should_send("Sent  via\ntool")
    assert not deduper.should_send("   ")
