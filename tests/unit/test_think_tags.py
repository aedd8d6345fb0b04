"""Think / final tag stripping and reasoning modes (SPEC §16; cases T68, T70, T71 of §18.11)."""

from __future__ import annotations

import random

import pytest

from activities.model_output.think_tags import (
    ReasoningMode,
    ThinkTagStreamStripper,
    format_reasoning_message,
    plan_reasoning_delivery,
    promote_thinking_tags_to_blocks,
    split_reasoning_from_text,
    strip_reasoning_tags_from_text,
)


def stream(pieces: list[str], *, enforce_final_tag: bool = False) -> tuple[str, str]:
    stripper = ThinkTagStreamStripper(enforce_final_tag=enforce_final_tag)
    for piece in pieces:
        stripper.feed(piece)
    stripper.finish()
    return stripper.text, stripper.reasoning


# --- T68: whole-text stripping (shared/text/reasoning-tags.test.ts) ---------------------------

T68_CASES = [
    pytest.param(
        "Hello <think>internal reasoning</think> world!", "Hello  world!", id="T68-inline-block"
    ),
    pytest.param("<think>first</think>A<think>second</think>B", "AB", id="T68-two-blocks"),
    pytest.param("A < think >content< /think > B", "A  B", id="T68-spaces-in-brackets"),
    pytest.param(
        "A <THINK>hidden</THINK> <Thinking>also hidden</Thinking> B",
        "A   B",
        id="T68-case-insensitive",
    ),
    pytest.param(
        "```\n<think>not a tag</think>\n```",
        "```\n<think>not a tag</think>\n```",
        id="T68-backtick-fence-unchanged",
    ),
    pytest.param(
        "~~~\n<think>not a tag</think>\n~~~",
        "~~~\n<think>not a tag</think>\n~~~",
        id="T68-tilde-fence-unchanged",
    ),
    pytest.param(
        "Use `<think>` and `</think>` to mark reasoning.",
        "Use `<think>` and `</think>` to mark reasoning.",
        id="T68-inline-code-unchanged",
    ),
    pytest.param(
        "<think>hidden</think>Visible text with `<think>` example.",
        "Visible text with `<think>` example.",
        id="T68-block-then-inline-code",
    ),
]


@pytest.mark.parametrize(("text", "expected"), T68_CASES)
def test_T68_strip_reasoning_tags_from_text(text: str, expected: str) -> None:
    assert strip_reasoning_tags_from_text(text) == expected


@pytest.mark.parametrize(("text", "expected"), T68_CASES)
def test_T68_streaming_matches_whole_text(text: str, expected: str) -> None:
    visible, _ = stream(list(text))
    assert visible.strip() == expected


# --- T70: final-tag enforcement (filters-final-suppresses-output-without-start-tag) ------------


def test_T70_final_tag_content_is_emitted_as_partial() -> None:
    stripper = ThinkTagStreamStripper(enforce_final_tag=True)
    assert stripper.feed("<final>Hi there</final>").text == "Hi there"
    assert stripper.finish().text == ""


def test_T70_new_message_with_close_but_no_open_emits_nothing() -> None:
    stripper = ThinkTagStreamStripper(enforce_final_tag=True)
    stripper.feed("<final>Hi there</final>")
    stripper.finish()
    stripper.reset()
    assert stripper.feed("</final>Oops no start").text == ""
    assert stripper.finish().text == ""
    assert stripper.text == ""


def test_T70_no_final_tag_means_no_output_even_at_message_end() -> None:
    stripper = ThinkTagStreamStripper(enforce_final_tag=True)
    assert stripper.feed("Hello world").text == ""
    assert stripper.finish().text == ""
    assert stripper.text == ""
    assert not stripper.saw_final_tag


# --- T71: reasoning on, delivered as its own block (emits-reasoning-as-separate-message) -------


def test_T71_reasoning_on_delivers_reasoning_block_then_answer() -> None:
    raw = "<think>\nBecause it helps\n</think>\n\nFinal answer"
    visible, reasoning = stream([raw])
    delivery = plan_reasoning_delivery(ReasoningMode.ON, reasoning, visible)
    assert delivery.block_replies() == ["Reasoning:\n_Because it helps_", "Final answer"]


def test_T71_stored_message_becomes_thinking_then_text() -> None:
    promoted = promote_thinking_tags_to_blocks(
        "<think>\nBecause it helps\n</think>\n\nFinal answer"
    )
    assert promoted.reasoning == "Because it helps"
    assert promoted.text == "Final answer"


