"""Queue policy (SPEC §17; cases T76, T77 of §18.13): names and aliases (§17.1), settings
resolution and the /queue directive (§17.2), decisions (§17.3), dedupe and caps (§17.4), collect
batching and overflow summaries (§17.5); and session-key rules."""

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
from agentlane.queue_drops import DropFate, DroppedMessage
from agentlane.queue_settings import (
    DedupeEntry,
    DedupeMode,
    DropPolicy,
    InvalidQueueDirective,
    OverflowState,
    QueueConfig,
    QueueOptions,
    UnknownDedupeMode,
    UnknownDropPolicy,
    parse_dedupe_mode,
    parse_drop_policy,
    parse_queue_directive,
)
from agentlane.run import UserTurn
from agentlane.session import QueuedMessage
from workflows.policy.queue import (
    COLLECT_HEADER,
    DEDUPE_MAX_KEYS,
    SUMMARY_LINE_CHARS,
    Action,
    after_steer,
    apply_cap,
    backlog_copy,
    check_duplicate,
    debounce_remaining_ms,
    decide,
    dedupe_key,
    drop_fate,
    drops_to_record,
    is_cross_channel,
    item_debounce_ms,
    next_batch,
    overflow_after_run,
    overflow_summary,
    recent_key,
    remember,
    remove,
    resolve_settings,
    summary_line,
    unconsumed_to_requeue,
)

SLACK_A = Routing(channel="slack", to="channel:A")
SLACK_B = Routing(channel="slack", to="channel:B")


def queued(
    seq: int,
    text: str,
    mode: QueueMode = QueueMode.COLLECT,
    routing: Routing = SLACK_A,
    sender: str | None = None,
    message_id: str | None = None,
) -> QueuedMessage:
    return QueuedMessage(
        seq=seq,
        mode=mode,
        turn=UserTurn(entry_id=f"u{seq}", text=text, routing=routing, sender=sender),
        enqueued_at=float(seq),
        message_id=message_id,
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


# --- T76: the original's resolveActiveRunQueueAction, through decide + after_steer -------------


def test_T76_no_active_run_runs_now() -> None:
    assert decide(QueueMode.COLLECT, busy=False) is Action.RUN_NOW


def test_T76_active_collect_enqueues() -> None:
    assert decide(QueueMode.COLLECT, busy=True) is Action.QUEUE


def test_T76_active_steer_falls_back_to_enqueue_when_not_steered() -> None:
    action = decide(QueueMode.STEER, busy=True)
    assert action is Action.STEER
    assert after_steer(action, accepted=False) is Action.QUEUE
    assert after_steer(action, accepted=True) is None


def test_steer_backlog_queues_whether_or_not_steered() -> None:
    action = decide(QueueMode.STEER_BACKLOG, busy=True)
    assert after_steer(action, accepted=True) is Action.QUEUE
    assert after_steer(action, accepted=False) is Action.QUEUE


# --- §17.1 drop policy and dedupe mode names -----------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "policy"),
    [
        ("old", DropPolicy.OLD),
        ("oldest", DropPolicy.OLD),
        ("new", DropPolicy.NEW),
        ("Newest", DropPolicy.NEW),
        ("summary", DropPolicy.SUMMARIZE),
        (" summarize ", DropPolicy.SUMMARIZE),
    ],
)
def test_drop_policy_aliases(raw: str, policy: DropPolicy) -> None:
    assert parse_drop_policy(raw) is policy


@pytest.mark.parametrize("raw", ["", "drop", "older", "summarise"])
def test_unknown_drop_policy_lists_valid_ones(raw: str) -> None:
    with pytest.raises(UnknownDropPolicy) as info:
        parse_drop_policy(raw)
    assert isinstance(info.value, ValueError)
    assert repr(raw) in str(info.value)
    for word in ("old", "oldest", "new", "newest", "summary", "summarize"):
        assert word in str(info.value)


@pytest.mark.parametrize(
    ("raw", "mode"),
    [
        ("message-id", DedupeMode.MESSAGE_ID),
        ("MESSAGE_ID", DedupeMode.MESSAGE_ID),
        ("prompt", DedupeMode.PROMPT),
        ("none", DedupeMode.NONE),
    ],
)
def test_dedupe_mode_names(raw: str, mode: DedupeMode) -> None:
    assert parse_dedupe_mode(raw) is mode


def test_unknown_dedupe_mode_lists_valid_ones() -> None:
    with pytest.raises(UnknownDedupeMode, match="message-id, prompt, none"):
        parse_dedupe_mode("text")


