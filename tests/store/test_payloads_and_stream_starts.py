"""Offloaded payloads owned by workflows and swept once released, and where a run began in its
session's stream, on every backend (tests/store/conftest.py), with the migrations that made
their tables."""

from __future__ import annotations

import asyncio
import hashlib
import time

from store.interface import Store
from store.models import PayloadOwnerRef


def blob(n: int) -> tuple[str, bytes]:
    data = f"payload {n} ".encode() * 500
    return hashlib.sha256(data).hexdigest(), data


RUN_A = PayloadOwnerRef(workflow_id="session:a", run_id="r1")
RUN_B = PayloadOwnerRef(workflow_id="run:b", run_id="r2")
ANY_C = PayloadOwnerRef(workflow_id="child:c")
NOW = float("inf")  # release whatever the owner stored


async def test_owned_payloads_go_once_their_last_owner_is_released(store: Store) -> None:
    (d1, p1), (d2, p2), (d3, p3) = blob(1), blob(2), blob(3)
    await store.put_payload(d1, p1, RUN_A)
    await store.put_payload(d2, p2, RUN_A)
    await store.put_payload(d2, p2, RUN_B)  # the same bytes in two histories: stored once
    await store.put_payload(d3, p3, ANY_C)
    listed = await store.payload_owners()
    assert [(o.workflow_id, o.run_id) for o in listed] == sorted(
        [(o.workflow_id, o.run_id) for o in (RUN_A, RUN_B, ANY_C)], key=lambda o: (o[0], o[1] or "")
    )
    assert all(0 < o.oldest <= time.time() for o in listed)
    assert (await store.status()).counts["payloads"] == 3
    # Nothing released: nothing goes, however old.
    assert await store.sweep_payloads(time.time() + 3600) == (0, 0)

    assert await store.release_payload_owner(RUN_A, NOW) == 2
    removed, size = await store.sweep_payloads(0.0)
    assert (removed, size) == (1, len(p1)), "d2 is still RUN_B's"
    assert await store.payload(d1) is None and await store.payload(d2) == p2

    assert await store.release_payload_owner(ANY_C, NOW) == 1
    assert await store.release_payload_owner(RUN_B, NOW) == 1
    assert await store.sweep_payloads(0.0) == (2, len(p2) + len(p3))
    assert await store.payload_owners() == []
    assert await store.release_payload_owner(RUN_B, NOW) == 0


async def test_unowned_payloads_go_after_the_retention(store: Store) -> None:
    (d1, p1), (d2, p2) = blob(1), blob(2)
    await store.put_payload(d1, p1)  # a client's own input: no workflow yet
    before = time.time()
    await asyncio.sleep(0.05)
    await store.put_payload(d2, p2)
    assert await store.sweep_payloads(before - 3600) == (0, 0)
    assert await store.sweep_payloads(before) == (1, len(p1))
    assert await store.payload(d2) == p2
    # Put again later (the same input sent again): its retention starts over.
    await store.put_payload(d2, p2)
    assert await store.sweep_payloads(before + 0.02) == (0, 0)


async def test_a_payload_claimed_again_is_not_swept(store: Store) -> None:
    d1, p1 = blob(1)
    await store.put_payload(d1, p1, RUN_A)
    await store.release_payload_owner(RUN_A, NOW)
    # Another workflow offloads the same bytes before the sweep: it keeps them.
    await store.put_payload(d1, p1, RUN_B)
    assert await store.sweep_payloads(time.time()) == (0, 0)
    assert await store.payload(d1) == p1


async def test_sweeps_racing_puts_never_lose_a_claimed_payload(store: Store) -> None:
    digests = [blob(n) for n in range(40)]
    for digest, data in digests:
        await store.put_payload(digest, data, RUN_A)
    await store.release_payload_owner(RUN_A, NOW)

    async def claim_all() -> None:
        for digest, data in digests:
            await store.put_payload(digest, data, RUN_B)

    await asyncio.gather(claim_all(), store.sweep_payloads(0.0), store.sweep_payloads(0.0))
    # Whatever the sweeps took before a claim, the claim wrote again: RUN_B reads them all.
    for digest, data in digests:
        assert await store.payload(digest) == data


async def test_stream_start_is_one_row_per_session(store: Store) -> None:
    assert await store.stream_start("s") is None
    await store.set_stream_start("s", "run-1", 0)
    await store.set_stream_start("s", "run-2", 17)
    await store.set_stream_start("t", "run-9", 3)
    assert await store.stream_start("s") == ("run-2", 17)
    assert await store.stream_start("t") == ("run-9", 3)
    assert (await store.status()).counts["stream_starts"] == 2
    # Not kept with webhook deliveries any more.
    assert await store.delivery_progress("stream-start/s") is None


async def test_stream_starts_kept_as_delivery_rows_move_to_their_table(
    unmigrated_store: Store,
) -> None:
    store = unmigrated_store
    assert await store.migrate(up_to=2) == 2
    # What earlier versions wrote: progress rows named `stream-start/<key>`.
    await store.save_delivery_progress("stream-start/chat:1", "run-a 12")
    await store.save_delivery_progress("stream-start/x/y z", "run-b 0")
    await store.save_delivery_progress("webhook-delivery-1", '{"offset": 4}')
    latest = await store.migrate()
    assert latest >= 3
    assert await store.stream_start("chat:1") == ("run-a", 12)
    assert await store.stream_start("x/y z") == ("run-b", 0)
    assert await store.delivery_progress("stream-start/chat:1") is None
    assert await store.delivery_progress("webhook-delivery-1") == '{"offset": 4}'
    assert await store.migrate() == latest


async def test_an_owner_releases_only_what_it_stored_before_the_bound(store: Store) -> None:
    (d1, p1), (d2, p2) = blob(1), blob(2)
    await store.put_payload(d1, p1, ANY_C)
    await asyncio.sleep(0.05)
    bound = time.time()
    await asyncio.sleep(0.05)
    await store.put_payload(d2, p2, ANY_C)  # e.g. a message a later run of the id received
    assert await store.release_payload_owner(ANY_C, bound) == 1
    assert await store.sweep_payloads(0.0) == (1, len(p1))
    assert await store.payload(d2) == p2
    (left,) = await store.payload_owners()
    assert left.workflow_id == ANY_C.workflow_id and left.oldest > bound
