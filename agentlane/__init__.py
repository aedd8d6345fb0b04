"""Contracts shared by every role: pydantic models, settings, error kinds.

Nothing in this package performs I/O at import time, so workflows can import it through the
sandbox's pass-through.
"""
