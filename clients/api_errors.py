"""Errors of `clients.api` that the CLI's `main` catches for every command: here, apart from the
client, so catching them does not import the Temporal SDK (issue 22). `clients.api` re-exports
them."""


class SessionNotFound(Exception):
    """No session with that key exists (it never did, or it was closed)."""


class NoWorker(Exception):
    """No worker answered in time. What was sent is durably accepted where that is possible;
    the message says so and names the command that starts a worker."""


def rejection_text(err: ValueError) -> str:
    """What was wrong with an input, one line a field: pydantic's own text is a block with a
    documentation link per error."""
    errors = getattr(err, "errors", None)
    if not callable(errors):
        return str(err)
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" if e["loc"] else str(e["msg"])
        for e in errors()
    )
