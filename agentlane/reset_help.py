"""`agentlane reset`'s help line, apart from the branch models: the CLI parser is built for every
command and must not import pydantic contracts for it (issue 22)."""

RESET_HELP = (
    "reset the session: later messages start afresh (nothing before the reset is sent to the "
    "model; the old branch stays in the transcript); a busy run is aborted, queued messages "
    "are kept"
)
