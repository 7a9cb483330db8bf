"""The pauses between attempts at something the server refused as UNAVAILABLE — a worker
request, a client call. The server says UNAVAILABLE while it cannot reach its database (for
instance while the database restarts), so trying again shortly is the right answer; patience
bounds how long."""

from __future__ import annotations

import random
import time

FIRST = 0.05
LONGEST = 2.0
# How long a worker request or client call keeps trying by default, in seconds.
DEFAULT_PATIENCE = 60.0


class Backoff:
    """Pauses from 50 ms doubling to 2 s, each lengthened by up to a quarter at random so that
    the workers and clients that lost the server together do not all come back at one instant.
    Counts from its creation: `pause()` is None once the next attempt would come later than
    `patience` seconds after it."""

    def __init__(self, patience: float) -> None:
        self._ends = time.monotonic() + patience
        self._attempts = 0

    def pause(self) -> float | None:
        base = min(FIRST * 2.0 ** min(self._attempts, 16), LONGEST)
        self._attempts += 1
        pause = base * (1.0 + random.uniform(0.0, 0.25))
        if time.monotonic() + pause > self._ends:
            return None
        return pause
