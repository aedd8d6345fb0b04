"""Errors of `clients.api` that the CLI's `main` catches for every command: here, apart from the
client, so catching them does not import the Temporal SDK (issue 22). `clients.api` re-exports
them."""


class SessionNotFound(Exception):
    """No session with that key exists (it never did, or it was closed)."""


class NoWorker(Exception):
    """No worker answered in time. What was sent is durably accepted where that is possible;
    the message says so and names the command that starts a worker."""
