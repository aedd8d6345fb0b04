"""Queue decisions and collect batching (SPEC §17; cases T76, T77 of §18.13), queue-mode names
(§17.1) and session-key rules."""

from __future__ import annotations

import pytest

from agentlane.ids import (
    InvalidSessionKey,
    check_session_key,
    events_workflow_id,
    file_safe,
    run_workflow_id,
    session_key_from_workflow_id,
    session_workflow_id,
)
from agentlane.messages import QueueMode, Routing, UnknownQueueMode, parse_queue_mode
from agentlane.run import UserTurn
from agentlane.session import QueuedMessage
from workflows.queue_policy import (
    COLLECT_HEADER,
    Action,
    debounce_remaining_ms,
    decide,
    next_batch,
    remove,
)

SLACK_A = Routing(channel="slack", to="channel:A")
SLACK_B = Routing(channel="slack", to="channel:B")


def queued(
    seq: int,
    text: str,
    mode: QueueMode = QueueMode.COLLECT,
    routing: Routing = SLACK_A,
    sender: str | None = None,
) -> QueuedMessage:
    return QueuedMessage(
        seq=seq,
        mode=mode,
        turn=UserTurn(entry_id=f"u{seq}", text=text, routing=routing, sender=sender),
        enqueued_at=float(seq),
    )


# --- decide (T76) --------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", list(QueueMode))
def test_idle_session_runs_every_mode_now(mode: QueueMode) -> None:
    assert decide(mode, busy=False) is Action.RUN_NOW


@pytest.mark.parametrize(
    ("mode", "action"),
    [
        (QueueMode.COLLECT, Action.QUEUE),
        (QueueMode.FOLLOWUP, Action.QUEUE),
        (QueueMode.STEER, Action.STEER),
        (QueueMode.STEER_BACKLOG, Action.STEER_AND_QUEUE),
        (QueueMode.INTERRUPT, Action.INTERRUPT),
    ],
)
def test_busy_session_action_per_mode(mode: QueueMode, action: Action) -> None:
    assert decide(mode, busy=True) is action


# --- next_batch (T77) ----------------------------------------------------------------------------


def test_empty_queue_has_no_batch() -> None:
    assert next_batch([]) is None


def test_T77_two_collect_items_same_route_become_one_prompt() -> None:
    batch = next_batch([queued(1, "one"), queued(2, "two")])
    assert batch is not None
    assert batch.seqs == [1, 2]
    assert len(batch.turns) == 1
    turn = batch.turns[0]
    assert turn.text == (
        "[Queued messages while agent was busy]\n\n---\nQueued #1\none\n\n---\nQueued #2\ntwo"
    )
    assert turn.text.startswith(COLLECT_HEADER)
    assert turn.routing == SLACK_A


def test_collected_turn_takes_last_items_entry_id_and_sender() -> None:
    batch = next_batch(
        [queued(1, "one", sender="ann"), queued(2, "two", sender="bob"), queued(3, "three")]
    )
    assert batch is not None
    assert batch.seqs == [1, 2, 3]
    assert batch.turns[0].entry_id == "u3"
    assert batch.turns[0].sender is None
    assert "---\nQueued #3\nthree" in batch.turns[0].text


def test_T77_different_channels_run_separately_in_order() -> None:
    queue = [queued(1, "one", routing=SLACK_A), queued(2, "two", routing=SLACK_B)]
    first = next_batch(queue)
    assert first is not None
    assert first.seqs == [1]
    assert [t.text for t in first.turns] == ["one"]
    rest = remove(queue, first.seqs)
    second = next_batch(rest)
    assert second is not None
    assert second.seqs == [2]
    assert [t.text for t in second.turns] == ["two"]
    assert second.turns[0].routing == SLACK_B
    assert next_batch(remove(rest, second.seqs)) is None


def test_T77_same_thread_is_collected_and_thread_kept() -> None:
    route = Routing(channel="slack", to="channel:A", thread="1706000000.000001")
    batch = next_batch([queued(1, "one", routing=route), queued(2, "two", routing=route)])
    assert batch is not None
    assert batch.seqs == [1, 2]
    assert batch.turns[0].routing.thread == "1706000000.000001"
    assert COLLECT_HEADER in batch.turns[0].text


def test_T77_different_threads_are_separate() -> None:
    a = Routing(channel="slack", to="channel:A", thread="t1")
    b = Routing(channel="slack", to="channel:A", thread="t2")
    batch = next_batch([queued(1, "one", routing=a), queued(2, "two", routing=b)])
    assert batch is not None
    assert batch.seqs == [1]
    assert batch.turns[0].text == "one"


def test_different_account_is_a_different_route() -> None:
    other = Routing(channel="slack", to="channel:A", account="acct2")
    batch = next_batch([queued(1, "one"), queued(2, "two", routing=other)])
    assert batch is not None
    assert batch.seqs == [1]


def test_collect_merges_only_consecutive_items() -> None:
    queue = [
        queued(1, "a1"),
        queued(2, "b1", routing=SLACK_B),
        queued(3, "a2"),
    ]
    batch = next_batch(queue)
    assert batch is not None
    assert batch.seqs == [1]
    assert batch.turns[0].text == "a1"


def test_collect_stops_at_a_non_collect_item() -> None:
    queue = [queued(1, "c1"), queued(2, "c2"), queued(3, "f", QueueMode.FOLLOWUP), queued(4, "c3")]
    batch = next_batch(queue)
    assert batch is not None
    assert batch.seqs == [1, 2]
    assert "c3" not in batch.turns[0].text
    assert "Queued #2\nc2" in batch.turns[0].text
    rest = remove(queue, batch.seqs)
    follow = next_batch(rest)
    assert follow is not None
    assert follow.seqs == [3]
    assert follow.turns[0].text == "f"


