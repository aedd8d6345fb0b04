"""Optional per-run limits beyond the original's (SPEC §14 covers loops; this caps turns).

An unattended run can make progress on every call and still never finish; a turn limit is the
bluntest backstop for that. Off by default, because the original has none.
"""

from __future__ import annotations

__all__ = ["turn_limit_reached"]


def turn_limit_reached(turns_done: int, max_turns: int | None) -> bool:
    """True once `turns_done` model turns have used up `max_turns`. None or a non-positive
    limit means no limit, so a zero left in a config cannot stop every run before it starts."""
    if max_turns is None or max_turns <= 0:
        return False
    return turns_done >= max_turns
