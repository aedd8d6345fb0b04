"""Pricing (issue 12): a call's usage priced with its model's prices, sums that stay exact,
and the one label people see, which never says $0 for a model without prices."""

from __future__ import annotations

import pytest

from agentlane.config import ConfigError, ModelPrices, build_config
from agentlane.pricing import call_cost, cost_label, priced, prices_text, usd_text
from agentlane.usage import Cost, RunUsage, Usage

SONNET = ModelPrices(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)


def test_each_token_kind_has_its_price() -> None:
    usage = Usage(input=1_200, output=350, cache_read=10_000, cache_write=2_000)
    cost = call_cost(usage, SONNET)
    # 1200*3 + 350*15 + 10000*0.3 + 2000*3.75 = 3600 + 5250 + 3000 + 7500 micro-dollars
    assert cost == Cost(usd=0.01935, priced_calls=1)
    assert cost.known == 0.01935


def test_cache_prices_left_out_are_the_input_price() -> None:
    prices = ModelPrices(input=2.0, output=8.0)
    cost = call_cost(Usage(input=1_000, output=100, cache_read=500, cache_write=500), prices)
    assert cost.usd == 0.0048  # (1000 + 500 + 500) * 2 + 100 * 8


def test_no_prices_is_unpriced_and_zero_prices_are_free() -> None:
    usage = Usage(input=5_000, output=500)
    unpriced = call_cost(usage, None)
    assert unpriced == Cost(unpriced_calls=1) and unpriced.known is None
    free = call_cost(usage, ModelPrices(input=0, output=0))
    assert free == Cost(usd=0.0, priced_calls=1) and free.known == 0.0
    assert cost_label(unpriced) == "unpriced"
    assert cost_label(free) == "$0"


def test_priced_sets_the_cost_and_replaces_any_earlier_one() -> None:
    usage = Usage(input=1_000, output=1_000, cost=Cost(usd=9.0, priced_calls=4))
    assert priced(usage, SONNET).cost == Cost(usd=0.018, priced_calls=1)
    assert priced(usage, SONNET).input == 1_000


def test_sums_are_exact_whatever_the_grouping() -> None:
    """A run that continues as new sums its calls in other groups than one that does not: the
    totals must be the same float, so carried sums can be compared with ==."""
    calls = [
        priced(Usage(input=1_000 + 37 * i, output=250 + 11 * i, cache_read=3 * i), SONNET)
        for i in range(40)
    ]
    one = RunUsage()
    for call in calls:
        one = one.record(call)
    first, second = RunUsage(), RunUsage()
    for call in calls[:17]:
        first = first.record(call)
    for call in calls[17:]:
        second = second.record(call)
    grouped = first.accumulated.plus(second.accumulated)
    assert one.accumulated.cost == grouped.cost
    assert one.accumulated.cost.priced_calls == 40
    micro = sum(c.input * 3 + c.output * 15 + c.cache_read * 0.3 for c in calls)
    assert one.accumulated.cost.usd == round(micro / 1_000_000, 10)


def test_mixed_sums_count_the_unpriced_calls() -> None:
    cost = Cost().plus(call_cost(Usage(input=1_000, output=500), SONNET))
    cost = cost.plus(call_cost(Usage(input=9_999), None)).plus(call_cost(Usage(), None))
    assert cost == Cost(usd=0.0105, priced_calls=1, unpriced_calls=2)
    assert cost_label(cost) == "$0.0105 (+2 unpriced calls)"
    assert (
        cost_label(
            cost.plus(Cost(usd=0.5, priced_calls=1)).model_copy(update={"unpriced_calls": 1})
        )
        == "$0.5105 (+1 unpriced call)"
    )
    # Unpriced plus unpriced stays unpriced, never $0.
    assert cost_label(Cost(unpriced_calls=2).plus(Cost(unpriced_calls=1))) == "unpriced"
    assert cost_label(Cost()) == "unpriced"


@pytest.mark.parametrize(
    ("usd", "text"),
    [
        (0.0, "$0"),
        (0.01936, "$0.0194"),
        (0.0001, "$0.0001"),
        (0.0000123, "$0.000012"),
        (0.000003, "$0.0000030"),
        (0.9999, "$0.9999"),
        (1.0, "$1.00"),
        (1234.567, "$1,234.57"),
    ],
)
def test_dollars_for_people(usd: float, text: str) -> None:
    assert usd_text(usd) == text


def test_summariser_calls_count_toward_the_run_but_not_its_context() -> None:
    run = RunUsage().record(priced(Usage(input=1_000, output=100), SONNET))
    run = run.spend(priced(Usage(input=4_000, output=400), SONNET))
    assert run.model_calls == 1
    assert run.last_call.input == 1_000
    assert run.accumulated.input == 5_000
    assert run.accumulated.cost == Cost(usd=0.0225, priced_calls=2)


def test_config_prices_catalogue_user_models_and_offline() -> None:
    raw = {
        "models": [
            {"provider": "ollama", "id": "qwen3:8b", "api": "openai-compatible"},
            {
                "provider": "local",
                "id": "free",
                "api": "openai-compatible",
                "prices": {"input": 0, "output": 0},
            },
            {"provider": "anthropic", "id": "claude-haiku-4-5", "prices": {"input": 2}},
        ]
    }
    config = build_config(raw, {})
    assert config.model("ollama/qwen3:8b").prices is None
    assert config.model("offline/planner").prices is None
    assert config.model("local/free").prices == ModelPrices(input=0, output=0)
    haiku = config.model("anthropic/claude-haiku-4-5").prices
    assert haiku is not None and haiku.input == 2 and haiku.output == 5.0  # merged field by field
    sonnet = config.model("anthropic/claude-sonnet-4-5").prices
    assert sonnet is not None and sonnet.cache_write == 3.75
    assert prices_text(config.model("ollama/qwen3:8b").prices) == "unpriced"
    assert prices_text(sonnet) == "$3/$15 per Mtok in/out, cache $0.3/$3.75 read/write"


def test_a_price_list_without_an_output_price_is_an_error() -> None:
    raw = {
        "models": [{"provider": "x", "id": "y", "api": "openai-compatible", "prices": {"input": 1}}]
    }
    with pytest.raises(ConfigError, match=r"models\[0\]\.prices\.output"):
        build_config(raw, {})


def test_a_compaction_found_done_reports_the_cost_its_marker_recorded() -> None:
    """A retried compaction activity whose first attempt wrote the marker makes no summariser
    call: it reports what the marker recorded, so the run counts the summary once."""
    from activities.context.compaction import _recorded
    from agentlane.transcript import Role, TranscriptEntry

    spent = priced(Usage(input=5_000, output=400), ModelPrices(input=1, output=5))
    marker = TranscriptEntry(
        id="run:1:c:compaction1",
        role=Role.COMPACTION,
        ts=0.0,
        text="summary",
        meta={"usage": spent.model_dump(mode="json", exclude_defaults=True)},
    )
    assert _recorded(marker).usage == spent
    assert _recorded(marker).usage.cost == Cost(usd=0.007, priced_calls=1)
    # Markers written before costs were recorded read as no usage.
    assert _recorded(marker.model_copy(update={"meta": {}})).usage == Usage()