# --- tag grammar -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("<thinking>x</thinking>y", "y", id="thinking"),
        pytest.param("<thought>x</thought>y", "y", id="thought"),
        pytest.param("<antthinking>x</antthinking>y", "y", id="antthinking"),
        pytest.param("<antml:thinking>x</antml:thinking>y", "y", id="antml-prefix"),
        pytest.param('<think reason="plan" n=2>x</think>y', "y", id="attributes"),
        pytest.param("<think\n>x</think\n>y", "y", id="newline-inside-brackets"),
        pytest.param("<think/>y", "y", id="self-closing-dropped-without-opening"),
        pytest.param("<final>y</final>", "y", id="final-tags-removed-content-kept"),
        pytest.param("a <thinker>b</thinker>", "a <thinker>b</thinker>", id="other-tag-kept"),
        pytest.param("x<thinkingabout>y", "x<thinkingabout>y", id="longer-name-kept"),
        pytest.param("a < b > c", "a < b > c", id="comparison-kept"),
        pytest.param("<div>html</div>", "<div>html</div>", id="html-kept"),
        pytest.param("1 <3 u", "1 <3 u", id="heart-kept"),
        pytest.param("</think>Answer", "Answer", id="stray-close-dropped"),
    ],
)
def test_tag_grammar(text: str, expected: str) -> None:
    assert strip_reasoning_tags_from_text(text) == expected


def test_first_closing_tag_ends_thinking_not_nesting_aware() -> None:
    reasoning, visible = split_reasoning_from_text("<think>a<think>b</think>c</think>d")
    assert visible == "cd"
    assert reasoning == "ab"


# --- code awareness ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("``a `<think>` b``", "``a `<think>` b``", id="double-backtick-span"),
        pytest.param(
            "```\n<think>x</think>\n```\nafter <think>y</think>done",
            "```\n<think>x</think>\n```\nafter done",
            id="tags-after-closed-fence-are-tags",
        ),
        pytest.param(
            "````\n```\n<think>x</think>\n````\nz",
            "````\n```\n<think>x</think>\n````\nz",
            id="shorter-run-does-not-close-fence",
        ),
        pytest.param(
            "~~~\n```\n<think>x</think>\n~~~\n<think>y</think>z",
            "~~~\n```\n<think>x</think>\n~~~\nz",
            id="backticks-do-not-close-tilde-fence",
        ),
        pytest.param(
            "```js\n```js\n<think>x</think>\n```\nz",
            "```js\n```js\n<think>x</think>\n```\nz",
            id="line-with-info-string-does-not-close",
        ),
        pytest.param(
            "   ```\n<think>x</think>\n   ```", "   ```\n<think>x</think>\n   ```", id="indent-3"
        ),
        pytest.param("    ```\n<think>x</think>y", "    ```\ny", id="indent-4-is-not-a-fence"),
        pytest.param("a ` b <think>x</think> c", "a ` b  c", id="unmatched-backtick-is-literal"),
        pytest.param("a `b\n\n<think>x</think>c`", "a `b\n\nc`", id="code-span-ends-at-blank-line"),
        pytest.param(
            "x <think>y</think> ```npm i <think>``` z",
            "x  ```npm i <think>``` z",
            id="one-line-triple-backtick-is-inline-code",
        ),
        pytest.param(
            "```\n<think>x</think>", "```\n<think>x</think>", id="unclosed-fence-runs-to-end"
        ),
    ],
)
def test_tags_inside_code_are_literal(text: str, expected: str) -> None:
    assert strip_reasoning_tags_from_text(text, trim="none") == expected


def test_fences_inside_reasoning_are_respected() -> None:
    reasoning, visible = split_reasoning_from_text("<think>\n```\n</think>\n```\n</think>answer")
    assert visible == "answer"
    assert "</think>" in reasoning


# --- unclosed blocks: strict vs preserve, trim options -----------------------------------------


@pytest.mark.parametrize(
    ("mode", "trim", "expected"),
    [
        pytest.param("strict", "both", "Answer", id="strict-drops-rest"),
        pytest.param("preserve", "both", "Answer rest of it", id="preserve-keeps-rest"),
        pytest.param("strict", "none", "  Answer ", id="strict-untrimmed"),
        pytest.param("preserve", "start", "Answer rest of it  ", id="preserve-trim-start"),
    ],
)
def test_unclosed_thinking_block(mode: str, trim: str, expected: str) -> None:
    text = "  Answer <think>rest of it  "
    assert strip_reasoning_tags_from_text(text, mode=mode, trim=trim) == expected  # type: ignore[arg-type]


