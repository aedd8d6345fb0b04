"""Text for the Temporal UI's rows (issue 25: markdown only where the UI renders it).

The UI renders markdown in a workflow's current and static details, but shows summaries (of
activities, timers and child workflows: the timeline's and the compact view's rows) as they
are: a user's backticks or bold markers there read as raw punctuation.
"""

from __future__ import annotations


def plain(text: str, limit: int = 80) -> str:
    """One line of `text` for a summary row: whitespace folded, markdown's code and bold
    markers taken out, at most `limit` characters."""
    folded = " ".join(text.replace("`", "").replace("**", "").split())
    return folded if len(folded) <= limit else folded[: limit - 1] + "…"