def test_models_accept_aliases_and_reject_unknown_fields() -> None:
    options = QueueOptions.model_validate({"mode": "coalesce", "drop": "oldest", "dedupe": "none"})
    assert options == QueueOptions(
        mode=QueueMode.COLLECT, drop=DropPolicy.OLD, dedupe=DedupeMode.NONE
    )
    config = QueueConfig.model_validate({"by_channel": {"slack": "queue"}, "drop": "newest"})
    assert config.by_channel == {"slack": QueueMode.STEER}
    assert config.drop is DropPolicy.NEW
    with pytest.raises(ValueError):
        QueueOptions.model_validate({"mode": "later"})
    with pytest.raises(ValueError):
        QueueOptions.model_validate({"debounce": 5})
    with pytest.raises(ValueError):
        QueueOptions(cap=0)
    with pytest.raises(ValueError):
        QueueOptions(debounce_ms=-1)


# --- §17.2 settings resolution -------------------------------------------------------------------


def test_defaults_when_nothing_is_set() -> None:
    settings = resolve_settings(None, None, QueueConfig(), None)
    assert settings.mode is QueueMode.COLLECT
    assert settings.debounce_ms == 1000
    assert settings.cap == 20
    assert settings.drop is DropPolicy.SUMMARIZE
    assert settings.dedupe is DedupeMode.MESSAGE_ID


CONFIG = QueueConfig(
    mode=QueueMode.FOLLOWUP,
    by_channel={"Slack": QueueMode.STEER},
    debounce_ms=700,
    debounce_ms_by_channel={"slack": 300},
    cap=9,
    drop=DropPolicy.OLD,
    dedupe=DedupeMode.PROMPT,
)


def test_mode_order_inline_session_channel_config() -> None:
    inline = QueueOptions(mode=QueueMode.INTERRUPT)
    session = QueueOptions(mode=QueueMode.STEER_BACKLOG)
    assert resolve_settings(inline, session, CONFIG, "slack").mode is QueueMode.INTERRUPT
    assert resolve_settings(None, session, CONFIG, "slack").mode is QueueMode.STEER_BACKLOG
    assert resolve_settings(None, None, CONFIG, " SLACK ").mode is QueueMode.STEER
    assert resolve_settings(None, None, CONFIG, "telegram").mode is QueueMode.FOLLOWUP
    assert resolve_settings(None, None, CONFIG, None).mode is QueueMode.FOLLOWUP


def test_debounce_order_and_clamp() -> None:
    inline = QueueOptions(debounce_ms=0)
    session = QueueOptions(debounce_ms=50)
    assert resolve_settings(inline, session, CONFIG, "slack").debounce_ms == 0
    assert resolve_settings(None, session, CONFIG, "slack").debounce_ms == 50
    assert resolve_settings(None, None, CONFIG, "slack").debounce_ms == 300
    assert resolve_settings(None, None, CONFIG, "discord").debounce_ms == 700
    # The config file refuses these (strict config); the resolver still clamps what it is given.
    negative = QueueConfig.model_construct(
        **{**QueueConfig().__dict__, "debounce_ms": -5, "debounce_ms_by_channel": {"slack": -1}}
    )
    assert resolve_settings(None, None, negative, "slack").debounce_ms == 0
    assert resolve_settings(None, None, negative, None).debounce_ms == 0


def test_cap_drop_dedupe_order_and_cap_minimum() -> None:
    inline = QueueOptions(cap=2, drop=DropPolicy.NEW, dedupe=DedupeMode.NONE)
    session = QueueOptions(cap=5, drop=DropPolicy.SUMMARIZE, dedupe=DedupeMode.MESSAGE_ID)
    first = resolve_settings(inline, session, CONFIG, None)
    assert (first.cap, first.drop, first.dedupe) == (2, DropPolicy.NEW, DedupeMode.NONE)
    second = resolve_settings(None, session, CONFIG, None)
    assert (second.cap, second.drop, second.dedupe) == (
        5,
        DropPolicy.SUMMARIZE,
        DedupeMode.MESSAGE_ID,
    )
    third = resolve_settings(None, None, CONFIG, None)
    assert (third.cap, third.drop, third.dedupe) == (9, DropPolicy.OLD, DedupeMode.PROMPT)
    zero = QueueConfig.model_construct(**{**QueueConfig().__dict__, "cap": 0})
    assert resolve_settings(None, None, zero, None).cap == 1
    with pytest.raises(ValueError):
        QueueConfig(cap=0)


def test_fields_resolve_independently() -> None:
    # A session override of one field leaves the others to the config.
    settings = resolve_settings(QueueOptions(cap=3), QueueOptions(debounce_ms=10), CONFIG, None)
    assert (settings.mode, settings.debounce_ms, settings.cap) == (QueueMode.FOLLOWUP, 10, 3)