def test_trim_start_keeps_trailing_whitespace() -> None:
    assert strip_reasoning_tags_from_text("  A <think>x</think> B  ", trim="start") == "A  B  "


# --- streaming behaviour -----------------------------------------------------------------------


def test_tag_split_across_deltas() -> None:
    stripper = ThinkTagStreamStripper()
    assert stripper.feed("Hello <thi").text == "Hello "
    assert stripper.held_back == "<thi"
    assert stripper.feed("nk>secret</thi").text == ""
    assert stripper.feed("nk> world").text == " world"
    assert stripper.text == "Hello  world"
    assert stripper.reasoning == "secret"


def test_unclosed_think_block_suppresses_later_deltas_until_closed() -> None:
    stripper = ThinkTagStreamStripper()
    assert stripper.feed("<think>start").text == ""
    assert stripper.feed(" more").text == ""
    assert stripper.in_thinking
    assert stripper.feed(" and more</think>ok").text == "ok"
    assert stripper.reasoning == "start more and more"


def test_partial_tag_at_message_end_is_released_as_text() -> None:
    stripper = ThinkTagStreamStripper()
    assert stripper.feed("a <thi").text == "a "
    assert stripper.finish().text == "<thi"


def test_reasoning_deltas_are_reported_per_feed() -> None:
    stripper = ThinkTagStreamStripper()
    assert stripper.feed("<think>one ").reasoning == "one "
    assert stripper.feed("two</think>A<think>three").reasoning == "two\n\nthree"
    assert stripper.reasoning == "one two\n\nthree"


def test_long_unterminated_angle_bracket_is_not_held_forever() -> None:
    stripper = ThinkTagStreamStripper()
    stripper.feed("<think ")
    delta = stripper.feed("x" * 300)
    assert delta.text.startswith("<think x")
    assert stripper.held_back == ""


def test_reset_forgets_state() -> None:
    stripper = ThinkTagStreamStripper()
    stripper.feed("<think>never closed")
    stripper.reset()
    assert stripper.feed("visible").text == "visible"
    assert stripper.reasoning == ""


# --- final-tag enforcement ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "enforce", "expected_text", "expected_reasoning"),
    [
        pytest.param(
            "<think>plan</think><final>Answer</final>",
            True,
            "Answer",
            "plan",
            id="think-then-final",
        ),
        pytest.param(
            "junk <final>a</final> more junk <final>b</final>", True, "ab", "", id="only-inside"
        ),
        pytest.param("<final>a<think>r</think>b</final>", True, "ab", "r", id="think-in-final"),
        pytest.param(
            "<think><final>x</final></think><final>y</final>",
            True,
            "y",
            "x",
            id="final-inside-thinking-ignored",
        ),
        pytest.param("<final>unclosed answer", True, "unclosed answer", "", id="unclosed-final"),
        pytest.param("plain answer", True, "", "", id="no-final-nothing"),
        pytest.param("`<final>`x", True, "", "", id="final-in-code-is-not-a-tag"),
        pytest.param("a<final>b</final>c", False, "abc", "", id="not-enforced-tags-removed"),
        pytest.param("</final>Oops no start", False, "Oops no start", "", id="not-enforced-stray"),
    ],
)
def test_final_tag_enforcement(
    text: str, enforce: bool, expected_text: str, expected_reasoning: str
) -> None:
    assert stream([text], enforce_final_tag=enforce) == (expected_text, expected_reasoning)


# --- every split point gives the same result (property-style) ----------------------------------

SPLIT_SAMPLES = [
    "Hello <think>internal reasoning</think> world!",
    "A < think >content< /think > B <THINKING a='1'>x</THINKING>!",
    "<thinking>deep</thinking>Answer with `<think>` literal",
    "Intro\n```js\n<think>code</think>\n```\n<think>r</think>after",
    "  ~~~\n<final>x</final>\n  ~~~\ntail <final>y</final>",
    "a `b <think>c</think>` d ``e ` f`` <thought>g</thought>h",
    "<think>one</think>A<think>two</think>B</think>C",
    "x ` y <think>z</think>\n\n` w",
    "<final>Hi <think>hmm</think>there</final> bye",
    "text then <think>unclosed reasoning with `code` and more",
]


