"""Moved to `workflows.policy.thinking_fallback`; this name stays for existing imports."""

from workflows.policy.thinking_fallback import *  # noqa: F403
from workflows.policy.thinking_fallback import __all__ as __all__
