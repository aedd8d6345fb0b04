"""What a retried model attempt may show (`ResumeGuard`) and how a client folds text events into
what the user sees (`MessageView`)."""

from __future__ import annotations

import io

from activities.event_publishing import ResumeGuard, text_delta_template
from agentlane.events import AgentEvent, EventKind
from clients.api import MessageView
from clients.render import TerminalRenderer

# --- ResumeGuard ---------------------------------------------------------------------------------


def test_no_prior_text_publishes_from_the_start() -> None:
    guard = ResumeGuard("")
    assert guard.decided
    assert guard.decide("anything", final=False)
    assert guard.publish_from == 0
    assert not guard.reset


def test_same_prefix_continues_after_it() -> None:
    guard = ResumeGuard("Hello wor")
    assert not guard.decide("Hel", final=False)
    assert not guard.decide("Hello w", final=False)
    assert not guard.decided
    assert guard.decide("Hello world", final=False)
    assert guard.publish_from == len("Hello wor")
    assert not guard.reset
    # Once decided, later text changes nothing.
    assert guard.decide("something else entirely", final=True)
    assert guard.publish_from == len("Hello wor")
    assert not guard.reset


def test_exactly_the_prior_text_decides_without_reset() -> None:
    guard = ResumeGuard("Hello")
    assert guard.decide("Hello", final=False)
    assert guard.publish_from == 5
    assert not guard.reset


def test_divergence_at_the_prior_length_resets() -> None:
    guard = ResumeGuard("Hello wor")
    assert guard.decide("Hello WORLD", final=False)
    assert guard.reset
    assert guard.publish_from == 0


def test_early_divergence_is_detected_before_reaching_the_prior_length() -> None:
    guard = ResumeGuard("Hello world, how are you today?")
    assert not guard.decide("Hello", final=False)
    assert guard.decide("Hello there", final=False)
    assert guard.reset
    assert guard.publish_from == 0


def test_shorter_final_text_resets() -> None:
    guard = ResumeGuard("Hello world")
    assert not guard.decide("Hello", final=False)
    assert guard.decide("Hello", final=True)
    assert guard.reset
    assert guard.publish_from == 0


def test_empty_final_text_after_prior_text_resets() -> None:
    guard = ResumeGuard("Hello")
    assert guard.decide("", final=True)
    assert guard.reset


# --- MessageView ---------------------------------------------------------------------------------


def delta(
    text: str, index: int, message_id: str = "m1", attempt: int = 1, kind: EventKind | None = None
) -> AgentEvent:
    template = text_delta_template("s", "r", message_id, 0, attempt)
    return template.model_copy(
        update={
            "text": text,
            "index": index,
            "event_id": f"{template.event_id}/{index}",
            "kind": kind or EventKind.TEXT_DELTA,
        }
    )


def reset(message_id: str = "m1", attempt: int = 2) -> AgentEvent:
    return AgentEvent(
        kind=EventKind.MESSAGE_RESET,
        event_id=f"{message_id}/message_reset/a{attempt}",
        session_key="s",
        run_id="r",
        message_id=message_id,
    )


def test_deltas_append_by_index() -> None:
    view = MessageView()
    assert view.apply(delta("Hello", 0)) == "Hello"
    assert view.apply(delta(" world", 5)) == " world"
    assert view.texts["m1"] == "Hello world"


def test_overlap_is_ignored_and_only_the_new_suffix_returned() -> None:
    view = MessageView()
    view.apply(delta("Hello wor", 0))
    # A retried attempt re-sends text the user already has.
    assert view.apply(delta("Hello", 0, attempt=2)) == ""
    assert view.apply(delta("Hello wor", 0, attempt=2)) == ""
    assert view.apply(delta("lo world!", 3, attempt=2)) == "ld!"
    assert view.texts["m1"] == "Hello world!"


def test_redelivered_delta_adds_nothing() -> None:
    view = MessageView()
    event = delta("abc", 0)
    assert view.apply(event) == "abc"
    assert view.apply(event) == ""
    assert view.texts["m1"] == "abc"


def test_reset_clears_the_message() -> None:
    view = MessageView()
    view.apply(delta("Wrong answer", 0))
    assert view.apply(reset()) is None
    assert view.texts["m1"] == ""
    assert view.apply(delta("Right", 0, attempt=2)) == "Right"
    assert view.texts["m1"] == "Right"


def test_duplicate_reset_is_not_applied_twice() -> None:
    view = MessageView()
    view.apply(delta("Wrong", 0))
    view.apply(reset())
    view.apply(delta("Right", 0, attempt=2))
    # The same reset delivered again (a resubscribe) must not wipe the newer text.
    assert view.apply(reset()) is None
    assert view.texts["m1"] == "Right"


