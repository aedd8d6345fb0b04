"""Where a run's message came from (seed 004: chat, CLI, cron and sub-agent share one entry
point). Its own module so both the message contract and the run contract can name it."""

from __future__ import annotations

from enum import StrEnum


class EntrySource(StrEnum):
    CHAT = "chat"
    CLI = "cli"
    CRON = "cron"
    SUBAGENT = "subagent"