# --- §17.2 the /queue directive ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/queue collect", QueueOptions(mode=QueueMode.COLLECT)),
        ("steer+backlog", QueueOptions(mode=QueueMode.STEER_BACKLOG)),
        ("/QUEUE abort", QueueOptions(mode=QueueMode.INTERRUPT)),
        ("mode:followups", QueueOptions(mode=QueueMode.FOLLOWUP)),
        ("/queue:interrupt", QueueOptions(mode=QueueMode.INTERRUPT)),
        ("debounce:500", QueueOptions(debounce_ms=500)),
        ("debounce:500ms", QueueOptions(debounce_ms=500)),
        ("debounce:2s", QueueOptions(debounce_ms=2000)),
        ("debounce:1.5s", QueueOptions(debounce_ms=1500)),
        ("debounce=1m", QueueOptions(debounce_ms=60_000)),
        ("debounce:0", QueueOptions(debounce_ms=0)),
        ("cap:1", QueueOptions(cap=1)),
        ("cap=7", QueueOptions(cap=7)),
        ("drop:oldest", QueueOptions(drop=DropPolicy.OLD)),
        ("drop:summary", QueueOptions(drop=DropPolicy.SUMMARIZE)),
        ("dedupe:prompt", QueueOptions(dedupe=DedupeMode.PROMPT)),
        (
            "/queue followup debounce:2s cap:5 drop:new dedupe:none",
            QueueOptions(
                mode=QueueMode.FOLLOWUP,
                debounce_ms=2000,
                cap=5,
                drop=DropPolicy.NEW,
                dedupe=DedupeMode.NONE,
            ),
        ),
        ("/queue", QueueOptions()),
        ("", QueueOptions()),
    ],
)
def test_queue_directive(text: str, expected: QueueOptions) -> None:
    assert parse_queue_directive(text) == expected


def test_later_directive_words_override_earlier_ones() -> None:
    assert parse_queue_directive("collect steer cap:3 cap:4") == QueueOptions(
        mode=QueueMode.STEER, cap=4
    )


@pytest.mark.parametrize("text", ["/queue default", "reset", "CLEAR", "/queue  reset  "])
def test_queue_directive_reset(text: str) -> None:
    assert parse_queue_directive(text) == "reset"


@pytest.mark.parametrize(
    ("text", "bad"),
    [
        ("/queue later", "later"),
        ("collect soon", "soon"),
        ("debounce:fast", "debounce:fast"),
        ("debounce:-5", "debounce:-5"),
        ("debounce:", "debounce:"),
        ("cap:0", "cap:0"),
        ("cap:many", "cap:many"),
        ("drop:all", "drop:all"),
        ("dedupe:text", "dedupe:text"),
        ("mode:later", "mode:later"),
        ("size:3", "size:3"),
    ],
)
def test_bad_directive_word_is_named_with_what_is_valid(text: str, bad: str) -> None:
    with pytest.raises(InvalidQueueDirective) as info:
        parse_queue_directive(text)
    message = str(info.value)
    assert isinstance(info.value, ValueError)
    assert repr(bad) in message
    for hint in ("collect", "debounce:", "cap:", "drop:", "dedupe:", "reset"):
        assert hint in message


def test_reset_does_not_combine_with_options() -> None:
    with pytest.raises(InvalidQueueDirective, match="no other options"):
        parse_queue_directive("/queue reset collect")


# --- §17.4 dedupe --------------------------------------------------------------------------------


def test_dedupe_key_covers_queue_key_route_and_id() -> None:
    base = dedupe_key("main", SLACK_A, "m1")
    assert base == dedupe_key("main", SLACK_A, " m1 ")
    assert base != dedupe_key("other", SLACK_A, "m1")
    assert base != dedupe_key("main", SLACK_B, "m1")
    assert base != dedupe_key("main", SLACK_A.model_copy(update={"thread": "t"}), "m1")
    assert base != dedupe_key("main", SLACK_A.model_copy(update={"account": "a"}), "m1")
    assert base != dedupe_key("main", SLACK_A, "m2")
    # No separator inside a value can make two routes collide.
    assert dedupe_key("main", Routing(channel="a|b", to="c"), "m") != dedupe_key(
        "main", Routing(channel="a", to="b|c"), "m"
    )


def _recent(item: QueuedMessage, at: float) -> list[DedupeEntry]:
    key = recent_key(item, "main", DedupeMode.MESSAGE_ID)
    assert key is not None
    return remember([], key, at)


