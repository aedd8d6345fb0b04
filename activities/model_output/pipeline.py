"""What the model-call activity runs every streamed delta through before a user sees it.

Think/final tags are stripped (their content becomes reasoning), the text is normalised as it
streams (heartbeat and silent-reply tokens never flash up), reasoning is delivered per the
reasoning mode, and block replies are cut by the fence-aware chunker.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from activities.model_output.block_chunker import BlockChunker, BlockChunkingConfig
from activities.model_output.normalization import StreamingNormalizer, normalize_text
from activities.model_output.think_tags import (
    ReasoningMode,
    ThinkTagStreamStripper,
    format_reasoning_message,
)


@dataclass
class Emission:
    visible: str = ""  # text to append to what the user sees
    reset_visible: bool = False  # what the user saw is wrong: drop it, then show `visible`
    reasoning: str = ""  # reasoning to stream (mode `stream` only)
    blocks: list[str] = field(default_factory=list)  # block replies now complete
    # Which of `blocks` is the reasoning block of mode `on` (None: none is).
    reasoning_index: int | None = None


class OutputPipeline:
    def __init__(
        self,
        reasoning_mode: ReasoningMode = ReasoningMode.OFF,
        enforce_final_tag: bool = False,
        chunking: BlockChunkingConfig | None = None,
    ) -> None:
        self.mode = reasoning_mode
        self._stripper = ThinkTagStreamStripper(enforce_final_tag=enforce_final_tag)
        self._chunker = BlockChunker(chunking or BlockChunkingConfig())
        self._normalized = StreamingNormalizer()
        self.stripped = ""  # the answer without reasoning tags: what the transcript keeps
        self.visible = ""  # what the user has been shown
        self.reasoning = ""
        self._reasoning_block_sent = False

    def text(self, delta: str) -> Emission:
        part = self._stripper.feed(delta)
        return self._advance(part.text, part.reasoning, final=False)

    def native_reasoning(self, delta: str) -> Emission:
        self.reasoning += delta
        return Emission(reasoning=delta if self.mode == ReasoningMode.STREAM else "")

    def finish(self) -> Emission:
        part = self._stripper.finish()
        return self._advance(part.text, part.reasoning, final=True)

    @property
    def final_text(self) -> str:
        """The user-facing reply; empty for a silent reply or a bare heartbeat."""
        return normalize_text(self.stripped) or ""

    def _advance(self, text: str, reasoning: str, final: bool) -> Emission:
        out = Emission()
        if reasoning:
            self.reasoning += reasoning
            if self.mode == ReasoningMode.STREAM:
                out.reasoning = reasoning
        self.stripped += text
        normalised = (normalize_text if final else self._normalized)(self.stripped) or ""
        shown = self.visible
        if normalised.startswith(shown):
            out.visible = normalised[len(shown) :]
            self.visible = normalised
        elif not shown.startswith(normalised) or (final and shown[len(normalised) :].strip()):
            # Diverged, or the final text lacks more than whitespace that was shown (a token
            # in HTML emphasis is only recognised once complete): show the final text instead.
            out.reset_visible = True
            out.visible = normalised
            self.visible = normalised
        # (A final text that is only a trimmed version of what was shown changes nothing.)
        if out.visible or final:
            self._reasoning_block(out)
        if out.reset_visible:
            self._rechunk(shown, normalised)
            out.blocks += self._chunker.drain()
        elif out.visible:
            self._chunker.append(out.visible)
            out.blocks += self._chunker.drain()
        if final:
            out.blocks += self._chunker.drain(force=True)
        return out

    def _rechunk(self, shown: str, replacement: str) -> None:
        """Swap what was shown for its replacement in the text not yet cut into blocks."""
        common = len(os.path.commonprefix([shown, replacement]))
        dropped = shown[common:]
        buffered = self._chunker.buffered_text
        if dropped and buffered.endswith(dropped):
            self._chunker.reset()
            self._chunker.append(buffered[: len(buffered) - len(dropped)])
        self._chunker.append(replacement[common:])

    def _reasoning_block(self, out: Emission) -> None:
        # Mode `on`: reasoning arrives as its own block before the answer's first block.
        if self.mode != ReasoningMode.ON or self._reasoning_block_sent or not self.reasoning:
            return
        block = format_reasoning_message(self.reasoning)
        if block:
            out.reasoning_index = len(out.blocks)
            out.blocks.append(block)
        self._reasoning_block_sent = True
