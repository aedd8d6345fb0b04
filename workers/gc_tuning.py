"""The collector and the worker's long-lived heap.

What a worker builds while it starts (modules, the SDK, the pydantic schemas of every contract:
over 250 000 objects) lives as long as the process. Left in the collector's oldest generation,
every full collection walks all of it: 160 ms a pause on this machine, about one every 2 000
steps, a stall of every session the worker serves. Frozen once started (`gc.freeze`), the same
collection took 20 ms, and the collector's share of a step fell from 0.13 to 0.06 ms.
"""

from __future__ import annotations

import gc


def freeze_startup_heap() -> int:
    """Collect the start's garbage, then exempt what is left from later collections; returns
    how many objects were frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
