"""A webhook delivery retried on another host resumes where the store says the last attempt got
(after its last POST), not where its throttled heartbeat or its input said."""

from __future__ import annotations

from pathlib import Path

from activities.webhook_delivery import WebhookDelivery
from agentlane.settings import Settings
from agentlane.webhooks import DeliverInput, DeliverProgress, WebhookTarget
from store.open import open_store


def target() -> WebhookTarget:
    return WebhookTarget(url="http://127.0.0.1:9/hook", secret_ref="ref")


async def test_the_store_record_wins_over_a_stale_heartbeat(tmp_path: Path) -> None:
    # Host A's attempt POSTed the final reply and recorded it; its last heartbeat was throttled.
    host_a = await open_store(Settings(data_dir=tmp_path))
    done = DeliverProgress(offset=7, delivered=3, final_sent=True, last_id="r/final")
    await host_a.save_delivery_progress("session:k/run/1", done.model_dump_json())
    # Host B's retry reads it back.
    host_b = await open_store(Settings(data_dir=tmp_path))
    saved = await host_b.delivery_progress("session:k/run/1")
    assert saved is not None
    inp = DeliverInput(session_key="k", run_id="r", target=target(), from_offset=2)
    stale = [DeliverProgress(offset=5, delivered=2).model_dump(mode="json")]
    resumed = WebhookDelivery._resume_point(
        inp, stale, None, DeliverProgress.model_validate_json(saved)
    )
    assert resumed == done, "the final reply is not sent again"
    # Without a store record, the heartbeat still counts.
    assert WebhookDelivery._resume_point(inp, stale, None).offset == 5