def test_redelivery_is_rejected_after_the_queue_drained_until_ttl() -> None:
    first = queued(1, "hi", message_id="m1")
    recent = _recent(first, at=1000.0)
    again = queued(2, "hi", message_id="m1")
    mode = DedupeMode.MESSAGE_ID
    assert check_duplicate([], recent, again, "main", mode, now=1000.0 + 299.9)
    assert not check_duplicate([], recent, again, "main", mode, now=1000.0 + 300.0)


def test_same_id_on_another_thread_or_session_is_not_a_duplicate() -> None:
    recent = _recent(queued(1, "hi", message_id="m1"), at=0.0)
    other_thread = queued(2, "hi", routing=SLACK_A.model_copy(update={"thread": "t2"}))
    other_thread = other_thread.model_copy(update={"message_id": "m1"})
    assert not check_duplicate([], recent, other_thread, "main", DedupeMode.MESSAGE_ID, 1.0)
    same = queued(3, "hi", message_id="m1")
    assert not check_duplicate([], recent, same, "other-session", DedupeMode.MESSAGE_ID, 1.0)
    assert check_duplicate([], recent, same, "main", DedupeMode.MESSAGE_ID, 1.0)


def test_same_id_and_route_already_queued_is_a_duplicate() -> None:
    queue = [queued(1, "hi", message_id="m1")]
    assert check_duplicate(
        queue, [], queued(2, "x", message_id=" m1"), "main", DedupeMode.MESSAGE_ID, 0
    )
    elsewhere = queued(3, "hi", routing=SLACK_B, message_id="m1")
    assert not check_duplicate(queue, [], elsewhere, "main", DedupeMode.MESSAGE_ID, 0)


def test_without_message_id_identical_prompts_are_both_queued() -> None:
    queue = [queued(1, "same text")]
    assert not check_duplicate(queue, [], queued(2, "same text"), "main", DedupeMode.MESSAGE_ID, 0)


def test_prompt_mode_dedupes_identical_text_on_the_same_route() -> None:
    queue = [queued(1, "same text")]
    mode = DedupeMode.PROMPT
    assert check_duplicate(queue, [], queued(2, "same text"), "main", mode, 0)
    assert not check_duplicate(queue, [], queued(2, "same text "), "main", mode, 0)
    assert not check_duplicate(queue, [], queued(2, "same text", routing=SLACK_B), "main", mode, 0)
    # A message with an id is judged by its id only, as in the original.
    with_id = queued(2, "same text", message_id="m9")
    assert not check_duplicate(queue, [], with_id, "main", mode, 0)
    recent = _recent(queued(5, "other", message_id="m9"), at=0.0)
    assert check_duplicate([], recent, with_id, "main", mode, 1.0)


def test_prompt_mode_compares_by_text_a_message_whose_id_a_client_made_up() -> None:
    # Every client gives a message sent without an id one of its own (for its retries): it is no
    # channel's id, so `dedupe:prompt` still judges it by its text.
    queue = [queued(1, "same text", message_id="client-aaa")]
    made_up = queued(2, "same text", message_id="client-bbb")
    mode = DedupeMode.PROMPT
    assert check_duplicate(queue, [], made_up, "main", mode, 0, client_ids_by_text=True)
    assert not check_duplicate(queue, [], made_up, "main", mode, 0)  # sessions recorded before
    channel_id = queued(2, "same text", message_id="slack-123")
    assert not check_duplicate(queue, [], channel_id, "main", mode, 0, client_ids_by_text=True)
    other = queued(2, "other text", message_id="client-ccc")
    assert not check_duplicate(queue, [], other, "main", mode, 0, client_ids_by_text=True)


def test_none_mode_never_dedupes() -> None:
    queue = [queued(1, "same", message_id="m1")]
    recent = _recent(queue[0], at=0.0)
    item = queued(2, "same", message_id="m1")
    assert not check_duplicate(queue, recent, item, "main", DedupeMode.NONE, 1.0)
    assert recent_key(item, "main", DedupeMode.NONE) is None
    assert recent_key(queued(3, "no id"), "main", DedupeMode.MESSAGE_ID) is None


def test_remember_prunes_expired_and_refreshes_existing_keys() -> None:
    recent = remember([], "a", 0.0)
    recent = remember(recent, "b", 100.0)
    recent = remember(recent, "a", 200.0)
    assert [(e.key, e.at) for e in recent] == [("b", 100.0), ("a", 200.0)]
    recent = remember(recent, "c", 400.0)
    assert [e.key for e in recent] == ["a", "c"]  # b was 300 s old: expired
    assert remember(recent, "d", 499.0)[0].key == "a"
    assert remember(recent, "d", 500.0)[0].key == "c"  # a is now 300 s old