@pytest.mark.parametrize("enforce", [False, True], ids=["plain", "enforce-final"])
@pytest.mark.parametrize("sample", SPLIT_SAMPLES)
def test_every_two_way_split_matches_whole(sample: str, enforce: bool) -> None:
    whole = stream([sample], enforce_final_tag=enforce)
    for cut in range(len(sample) + 1):
        assert stream([sample[:cut], sample[cut:]], enforce_final_tag=enforce) == whole, cut


@pytest.mark.parametrize("sample", SPLIT_SAMPLES)
def test_streaming_equals_whole_text_function(sample: str) -> None:
    visible, reasoning = stream(list(sample))
    assert visible == strip_reasoning_tags_from_text(sample, mode="strict", trim="none")
    assert (reasoning, visible) == split_reasoning_from_text(sample)


def test_every_three_way_split_of_a_tagged_sample() -> None:
    sample = "a<think>b</think>`<final>`~~~\n```\n<thinking>c"
    whole = stream([sample])
    for first in range(len(sample) + 1):
        for second in range(first, len(sample) + 1):
            pieces = [sample[:first], sample[first:second], sample[second:]]
            assert stream(pieces) == whole, (first, second)


FUZZ_FRAGMENTS = [
    "<think>", "</think>", "< think >", "<thinking x='1'>", "</thought>", "<final>", "</final>",
    "<thinking>", "`", "``", "```", "~~~", "\n", "\n\n", "  ", "a", "b c", "<", ">", ".",
    "<thinker>", "<think/>",
]  # fmt: skip


def test_random_texts_and_random_splits_match_whole() -> None:
    rng = random.Random(20240416)
    for _ in range(400):
        text = "".join(rng.choice(FUZZ_FRAGMENTS) for _ in range(rng.randint(1, 30)))
        enforce = rng.random() < 0.3
        whole = stream([text], enforce_final_tag=enforce)
        cuts = sorted(rng.sample(range(len(text) + 1), k=min(len(text) + 1, rng.randint(1, 6))))
        pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        assert stream(pieces, enforce_final_tag=enforce) == whole, (text, cuts)
        if not enforce:
            assert whole[0] == strip_reasoning_tags_from_text(text, trim="none"), text


# --- reasoning modes ---------------------------------------------------------------------------


def test_format_reasoning_wraps_each_non_empty_line() -> None:
    formatted = format_reasoning_message("\nLine one\n\n  Line two  \nLine three\n")
    assert formatted == "Reasoning:\n_Line one_\n\n_Line two_\n_Line three_"


def test_format_reasoning_of_nothing_is_none() -> None:
    assert format_reasoning_message(" \n\t") is None


@pytest.mark.parametrize(
    ("mode", "has_stream", "block", "streamed"),
    [
        pytest.param("off", True, None, None, id="off-hidden"),
        pytest.param("on", True, "Reasoning:\n_why_", None, id="on-block-before-answer"),
        pytest.param("stream", True, None, "Reasoning:\n_why_", id="stream-to-consumer"),
        pytest.param("stream", False, None, None, id="stream-without-consumer"),
    ],
)
def test_plan_reasoning_delivery(
    mode: str, has_stream: bool, block: str | None, streamed: str | None
) -> None:
    delivery = plan_reasoning_delivery(mode, "why", " answer ", has_reasoning_stream=has_stream)
    assert delivery.reasoning_block == block
    assert delivery.reasoning_stream == streamed
    assert delivery.answer == "answer"


def test_plan_without_reasoning_or_answer_delivers_nothing() -> None:
    assert plan_reasoning_delivery(ReasoningMode.ON, "", "  ").block_replies() == []


def test_unknown_reasoning_mode_is_rejected() -> None:
    with pytest.raises(ValueError):
        plan_reasoning_delivery("loud", "r", "a")


# --- promoting inline thinking to blocks -------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "reasoning", "visible"),
    [
        pytest.param("  <thinking>r</thinking>  answer", "r", "answer", id="leading-whitespace"),
        pytest.param("Answer <think>r</think>", None, "Answer <think>r</think>", id="not-at-start"),
        pytest.param("`<think>`r", None, "`<think>`r", id="in-code-not-a-tag"),
        pytest.param("<think>unclosed", "unclosed", "", id="unclosed-all-reasoning"),
        pytest.param("plain", None, "plain", id="no-tag"),
    ],
)
def test_promote_thinking_tags_to_blocks(text: str, reasoning: str | None, visible: str) -> None:
    promoted = promote_thinking_tags_to_blocks(text)
    assert (promoted.reasoning, promoted.text) == (reasoning, visible)
