"""Token usage. "Last call" and "accumulated" are separate on purpose: context accounting uses
the latest call's prompt tokens, billing uses the sum (SPEC §4.3)."""

from __future__ import annotations

from pydantic import BaseModel


class Usage(BaseModel):
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0

    @property
    def total(self) -> int:
        return self.input + self.output + self.cache_read + self.cache_write

    @property
    def prompt_tokens(self) -> int:
        """Prompt-side tokens of one call: what the context window holds."""
        return self.input + self.cache_read + self.cache_write

    def plus(self, other: Usage) -> Usage:
        return Usage(
            input=self.input + other.input,
            output=self.output + other.output,
            cache_read=self.cache_read + other.cache_read,
            cache_write=self.cache_write + other.cache_write,
        )


class RunUsage(BaseModel):
    last_call: Usage = Usage()
    accumulated: Usage = Usage()
    model_calls: int = 0

    def record(self, call: Usage) -> RunUsage:
        return RunUsage(
            last_call=call,
            accumulated=self.accumulated.plus(call),
            model_calls=self.model_calls + 1,
        )
