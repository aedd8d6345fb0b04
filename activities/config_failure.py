"""A broken or incomplete configuration as an activity's failure: non-retryable, and benign
(the SDK logs it in one line, not as a traceback: it is the operator's to fix, not a bug)."""

from __future__ import annotations

from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from agentlane.errors import CONFIG_ERROR


def config_failure(err: BaseException) -> ApplicationError:
    return ApplicationError(
        str(err),
        type=CONFIG_ERROR,
        non_retryable=True,
        category=ApplicationErrorCategory.BENIGN,
    )
