"""What model calls cost: a call's token usage priced with its model's prices, and the one way a
cost is written for people (status, the CLI, the Temporal UI).

A model without prices is unpriced: its calls are counted, and a cost that covers none of them
reads "unpriced", never "$0". A model whose prices are explicitly 0 (a local model declared free)
is priced, at $0.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from agentlane.usage import USD_DECIMALS, Cost, Usage

if TYPE_CHECKING:  # workflows import the labels: no config loader in their sandbox
    from agentlane.config import ModelPrices

PER_TOKENS = 1_000_000  # prices are US dollars per million tokens


def call_cost(usage: Usage, prices: ModelPrices | None) -> Cost:
    """The cost of one call. The usage's token kinds are disjoint (input excludes cached
    tokens), so each is priced on its own."""
    if prices is None:
        return Cost(unpriced_calls=1)
    cache_read = prices.input if prices.cache_read is None else prices.cache_read
    cache_write = prices.input if prices.cache_write is None else prices.cache_write
    micro = (
        usage.input * prices.input
        + usage.output * prices.output
        + usage.cache_read * cache_read
        + usage.cache_write * cache_write
    )
    return Cost(usd=round(micro / PER_TOKENS, USD_DECIMALS), priced_calls=1)


def priced(usage: Usage, prices: ModelPrices | None) -> Usage:
    """One call's usage with its cost set (whatever cost it carried is replaced)."""
    return usage.model_copy(update={"cost": call_cost(usage, prices)})


def usd_text(usd: float) -> str:
    """Dollars for people: cents from $1, four decimals below, and two significant digits below
    $0.0001 so that a small sum never reads as $0.0000."""
    if usd == 0:
        return "$0"
    if usd >= 1:
        return f"${usd:,.2f}"
    if usd >= 0.0001:
        return f"${usd:.4f}"
    decimals = 1 - math.floor(math.log10(usd))
    return f"${usd:.{decimals}f}"


def cost_label(cost: Cost) -> str:
    """ "unpriced" when no call was priced, "$0.0123" when every call was, "$0.0123 (+2 unpriced
    calls)" when some were not."""
    known = cost.known
    if known is None:
        return "unpriced"
    text = usd_text(known)
    if cost.unpriced_calls:
        plural = "" if cost.unpriced_calls == 1 else "s"
        text += f" (+{cost.unpriced_calls} unpriced call{plural})"
    return text


def prices_text(prices: ModelPrices | None) -> str:
    """A model's prices on one line (model listings): input/output, and cache prices when set."""
    if prices is None:
        return "unpriced"
    text = f"${_g(prices.input)}/${_g(prices.output)} per Mtok in/out"
    if prices.cache_read is not None or prices.cache_write is not None:
        read = prices.input if prices.cache_read is None else prices.cache_read
        write = prices.input if prices.cache_write is None else prices.cache_write
        text += f", cache ${_g(read)}/${_g(write)} read/write"
    return text


def _g(value: float) -> str:
    return f"{value:g}"
