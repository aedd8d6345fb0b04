"""What a run's and a session's page say (workflows/policy/run_details.py) and their static
details (agentlane/static_details.py)."""

from __future__ import annotations

from agentlane.entry_source import EntrySource
from agentlane.messages import Routing
from agentlane.run import ExecutionRequest, ModelRef, UserTurn
from agentlane.static_details import run_details, session_details
from workflows.policy import run_details as page

NOON = 1_795_608_000.0  # 12:00:00 UTC
NOW = NOON + 53 * 60 + 24  # 12:53:24


def test_clock_is_utc_time_of_day() -> None:
    assert page.clock(NOW) == "12:53:24"
    assert page.clock(NOON - 1) == "11:59:59"
    assert page.clock(NOW + 0.9) == "12:53:24"


def test_turns_count_from_one_as_the_cli_does() -> None:
    assert page.calling(2, "anthropic/claude-sonnet-4-5") == (
        "turn 3: calling anthropic/claude-sonnet-4-5"
    )


def test_a_running_tool_names_its_command_as_code_and_since_when() -> None:
    assert page.running_tool(2, "exec", "exec pytest -q", NOW) == (
        "turn 3: exec `pytest -q` since 12:53:24"
    )
    assert page.running_tool(0, "read", "read", NOW) == "turn 1: read since 12:53:24"
    # A command with backticks stays one code span.
    assert page.running_tool(0, "exec", "exec echo `date`", NOW) == (
        "turn 1: exec `` echo `date` `` since 12:53:24"
    )


def test_a_wait_says_until_when() -> None:
    text = "a profile of anthropic is cooling down (rate_limit); waiting 60 s"
    assert page.step(2, text, NOW + 60) == f"turn 3: {text} (until 12:54:24)"
    assert page.step(0, "compacting the context") == "turn 1: compacting the context"


def test_the_page_puts_what_it_does_first_then_which_run() -> None:
    assert page.run_page("turn 1: calling m", "session:k:run:2", "openai/gpt") == (
        "turn 1: calling m\n\nrun **session:k:run:2** on openai/gpt"
    )


def test_the_end_says_the_outcome_with_its_reason_and_message() -> None:
    text = page.ended(
        "r1",
        "error",
        "error",
        turns=1,
        tokens=327,
        cost="$0.01",
        message="Could not connect to the model provider at http://127.0.0.1:9/v1 " + "x" * 400,
    )
    first, _, message = text.partition("\n\n")
    assert first == "run **r1** error (error): 1 turn, 327 tokens, cost $0.01"
    assert message.startswith("Could not connect to the model provider at http://127.0.0.1:9/v1")
    assert len(message) == page.MESSAGE_CHARS
    assert "\n\n" not in page.ended("r1", "success", "no_tool_calls", turns=4, tokens=9, cost="-")


def test_the_session_says_idle_since_or_which_run_and_what_waits() -> None:
    assert page.session_idle(NOW) == "idle since 12:53:24"
    assert page.session_idle(NOW, "**r**: success (no_tool_calls)") == (
        "idle since 12:53:24; last run **r**: success (no_tool_calls)"
    )
    assert page.session_running(3, "r3", NOW, 0) == "running run 3 (**r3**) since 12:53:24"
    assert page.session_running(3, "r3", NOW, 2).endswith("; 2 messages queued")
    assert page.session_running(3, "r3", NOW, 1).endswith("; 1 message queued")


def test_session_static_details_list_what_is_known() -> None:
    text = session_details(
        workspace="/w",
        model="openai/gpt",
        agent="main",
        channel=None,
        created_by="agentlane-cli bob@host",
        sender="bob",
    )
    assert text.splitlines() == [
        "- **workspace:** `/w`",
        "- **model:** openai/gpt",
        "- **agent:** main",
        "- **created by:** agentlane-cli bob@host",
        "- **first sender:** bob",
    ]


def _request(*texts: str, **extra: object) -> ExecutionRequest:
    return ExecutionRequest(
        session_key="k",
        run_id="session:k:run:1",
        run_number=1,
        workspace="/w",
        model=ModelRef(provider="anthropic", model="claude"),
        prompt=[
            UserTurn(entry_id=f"e{i}", text=t, sender="ann", routing=Routing(channel="slack"))
            for i, t in enumerate(texts)
        ],
        **extra,  # type: ignore[arg-type]
    )


def test_run_static_details_name_model_source_sender_messages_and_prompt() -> None:
    text = run_details(_request("fix the build", "and   the tests"), queued_behind=2)
    assert "- **model:** anthropic/claude" in text
    assert "- **source:** chat" in text
    assert "- **sender:** ann" in text
    assert "- **channel:** slack" in text
    assert "- **messages:** 2" in text
    assert "- **queued behind it:** 2" in text
    assert text.endswith("\n\n> fix the build / and the tests")


def test_run_static_details_cut_and_redact_the_prompt() -> None:
    text = run_details(_request("deploy with API_KEY=hunter2hunter2 " + "word " * 100))
    preview = text.partition("\n\n> ")[2]
    assert "hunter2hunter2" not in preview and "API_KEY=<redacted>" in preview
    assert len(preview) <= 120 and preview.endswith("…")
    assert "messages" not in text  # one message: the usual case, not spelled out


def test_sub_agent_runs_say_depth_and_parent() -> None:
    text = run_details(
        _request("task", spawn_depth=1, spawned_by="session:p:run:4", source=EntrySource.SUBAGENT)
    )
    assert "- **sub-agent depth:** 1" in text
    assert "- **spawned by:** session:p:run:4" in text
