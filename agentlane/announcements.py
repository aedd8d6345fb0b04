"""Contract of the activity that publishes a run's announcements at once, for moments when no
model call or tool call is about to carry them (a durable wait)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from agentlane.events import Announcement

PUBLISH_ANNOUNCEMENTS = "publish_announcements"


class PublishInput(BaseModel):
    session_key: str
    run_id: str
    announce: list[Announcement] = Field(default_factory=list)
