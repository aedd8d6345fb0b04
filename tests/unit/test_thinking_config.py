"""`[agents.<id>] thinking`: a level word, normalised; anything else is refused by the loader
(so `agentlane config check` says so) rather than ignored."""

from __future__ import annotations

import pytest

from agentlane.config import ConfigError, build_config
from agentlane.messages import InboundMessage, check_inbound


def test_the_agent_thinking_word_is_normalised() -> None:
    config = build_config({"agents": {"main": {"thinking": "max"}}}, {})
    assert config.agent("main").thinking == "high"
    assert build_config({}, {}).agent("main").thinking == "off"


def test_a_word_that_names_no_level_is_refused() -> None:
    with pytest.raises(ConfigError, match="'hgih' is not a thinking level"):
        build_config({"agents": {"main": {"thinking": "hgih"}}}, {})


def test_a_message_with_an_unknown_level_is_refused_with_the_levels() -> None:
    check_inbound(InboundMessage(text="hi", thinking="Think Harder"))
    with pytest.raises(ValueError, match="thinking level 'hgih' is not one of off, minimal"):
        check_inbound(InboundMessage(text="hi", thinking="hgih"))
