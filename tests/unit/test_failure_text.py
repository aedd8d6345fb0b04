"""What a user reads when failover gives up: the model, the profiles, the status, and when the
first profile is ready again; never a key."""

from __future__ import annotations

from pathlib import Path

from agentlane.errors import FailoverReason as R
from workflows.policy.failure_text import chain_exhausted_text, cooling_down_text
from workflows.policy.model_fallback import FallbackAttempt, FallbackSummary

NOW = 1_800_000_000.0


def test_rate_limited_says_when_ready_and_where() -> None:
    text = cooling_down_text(
        model="anthropic/claude",
        reason=R.RATE_LIMIT,
        profiles=["anthropic:a", "anthropic:b"],
        soonest=NOW + 240,
        now=NOW,
        status=429,
    )
    assert text.startswith("⚠️ Rate-limited — ready in ~4 min.")
    assert (
        "(anthropic/claude: HTTP 429, rate_limit; profiles tried: anthropic:a, anthropic:b)" in text
    )


def test_seconds_when_under_a_minute() -> None:
    text = cooling_down_text(
        model="m/x", reason=R.OVERLOADED, profiles=["p"], soonest=NOW + 30, now=NOW
    )
    assert "ready in ~30s" in text


def test_billing_names_the_billing_problem() -> None:
    text = cooling_down_text(
        model="m/x", reason=R.BILLING, profiles=["p"], soonest=NOW + 5 * 3600, now=NOW, status=402
    )
    assert "billing error" in text and "HTTP 402" in text


def test_auth_points_at_the_profiles() -> None:
    text = cooling_down_text(
        model="anthropic/x", reason=R.AUTH, profiles=["anthropic:a"], soonest=NOW + 30, now=NOW
    )
    assert "Every auth profile of anthropic is unavailable (auth)" in text
    assert "agentlane auth list" in text


def test_no_stored_profile_says_default_credentials() -> None:
    text = cooling_down_text(
        model="m/x", reason=R.RATE_LIMIT, profiles=[None], soonest=None, now=NOW
    )
    assert "its default credentials" in text and "All models are temporarily rate-limited" in text


def test_chain_exhausted_lists_every_model() -> None:
    summary = FallbackSummary(
        "All models failed (2): a/x: boom (rate_limit) | b/y: boom (rate_limit)",
        (
            FallbackAttempt("a", "x", "boom", R.RATE_LIMIT),
            FallbackAttempt("b", "y", "boom", R.RATE_LIMIT),
        ),
        NOW + 90,
    )
    text = chain_exhausted_text(summary, now=NOW)
    assert text.startswith("⚠️ Rate-limited — ready in ~2 min.")
    assert text.endswith("b/y: boom (rate_limit)")


def test_no_message_a_user_reads_names_a_chat_command_this_engine_lacks() -> None:
    """The original's texts send users to /new, /reset and /think; here they name the command
    that does it: `agentlane reset <session>`, or the session's thinking setting."""
    import re

    from activities.context.compaction_plan import check_baseline
    from activities.providers import error_classification as texts
    from workflows.policy import failover, model_fallback
    from workflows.policy.failure_text import in_this_engine

    originals = [
        failover.RETRY_LIMIT_TEXT,
        failover.CONTEXT_OVERFLOW_TEXT,
        failover.ROLE_ORDERING_TEXT,
        model_fallback.GENERIC_FAILURE_REPLY,
        model_fallback.ROLE_ORDERING_REPLY,
        texts.CONTEXT_OVERFLOW_TEXT,
        texts.ROLE_ORDERING_TEXT,
        texts.REASONING_REQUIRED_TEXT,
        check_baseline(
            context_window=16_000, system_prompt_tokens=20_000, summary_tokens=0, kept_tokens=0
        ).message
        or "",
    ]
    for text in originals:
        assert re.search(r"/(new|reset|think|compact)\b", text), "still the original's words"
        ours = in_this_engine(text)
        assert not re.search(r"/(new|reset|think|compact)\b", ours), ours
        assert "reset the session (`agentlane reset <session>`)" in ours.lower() or (
            "`thinking`" in ours
        ), ours
        assert "new session key" not in ours, ours


def test_reset_advice_reads_as_a_sentence_and_names_the_session_when_known() -> None:
    from workflows.policy import failover, model_fallback
    from workflows.policy.failure_text import in_this_engine

    assert in_this_engine(failover.CONTEXT_OVERFLOW_TEXT) == (
        "Context overflow: prompt too large for the model. Reset the session "
        "(`agentlane reset <session>`), or use a larger-context model."
    )
    assert in_this_engine(model_fallback.GENERIC_FAILURE_REPLY, "slack:T1:C42").endswith(
        "Please try again, or reset the session (`agentlane reset slack:T1:C42`)."
    )
    assert in_this_engine(failover.ROLE_ORDERING_TEXT).endswith(
        "If this persists, reset the session (`agentlane reset <session>`)."
    )


def test_the_cli_help_uses_the_same_words() -> None:
    from agentlane.branches import RESET_ADVICE, RESET_COMMAND
    from clients.cli import build_parser

    help_text = build_parser().format_help()
    assert "reset the session: later messages start afresh" in help_text
    assert f"reset the session (`{RESET_COMMAND}`)" == RESET_ADVICE
    readme = " ".join((Path(__file__).parents[2] / "README.md").read_text().split())
    assert f"**reset the session** (`{RESET_COMMAND}`" in readme
    assert "later messages start afresh" in readme
    assert f'"Reset the session (`{RESET_COMMAND}`)"' in readme


def test_a_short_cooldown_is_said_in_seconds() -> None:
    def said(left: float) -> str:
        return cooling_down_text(
            model="foa/m", reason=R.AUTH, profiles=["foa:k1"], soonest=100 + left, now=100
        )

    assert "usable again in 6 s." in said(6)
    assert "usable again in ~3 min." in said(170)