def test_remember_keeps_only_the_newest_ten_thousand() -> None:
    recent = [DedupeEntry(key=f"k{i}", at=i / 1000) for i in range(DEDUPE_MAX_KEYS)]
    recent = remember(recent, "new", 20.0)
    assert len(recent) == DEDUPE_MAX_KEYS
    assert recent[0].key == "k1"
    assert recent[-1].key == "new"


# --- §17.4 cap and drop policy -------------------------------------------------------------------


def _full(n: int) -> list[QueuedMessage]:
    return [queued(i, f"message {i}") for i in range(1, n + 1)]


def test_below_cap_accepts_without_change() -> None:
    queue = _full(2)
    out = apply_cap(queue, OverflowState(), cap=3, drop=DropPolicy.NEW)
    assert out.accept_new
    assert out.queue == queue
    assert out.dropped == []
    assert out.overflow == OverflowState()


def test_drop_new_rejects_the_newcomer_and_keeps_the_queue() -> None:
    queue = _full(3)
    out = apply_cap(queue, OverflowState(), cap=3, drop=DropPolicy.NEW)
    assert not out.accept_new
    assert [q.seq for q in out.queue] == [1, 2, 3]
    assert out.dropped == []


def test_drop_old_removes_the_oldest_to_make_room() -> None:
    out = apply_cap(_full(5), OverflowState(), cap=3, drop=DropPolicy.OLD)
    assert out.accept_new
    assert [q.seq for q in out.queue] == [4, 5]
    assert [q.seq for q in out.dropped] == [1, 2, 3]
    assert out.overflow == OverflowState()


def test_drop_summarize_counts_and_summarises_dropped_items() -> None:
    prior = OverflowState(dropped=1, lines=["earlier"])
    queue = [queued(1, "  first\n\tmessage  "), queued(2, "second"), queued(3, "third")]
    out = apply_cap(queue, prior, cap=2, drop=DropPolicy.SUMMARIZE)
    assert out.accept_new
    assert [q.seq for q in out.queue] == [3]
    # Three lines, but only the newest `cap` (2) are kept.
    assert out.overflow == OverflowState(dropped=3, lines=["first message", "second"])
    assert prior == OverflowState(dropped=1, lines=["earlier"])  # input untouched


def test_summary_lines_keep_only_the_newest_cap() -> None:
    overflow = OverflowState()
    queue: list[QueuedMessage] = []
    for seq in range(1, 8):
        out = apply_cap(queue, overflow, cap=2, drop=DropPolicy.SUMMARIZE)
        queue, overflow = [*out.queue, queued(seq, f"m{seq}")], out.overflow
    assert [q.seq for q in queue] == [6, 7]
    assert overflow.dropped == 5
    assert overflow.lines == ["m4", "m5"]


def test_summary_line_elision() -> None:
    assert summary_line("x" * 160) == "x" * 160
    assert summary_line("x" * 161) == "x" * 159 + "…"
    assert summary_line(" a \n b ") == "a b"
    # Trailing space before the cut is dropped before the ellipsis.
    assert summary_line("y" * 158 + " zz") == "y" * 158 + "…"


def test_in_flight_items_neither_count_nor_drop() -> None:
    out = apply_cap(_full(3), OverflowState(), cap=2, drop=DropPolicy.OLD, in_flight={1})
    assert [q.seq for q in out.queue] == [1, 3]
    assert [q.seq for q in out.dropped] == [2]


# --- §17.5 overflow summary in the drain ---------------------------------------------------------


def test_overflow_summary_text() -> None:
    assert overflow_summary(OverflowState()) is None
    assert overflow_summary(None) is None
    one = overflow_summary(OverflowState(dropped=1, lines=["hello"]))
    assert one == "[Queue overflow] Dropped 1 message due to cap.\nSummary:\n- hello"
    two = overflow_summary(OverflowState(dropped=2, lines=["a", "b"]))
    assert two == "[Queue overflow] Dropped 2 messages due to cap.\nSummary:\n- a\n- b"


def test_overflow_summary_says_how_many_it_does_not_list_and_where_they_are() -> None:
    # Only the newest `cap` lines are kept (SPEC §17.4): the rest are named, never silent.
    three = overflow_summary(OverflowState(dropped=3, lines=["a", "b"]))
    assert three == (
        "[Queue overflow] Dropped 3 messages due to cap.\nSummary:\n- a\n- b\n"
        "- … and 1 earlier dropped message not listed here (its full text is kept in the "
        "session's transcript)"
    )
    many = overflow_summary(OverflowState(dropped=980, lines=[f"m{i}" for i in range(20)]))
    assert many is not None
    assert many.count("\n- ") == 21
    assert many.endswith(
        "- … and 960 earlier dropped messages not listed here (their full texts are kept in "
        "the session's transcript)"
    )