def test_non_text_events_return_none_and_duplicates_return_none() -> None:
    view = MessageView()
    start = AgentEvent(
        kind=EventKind.MESSAGE_START,
        event_id="m1/message_start",
        session_key="s",
        run_id="r",
        message_id="m1",
    )
    assert view.apply(start) is None
    assert view.apply(start) is None
    tool_end = AgentEvent(
        kind=EventKind.TOOL_EXECUTION_END, event_id="r/tool/c1", session_key="s", run_id="r"
    )
    assert view.apply(tool_end) is None
    assert view.apply(delta("thinking…", 0, kind=EventKind.REASONING_DELTA)) is None
    assert view.texts.get("m1", "") == ""


def test_messages_are_kept_apart() -> None:
    view = MessageView()
    assert view.apply(delta("First message", 0, "m1")) == "First message"
    assert view.apply(delta("Second", 0, "m2")) == "Second"
    assert view.apply(delta(" more", 13, "m1")) == " more"
    assert view.apply(reset("m2")) is None
    assert view.texts == {"m1": "First message more", "m2": ""}


def test_gap_shows_the_new_text() -> None:
    view = MessageView()
    view.apply(delta("abc", 0))
    assert view.apply(delta("xyz", 5)) == "xyz"
    assert view.texts["m1"].endswith("xyz")
    assert len(view.texts["m1"]) == 8


# --- together: a retried attempt as the model-call activity publishes it -------------------------


def publish_attempt(prior: str, chunks: list[str], attempt: int) -> tuple[list[AgentEvent], str]:
    """Mirror of the activity's `deliver`: the guard decides, then deltas go out by index."""
    guard = ResumeGuard(prior)
    events: list[AgentEvent] = []
    shown = 0
    text = ""
    for n, chunk in enumerate(chunks):
        text += chunk
        final = n == len(chunks) - 1
        if guard.decide(text, final):
            if guard.reset:
                events.append(reset(attempt=attempt))
                guard.reset = False
            shown = max(shown, guard.publish_from)
            if len(text) > shown:
                events.append(delta(text[shown:], shown, attempt=attempt))
                shown = len(text)
    return events, text


def test_retried_identical_attempt_shows_each_character_once() -> None:
    view = MessageView()
    first, _ = publish_attempt("", ["Hello ", "wor"], 1)  # then the worker dies
    seen = "".join(view.apply(e) or "" for e in first)
    second, full = publish_attempt("Hello wor", ["Hello ", "wor", "ld!"], 2)
    seen += "".join(view.apply(e) or "" for e in second)
    assert seen == "Hello world!"
    assert view.texts["m1"] == full == "Hello world!"
    assert not any(e.kind == EventKind.MESSAGE_RESET for e in second)


def test_retried_diverging_attempt_resets_then_shows_the_new_text() -> None:
    view = MessageView()
    first, _ = publish_attempt("", ["Hello ", "wor"], 1)
    for e in first:
        view.apply(e)
    second, full = publish_attempt("Hello wor", ["Hi", " there", ", friend"], 2)
    assert second[0].kind == EventKind.MESSAGE_RESET
    for e in second:
        view.apply(e)
    assert view.texts["m1"] == full == "Hi there, friend"


def event(kind: EventKind, event_id: str, **fields: object) -> AgentEvent:
    return AgentEvent(
        kind=kind,
        event_id=event_id,
        session_key="s",
        run_id="r",
        message_id="m",
        **fields,  # type: ignore[arg-type]
    )


def test_terminal_renderer_shows_text_once_and_reasoning_apart() -> None:
    out = io.StringIO()
    renderer = TerminalRenderer(out, color=False)
    renderer.render(event(EventKind.REASONING_DELTA, "m/r/0", text="thinking… ", index=0))
    renderer.render(event(EventKind.TEXT_DELTA, "m/d/0", text="Hello ", index=0))
    renderer.render(event(EventKind.TEXT_DELTA, "m/d/0", text="Hello ", index=0))  # repeated
    renderer.render(event(EventKind.TEXT_DELTA, "m/d/6", text="world", index=6))
    # Piped (no dimming), the reasoning says what it is and the answer starts a line of its own.
    assert out.getvalue() == "(thinking) thinking… \nHello world"


def test_terminal_renderer_shows_the_reasoning_block_of_mode_on_alone() -> None:
    """Review R F-R1: mode `on` carries the reasoning only as a block reply, which the CLI did
    not show; the answer's own blocks repeat its deltas and stay hidden."""
    out = io.StringIO()
    renderer = TerminalRenderer(out, color=False)
    renderer.render(event(EventKind.TEXT_DELTA, "m/d/0", text="Final two.", index=0))
    reasoning = "Reasoning:\n_Second thoughts here_"
    block = event(EventKind.BLOCK_REPLY, "m/block/0", text=reasoning, index=0)
    renderer.render(block.model_copy(update={"data": {"reasoning": True}}))
    renderer.render(event(EventKind.BLOCK_REPLY, "m/block/1", text="Final two.", index=1))
    assert out.getvalue() == f"Final two.\n{reasoning}\n"
