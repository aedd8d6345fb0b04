"""Token usage. "Last call" and "accumulated" are separate on purpose: context accounting uses
the latest call's prompt tokens, billing uses the sum (SPEC §4.3)."""

from __future__ import annotations

from pydantic import BaseModel


class Cost(BaseModel):
    """What calls cost in US dollars, priced with the catalogue's model prices when each call
    ended (issue 12). Calls of a model without prices are counted, never priced at 0: a sum that
    covers only some calls says so."""

    # None until a call is priced: an unpriced call has no price, not a price of 0.
    usd: float | None = None
    priced_calls: int = 0
    unpriced_calls: int = 0

    def plus(self, other: Cost) -> Cost:
        return Cost(
            usd=_dollars_sum(self.usd, other.usd),
            priced_calls=self.priced_calls + other.priced_calls,
            unpriced_calls=self.unpriced_calls + other.unpriced_calls,
        )

    @property
    def known(self) -> float | None:
        """The dollars, when at least one call was priced; None: unpriced."""
        return self.usd if self.priced_calls else None


# Sums are rounded to 1e-10 dollars (far below any displayed digit): the decimal figure then has
# one float, so a run's total is the same whatever the grouping of its calls (continue-as-new,
# compaction calls, a session's runs) and a test can compare it with ==.
USD_DECIMALS = 10


def _dollars_sum(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    if b is None:
        return a
    return round(a + b, USD_DECIMALS)


class Usage(BaseModel):
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    # Set on a call's usage by the activity that made the call (agentlane/pricing.py); summed
    # with the tokens.
    cost: Cost = Cost()

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
            cost=self.cost.plus(other.cost),
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

    def spend(self, side: Usage) -> RunUsage:
        """Calls made for the run but not in its conversation (a compaction's summariser): they
        count toward what the run used and cost, not toward its context or its model calls."""
        return self.model_copy(update={"accumulated": self.accumulated.plus(side)})