def test_a_burst_under_summarize_keeps_the_summary_bounded() -> None:
    queue: list[QueuedMessage] = []
    overflow = OverflowState()
    dropped: list[int] = []
    for seq in range(1, 1001):
        out = apply_cap(queue, overflow, cap=20, drop=DropPolicy.SUMMARIZE)
        assert out.accept_new
        queue, overflow = [*out.queue, queued(seq, f"say m{seq} " + "x" * 300)], out.overflow
        dropped += [item.seq for item in out.dropped]
    # Every message is either still queued or was handed back as dropped, exactly once.
    assert sorted(dropped + [q.seq for q in queue]) == list(range(1, 1001))
    assert overflow.dropped == 980 and len(overflow.lines) == 20
    assert all(len(line) <= SUMMARY_LINE_CHARS for line in overflow.lines)
    assert all(drop_fate(DropPolicy.SUMMARIZE) == DropFate.SUMMARIZED for _ in dropped)
    batch = next_batch(queue, overflow)
    assert batch is not None and batch.seqs == [q.seq for q in queue]
    assert len(batch.turns[0].text) < 20 * 400 + 20 * 200


def test_drops_are_recorded_in_bounded_batches() -> None:
    def item(seq: int, chars: int) -> DroppedMessage:
        return DroppedMessage(
            seq=seq,
            entry_id=f"e{seq}",
            text="x" * chars,
            policy=DropPolicy.OLD,
            cap=1,
            fate=DropFate.DROPPED,
            at=0.0,
        )

    pending = [item(n, 10) for n in range(1, 8)]
    assert [d.seq for d in drops_to_record(pending, max_items=5)] == [1, 2, 3, 4, 5]
    assert [d.seq for d in drops_to_record(pending, max_chars=35)] == [1, 2, 3]
    huge = [item(1, 1000), item(2, 1)]
    assert [d.seq for d in drops_to_record(huge, max_chars=100)] == [1]  # never stuck
    assert drops_to_record([]) == []


def test_drop_fate_by_policy() -> None:
    assert drop_fate(DropPolicy.SUMMARIZE) == DropFate.SUMMARIZED
    assert drop_fate(DropPolicy.OLD) == DropFate.DROPPED
    assert drop_fate(DropPolicy.NEW) == DropFate.DROPPED


def test_followup_head_carries_the_summary_and_its_own_text() -> None:
    routed = Routing(channel="telegram", to="chat:1", thread="7")
    queue = [
        queued(4, "own text", QueueMode.FOLLOWUP, routing=routed, sender="ann"),
        queued(5, "n"),
    ]
    batch = next_batch(queue, OverflowState(dropped=2, lines=["x", "y"]))
    assert batch is not None
    assert batch.seqs == [4]
    assert batch.used_overflow
    turn = batch.turns[0]
    # Issue 25: the original sends the summary alone and the head's own text is lost.
    assert turn.text == (
        "[Queue overflow] Dropped 2 messages due to cap.\nSummary:\n- x\n- y\n\n---\nown text"
    )
    assert (turn.routing, turn.entry_id, turn.sender) == (routed, "u4", "ann")


def test_followup_head_without_summary_runs_alone() -> None:
    batch = next_batch([queued(1, "f", QueueMode.FOLLOWUP)], OverflowState())
    assert batch is not None
    assert (batch.seqs, batch.turns[0].text, batch.used_overflow) == ([1], "f", False)


def test_collect_with_overflow_summary() -> None:
    overflow = OverflowState(dropped=1, lines=["dropped one"])
    batch = next_batch([queued(2, "two"), queued(3, "three")], overflow)
    assert batch is not None
    assert batch.seqs == [2, 3]
    assert batch.used_overflow
    assert batch.turns[0].text == (
        "[Queued messages while agent was busy]\n\n"
        "[Queue overflow] Dropped 1 message due to cap.\nSummary:\n- dropped one\n\n"
        "---\nQueued #1\ntwo\n\n---\nQueued #2\nthree"
    )


def test_lone_collect_item_carries_a_pending_summary() -> None:
    batch = next_batch([queued(2, "two")], OverflowState(dropped=1, lines=["x"]))
    assert batch is not None
    assert batch.used_overflow
    assert batch.turns[0].text.startswith(COLLECT_HEADER + "\n\n[Queue overflow] Dropped 1")
    assert batch.turns[0].text.endswith("---\nQueued #1\ntwo")


