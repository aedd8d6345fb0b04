"""Marker for contracts that travel in activity inputs and results, and so in every step's
history: their fields equal to the default are left out on the wire.

Only for these short-lived payloads. State carried across continue-as-new is written in full,
because a default changed in a later version must not silently change a running session.
Changing a default of a `CompactModel` changes what in-flight activity calls see on a retry.
"""

from __future__ import annotations

from pydantic import BaseModel


class CompactModel(BaseModel):
    pass
