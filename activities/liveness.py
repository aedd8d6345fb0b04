"""How often long activities heartbeat, and why that number.

Temporal delivers an activity's cancellation only in the answer to a heartbeat. An abort must end
a streaming model call or a running exec within a second (issue: control that always holds), so a
long activity heartbeats every quarter second and the worker throttles heartbeats to the same
interval (`workers/main.py`). A call that ends sooner than that sends none. Measured cost: one
small RPC per 250 ms per running call, and no history events.
"""

from __future__ import annotations

from datetime import timedelta

HEARTBEAT_EVERY_SECONDS = 0.25
HEARTBEAT_THROTTLE = timedelta(seconds=HEARTBEAT_EVERY_SECONDS)