# --- §17.5 cross-channel collect -----------------------------------------------------------------


def test_cross_channel_rules() -> None:
    unrouted = Routing()
    webchat = Routing(channel="webchat", to="x")
    no_to = Routing(channel="slack")
    thread = SLACK_A.model_copy(update={"thread": "t"})
    assert not is_cross_channel(
        [queued(1, "a", routing=unrouted), queued(2, "b", routing=unrouted)]
    )
    assert not is_cross_channel([queued(1, "a"), queued(2, "b")])
    assert not is_cross_channel([queued(1, "a", routing=thread), queued(2, "b", routing=thread)])
    assert is_cross_channel([queued(1, "a"), queued(2, "b", routing=SLACK_B)])
    assert is_cross_channel([queued(1, "a"), queued(2, "b", routing=thread)])
    assert is_cross_channel([queued(1, "a"), queued(2, "b", routing=unrouted)])
    assert is_cross_channel([queued(1, "a", routing=unrouted), queued(2, "b")])
    assert is_cross_channel([queued(1, "a", routing=webchat)])
    assert is_cross_channel([queued(1, "a", routing=no_to)])
    assert is_cross_channel([queued(1, "a", routing=Routing(account="acct"))])


def test_unrouted_cli_session_collects() -> None:
    queue = [queued(1, "one", routing=Routing()), queued(2, "two", routing=Routing())]
    batch = next_batch(queue)
    assert batch is not None
    assert batch.seqs == [1, 2]
    assert not batch.one_by_one
    assert batch.turns[0].routing == Routing()
    assert batch.turns[0].text.startswith(COLLECT_HEADER)


def test_cross_channel_goes_one_by_one_for_the_rest_of_the_drain() -> None:
    queue = [queued(1, "a1"), queued(2, "a2"), queued(3, "b1", routing=SLACK_B), queued(4, "b2")]
    batch = next_batch(queue)
    assert batch is not None
    assert (batch.seqs, batch.turns[0].text, batch.one_by_one) == ([1], "a1", True)
    # The rest (a2, b1, b2) is still mixed, and even once it is not the drain stays one by one.
    queue = remove(queue, batch.seqs)
    seen = []
    one_by_one = batch.one_by_one
    while (step := next_batch(queue, None, one_by_one)) is not None:
        seen.append(step.seqs)
        one_by_one = step.one_by_one
        queue = remove(queue, step.seqs)
    assert seen == [[2], [3], [4]]
    # A fresh drain (flag reset once the queue emptied) collects again.
    again = next_batch([queued(5, "x"), queued(6, "y")], None, False)
    assert again is not None
    assert again.seqs == [5, 6]


def test_one_by_one_keeps_the_overflow_summary_with_the_item() -> None:
    queue = [queued(1, "a1"), queued(2, "b1", routing=SLACK_B)]
    batch = next_batch(queue, OverflowState(dropped=1, lines=["gone"]))
    assert batch is not None
    assert batch.seqs == [1]
    assert batch.used_overflow and batch.one_by_one
    assert batch.turns[0].routing == SLACK_A
    assert "- gone" in batch.turns[0].text
    assert batch.turns[0].text.endswith("---\nQueued #1\na1")


def test_one_by_one_flag_passes_through_non_collect_items() -> None:
    batch = next_batch([queued(1, "f", QueueMode.FOLLOWUP), queued(2, "c")], None, True)
    assert batch is not None
    assert batch.one_by_one


def test_collected_routing_takes_the_first_non_empty_fields() -> None:
    a = Routing(channel="slack", to="channel:A", thread="t1")
    batch = next_batch([queued(1, "one", routing=a), queued(2, "two", routing=a)])
    assert batch is not None
    assert batch.turns[0].routing == a


# --- debounce per item ---------------------------------------------------------------------------


def test_item_debounce() -> None:
    idle = queued(1, "x")
    assert item_debounce_ms(idle, 1000) == 0
    waiting = idle.model_copy(update={"debounce": True})
    assert item_debounce_ms(waiting, 1000) == 1000
    assert item_debounce_ms(waiting.model_copy(update={"debounce_ms": 250}), 1000) == 250
    assert item_debounce_ms(waiting.model_copy(update={"debounce_ms": 0}), 1000) == 0


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


# --- steer-backlog's follow-up half ------------------------------------------------------------