def test_single_collect_item_is_sent_as_is() -> None:
    batch = next_batch([queued(7, "just me")])
    assert batch is not None
    assert batch.seqs == [7]
    assert batch.turns[0].text == "just me"
    assert batch.turns[0].entry_id == "u7"


@pytest.mark.parametrize("mode", [QueueMode.FOLLOWUP, QueueMode.STEER_BACKLOG])
def test_followup_items_never_merge(mode: QueueMode) -> None:
    batch = next_batch([queued(1, "one", mode), queued(2, "two", mode)])
    assert batch is not None
    assert batch.seqs == [1]
    assert batch.turns[0].text == "one"


def test_followup_head_does_not_absorb_collect_items() -> None:
    batch = next_batch([queued(1, "f", QueueMode.FOLLOWUP), queued(2, "c1"), queued(3, "c2")])
    assert batch is not None
    assert batch.seqs == [1]


def test_remove_takes_only_the_given_seqs_and_keeps_order() -> None:
    queue = [queued(i, str(i)) for i in range(1, 6)]
    left = remove(queue, [2, 4])
    assert [q.seq for q in left] == [1, 3, 5]
    assert [q.seq for q in queue] == [1, 2, 3, 4, 5]  # input untouched
    assert remove(queue, []) == queue
    assert [q.seq for q in remove(queue, [99])] == [1, 2, 3, 4, 5]


@pytest.mark.parametrize(
    ("last", "now", "debounce", "expected"),
    [
        (100.0, 100.0, 1000, 1000),
        (100.0, 100.25, 1000, 750),
        (100.0, 101.0, 1000, 0),
        (100.0, 105.0, 1000, 0),
        (100.0, 100.5, 0, 0),
    ],
)
def test_debounce_remaining(last: float, now: float, debounce: int, expected: int) -> None:
    assert debounce_remaining_ms(last, now, debounce) == expected


# --- parse_queue_mode (§17.1) --------------------------------------------------------------------


@pytest.mark.parametrize("mode", list(QueueMode))
def test_canonical_names_parse(mode: QueueMode) -> None:
    assert parse_queue_mode(mode.value) is mode
    assert parse_queue_mode(f"  {mode.value.upper()} ") is mode


@pytest.mark.parametrize(
    ("raw", "mode"),
    [
        ("queue", QueueMode.STEER),
        ("queued", QueueMode.STEER),
        ("steering", QueueMode.STEER),
        ("interrupts", QueueMode.INTERRUPT),
        ("abort", QueueMode.INTERRUPT),
        ("follow-ups", QueueMode.FOLLOWUP),
        ("followups", QueueMode.FOLLOWUP),
        ("follow-up", QueueMode.FOLLOWUP),
        ("coalesce", QueueMode.COLLECT),
        ("steer+backlog", QueueMode.STEER_BACKLOG),
        ("steer_backlog", QueueMode.STEER_BACKLOG),
        ("Steer+Backlog", QueueMode.STEER_BACKLOG),
        (" Abort ", QueueMode.INTERRUPT),
    ],
)
def test_aliases(raw: str, mode: QueueMode) -> None:
    assert parse_queue_mode(raw) is mode


@pytest.mark.parametrize("raw", ["", "later", "drop", "steer backlog", "collected"])
def test_unknown_mode_is_an_error_listing_valid_modes(raw: str) -> None:
    with pytest.raises(UnknownQueueMode) as info:
        parse_queue_mode(raw)
    message = str(info.value)
    assert repr(raw) in message
    for mode in QueueMode:
        assert mode.value in message
    assert isinstance(info.value, ValueError)


# --- session keys and workflow ids ---------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    ["main", "a", "slack:C123:thread.1", "user@example.com", "A-b_c.d", "9lives", "x" * 128],
)
def test_valid_session_keys(key: str) -> None:
    assert check_session_key(key) == key


@pytest.mark.parametrize(
    "key",
    [
        "",
        "..",
        "a..b",
        "a/b",
        "/abs",
        "a\\b",
        "x" * 129,
        ".hidden",
        "-flag",
        ":colon",
        "_under",
        "@at",
        "with space",
        "new\nline",
        "tab\t",
        "nul\x00",
        "ünïcode",
    ],
)
def test_invalid_session_keys(key: str) -> None:
    with pytest.raises(InvalidSessionKey, match="invalid session key"):
        check_session_key(key)


def test_trailing_newline_is_not_accepted() -> None:
    # `$` in a regex also matches before a final newline; the key must still be refused.
    with pytest.raises(InvalidSessionKey):
        check_session_key("main\n")


def test_workflow_ids_round_trip() -> None:
    key = "slack:C1:t.2"
    assert session_workflow_id(key) == "session:slack:C1:t.2"
    assert events_workflow_id(key) == "session:slack:C1:t.2:events"
    assert run_workflow_id(key, 3) == "session:slack:C1:t.2:run:3"
    for wid in (session_workflow_id(key), events_workflow_id(key), run_workflow_id(key, 12)):
        assert session_key_from_workflow_id(wid) == key


def test_session_key_from_foreign_workflow_id_is_an_error() -> None:
    with pytest.raises(ValueError, match="not a session workflow id"):
        session_key_from_workflow_id("other:main")


def test_file_safe_maps_colons() -> None:
    assert file_safe("slack:C1:t") == "slack_C1_t"
    assert file_safe("main") == "main"
