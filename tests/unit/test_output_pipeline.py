"""The per-delta output pipeline: think tags, reasoning modes, silent and heartbeat tokens,
block replies, and that what is shown is exactly what was streamed."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from activities.model_output.block_chunker import BlockChunkingConfig
from activities.model_output.normalization import NormalizationOptions, normalize_streaming_text
from activities.model_output.pipeline import Emission, OutputPipeline
from activities.model_output.think_tags import ReasoningMode


@dataclass
class Seen:
    """What a consumer of the emissions ends up with."""

    visible: str = ""
    reasoning: str = ""
    blocks: list[str] = field(default_factory=list)
    resets: int = 0
    history: list[str] = field(default_factory=list)  # every visible text shown, in order

    def take(self, emission: Emission) -> None:
        if emission.reset_visible:
            self.resets += 1
            self.visible = emission.visible
        else:
            self.visible += emission.visible
        self.history.append(self.visible)
        self.reasoning += emission.reasoning
        self.blocks += emission.blocks


def stream(
    deltas: list[str],
    mode: ReasoningMode = ReasoningMode.OFF,
    chunking: BlockChunkingConfig | None = None,
) -> tuple[OutputPipeline, Seen]:
    pipeline = OutputPipeline(mode, chunking=chunking)
    seen = Seen()
    for d in deltas:
        seen.take(pipeline.text(d))
    seen.take(pipeline.finish())
    return pipeline, seen


def chars(text: str) -> list[str]:
    return list(text)


# --- think tags ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "deltas",
    [
        ["<think>plan it</think>Hello world"],
        ["<thi", "nk>plan it</th", "ink>Hello", " world"],
        chars("<think>plan it</think>Hello world"),
        ["<", "think", ">plan", " it<", "/", "think>", "Hello world"],
    ],
)
def test_think_tags_split_across_deltas_are_stripped(deltas: list[str]) -> None:
    pipeline, seen = stream(deltas)
    assert pipeline.reasoning == "plan it"
    assert pipeline.stripped == "Hello world"
    assert pipeline.final_text == "Hello world"
    assert seen.visible == "Hello world"
    assert all("<" not in shown and "plan" not in shown for shown in seen.history)
    assert seen.reasoning == ""  # mode off: reasoning is kept, never streamed
    assert seen.blocks == ["Hello world"]


def test_unclosed_think_block_hides_the_rest() -> None:
    pipeline, seen = stream(["Answer. <think>second thoughts", " that never end"])
    assert seen.visible.strip() == "Answer."
    assert pipeline.final_text == "Answer."
    assert "second thoughts" in pipeline.reasoning


def test_think_tag_in_code_is_literal() -> None:
    pipeline, seen = stream(chars("Use `<think>` tags"))
    assert pipeline.final_text == "Use `<think>` tags"
    assert seen.visible == "Use `<think>` tags"
    assert pipeline.reasoning == ""


# --- reasoning modes -----------------------------------------------------------------------------


def test_reasoning_mode_off_keeps_reasoning_private() -> None:
    pipeline, seen = stream(["<think>secret plan</think>", "Answer"], ReasoningMode.OFF)
    assert pipeline.reasoning == "secret plan"
    assert seen.reasoning == ""
    assert seen.blocks == ["Answer"]


def test_reasoning_mode_on_sends_a_reasoning_block_before_the_answer() -> None:
    pipeline, seen = stream(["<think>step one\nstep two</think>", "Answer"], ReasoningMode.ON)
    assert seen.reasoning == ""
    assert seen.blocks == ["Reasoning:\n_step one_\n_step two_", "Answer"]
    assert seen.visible == "Answer"


def test_reasoning_mode_on_sends_the_block_once() -> None:
    chunking = BlockChunkingConfig(min_chars=5, max_chars=20)
    pipeline, seen = stream(
        ["<think>why</think>", "First paragraph.\n\n", "Second paragraph.\n\n", "Third."],
        ReasoningMode.ON,
        chunking,
    )
    assert seen.blocks[0] == "Reasoning:\n_why_"
    assert sum(b.startswith("Reasoning:") for b in seen.blocks) == 1
    assert seen.blocks[1:] == ["First paragraph.", "Second paragraph.", "Third."]


def test_reasoning_mode_stream_streams_tag_and_native_reasoning() -> None:
    pipeline = OutputPipeline(ReasoningMode.STREAM)
    seen = Seen()
    seen.take(pipeline.native_reasoning("native "))
    seen.take(pipeline.text("<think>tagged</think>Answer"))
    seen.take(pipeline.finish())
    assert seen.reasoning == "native tagged"
    assert pipeline.reasoning == "native tagged"
    assert seen.visible == "Answer"
    assert seen.blocks == ["Answer"]  # no reasoning block in stream mode


def test_native_reasoning_in_mode_on_becomes_the_block() -> None:
    pipeline = OutputPipeline(ReasoningMode.ON)
    seen = Seen()
    assert pipeline.native_reasoning("thinking hard").reasoning == ""
    seen.take(pipeline.text("Done"))
    seen.take(pipeline.finish())
    assert seen.blocks == ["Reasoning:\n_thinking hard_", "Done"]


def test_reasoning_only_message_in_mode_on_still_sends_the_block() -> None:
    pipeline, seen = stream(["<think>just thinking</think>"], ReasoningMode.ON)
    assert pipeline.final_text == ""
    assert seen.visible == ""
    assert seen.blocks == ["Reasoning:\n_just thinking_"]


# --- silent and heartbeat tokens -----------------------------------------------------------------


@pytest.mark.parametrize(
    "deltas",
    [
        ["NO_REPLY"],
        ["NO", "_REP", "LY"],
        chars("NO_REPLY"),
        chars("**NO_REPLY**"),
        ["NO_REPLY because the user said goodbye"],
        chars("NO_REPLY: nothing to add"),
        ["HEARTBEAT_OK"],
        chars("HEARTBEAT_OK"),
        chars("HEARTBEAT_OK."),
        chars("<b>HEARTBEAT_OK</b>"),
        ["<think>nothing new</think>", "HEART", "BEAT_OK"],
    ],
)
def test_tokens_are_never_visible(deltas: list[str]) -> None:
    pipeline, seen = stream(deltas)
    assert pipeline.final_text == ""
    assert seen.visible == ""
    assert seen.history == [""] * len(seen.history)
    assert seen.blocks == []


@pytest.mark.parametrize(
    ("text", "final"),
    [
        ("Hello NO_REPLY", "Hello"),
        ("Hello **NO_REPLY**", "Hello"),
        ("Hello <b>NO_REPLY</b>", "Hello"),
        ("All good. HEARTBEAT_OK", "All good."),
        ("HEARTBEAT_OK\n\nReminder: call mom", "Reminder: call mom"),
    ],
)
def test_trailing_or_leading_token_is_not_left_visible(text: str, final: str) -> None:
    words = text.split(" ")
    by_word = [w + " " for w in words[:-1]] + words[-1:]
    for deltas in (chars(text), [text], by_word):
        pipeline, seen = stream(deltas)
        assert pipeline.final_text == final
        assert seen.visible.rstrip() == final, deltas
        assert "NO_REPLY" not in seen.visible and "HEARTBEAT_OK" not in seen.visible
        assert [b.strip() for b in seen.blocks] == [final]


def test_partial_token_at_the_end_is_held_back_while_streaming() -> None:
    assert normalize_streaming_text("Hello NO") == "Hello "
    assert normalize_streaming_text("Hello **HEART") == "Hello "
    assert normalize_streaming_text("Done. NO_RE") == "Done. "
    assert normalize_streaming_text("Hello NO\n") == "Hello NO\n"  # a finished word
    assert normalize_streaming_text("HelloNO") == "HelloNO"
    assert normalize_streaming_text("Say NOPE") == "Say NOPE"
    no_tokens = NormalizationOptions(strip_silent=False, strip_heartbeat=False)
    assert normalize_streaming_text("Hello NO", no_tokens) == "Hello NO"


def test_a_word_that_only_looked_like_a_token_is_shown() -> None:
    pipeline, seen = stream(["Say ", "NO", " to that"])
    assert seen.history[1] == "Say "  # "NO" could still have become NO_REPLY
    assert seen.visible == "Say NO to that"
    assert pipeline.final_text == "Say NO to that"
    pipeline, seen = stream(["Just say ", "NO"])
    assert seen.visible == "Just say NO"
    assert seen.resets == 0


# --- block replies -------------------------------------------------------------------------------


def test_blocks_are_emitted_while_streaming_and_the_rest_forced_at_finish() -> None:
    pipeline = OutputPipeline(chunking=BlockChunkingConfig(min_chars=10, max_chars=30))
    first = pipeline.text("Para one is here.\n\nPara two ")
    assert first.blocks == ["Para one is here."]
    second = pipeline.text("is here.\n\nThree")
    assert second.blocks == ["Para two is here."]
    end = pipeline.finish()
    assert end.blocks == ["Three"]
    assert end.visible == ""


def test_short_reply_is_one_block_at_finish() -> None:
    pipeline = OutputPipeline()
    assert pipeline.text("Short answer.").blocks == []
    assert pipeline.finish().blocks == ["Short answer."]


def test_empty_reply_has_no_blocks() -> None:
    pipeline, seen = stream([])
    assert seen.blocks == []
    assert pipeline.final_text == ""


# --- visible text is exactly what was streamed ---------------------------------------------------


LONG = (
    "<think>outline first</think>Here is the plan.\n\n"
    "1. Read the file.\n2. Fix the bug.\n\n"
    "```python\nprint('<think> is literal here')\n```\n\n"
    "Done, see `notes.md` for details."
)


@pytest.mark.parametrize("step", [1, 2, 3, 7, 16, len(LONG)])
def test_visible_text_equals_what_was_streamed(step: int) -> None:
    deltas = [LONG[i : i + step] for i in range(0, len(LONG), step)]
    pipeline, seen = stream(deltas, chunking=BlockChunkingConfig(min_chars=20, max_chars=60))
    assert seen.resets == 0
    assert seen.visible == pipeline.visible
    assert seen.visible.strip() == pipeline.final_text
    assert pipeline.final_text == (
        "Here is the plan.\n\n1. Read the file.\n2. Fix the bug.\n\n"
        "```python\nprint('<think> is literal here')\n```\n\n"
        "Done, see `notes.md` for details."
    )
    assert pipeline.reasoning == "outline first"
    # Each shown text extends the one before it.
    for before, after in zip(seen.history, seen.history[1:], strict=False):
        assert after.startswith(before)
    # The blocks hold all of the answer once, in order (a code block cut in two is closed and
    # reopened, so fence lines are left out of the comparison).
    assert skeleton("\n".join(seen.blocks)) == skeleton(pipeline.final_text)


def skeleton(text: str) -> str:
    return "".join("".join(ln.split()) for ln in text.split("\n") if not ln.startswith("```"))