def test_the_follow_up_half_of_a_steer_backlog_message_is_its_own_transcript_entry() -> None:
    steered = queued(4, "say SB", mode=QueueMode.STEER_BACKLOG, message_id="m-4")
    copy = backlog_copy(steered)
    assert copy.turn.entry_id != steered.turn.entry_id and copy.backlog_of == "u4"
    assert copy.turn.text == "say SB" and copy.seq == 4 and copy.message_id == "m-4"
    assert steered.backlog_of is None and steered.turn.entry_id == "u4"  # input untouched


def test_steering_a_run_left_is_queued_again_unless_its_follow_up_half_waits() -> None:
    backlog = queued(4, "say SB", mode=QueueMode.STEER_BACKLOG)
    plain = queued(5, "say S", mode=QueueMode.STEER)
    waiting = [backlog_copy(backlog), queued(6, "later")]
    left = [backlog.turn, plain.turn]
    assert unconsumed_to_requeue(left, waiting) == [plain.turn]
    # Its follow-up half dropped (queue cap): the steering left is all there is of it.
    assert unconsumed_to_requeue(left, [queued(6, "later")]) == left


def test_interrupts_keep_their_order_at_the_head_and_requeued_steering_goes_behind_them() -> None:
    from agentlane.messages import QueueMode
    from workflows.policy.queue import interrupt_ahead, seq_of, with_interrupt, with_requeued

    def item(seq: int, mode: QueueMode) -> QueuedMessage:
        turn = UserTurn(entry_id=f"k.abc:m{seq}", text=str(seq))
        return QueuedMessage(seq=seq, mode=mode, turn=turn, enqueued_at=0.0)

    queue = [item(1, QueueMode.FOLLOWUP)]
    for seq in (2, 3):
        queue = with_interrupt(queue, item(seq, QueueMode.INTERRUPT))
    assert [q.seq for q in queue] == [2, 3, 1]
    assert interrupt_ahead(queue, 3) == 2 and interrupt_ahead(queue, 2) is None
    back = [item(9, QueueMode.FOLLOWUP)]
    assert [q.seq for q in with_requeued(queue, back)] == [2, 3, 9, 1]
    assert seq_of("slack:T1.abc:m12") == 12 and seq_of("k.abc:m12:backlog") is None


def test_the_cap_drops_the_oldest_by_number_and_an_accepted_interrupt_last() -> None:
    """Interrupts wait at the queue's head: taking the head dropped the interrupt just accepted
    (its receipt said it stops the run) while older follow-ups ran."""
    from agentlane.messages import QueueMode
    from workflows.policy.queue import with_interrupt

    def item(seq: int, mode: QueueMode) -> QueuedMessage:
        turn = UserTurn(entry_id=f"k.abc:m{seq}", text=f"say {seq}")
        return QueuedMessage(seq=seq, mode=mode, turn=turn, enqueued_at=0.0)

    queue = [item(2, QueueMode.FOLLOWUP), item(3, QueueMode.FOLLOWUP)]
    queue = with_interrupt(queue, item(4, QueueMode.INTERRUPT))
    assert [q.seq for q in queue] == [4, 2, 3]
    for drop in (DropPolicy.OLD, DropPolicy.SUMMARIZE):
        out = apply_cap(queue, OverflowState(), cap=2, drop=drop, by_age=True)
        assert [q.seq for q in out.dropped] == [2, 3]
        assert [q.seq for q in out.queue] == [4]
        # Recorded before the fix: the head went.
        old = apply_cap(queue, OverflowState(), cap=2, drop=drop)
        assert [q.seq for q in old.dropped] == [4, 2]


def test_a_run_that_carried_the_summary_leaves_the_drops_made_while_it_ran() -> None:
    """Review O F2: a run's end wiped the overflow state, and messages dropped while it ran
    were never in any prompt (33 of 920 in a burst)."""
    carried = OverflowState(dropped=2, lines=["one", "two"])
    batch = next_batch([queued(3, "three")], carried)
    assert batch is not None and batch.used_overflow and batch.carried_dropped == 2
    while_running = OverflowState(dropped=5, lines=["one", "two", "x", "y", "z"])
    left = overflow_after_run(while_running, batch.carried_dropped)
    assert left == OverflowState(dropped=3, lines=["x", "y", "z"])
    assert "Dropped 3 messages" in (overflow_summary(left) or "")
    assert overflow_after_run(carried, 2) == OverflowState()
    # Lines are kept for the newest `cap` only: the count still says how many.
    trimmed = OverflowState(dropped=40, lines=["a", "b"])
    assert overflow_after_run(trimmed, 30) == OverflowState(dropped=10, lines=["a", "b"])
    followup = next_batch([queued(4, "four", mode=QueueMode.FOLLOWUP)], carried)
    assert followup is not None and followup.carried_dropped == 2
