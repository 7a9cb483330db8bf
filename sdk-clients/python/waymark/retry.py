"""How a step is retried."""

from __future__ import annotations

from dataclasses import dataclass

from ._time import Seconds, seconds


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Attempts in all (the first included) and the backoff between them. The default runs a
    step once. Intervals are seconds or timedeltas."""

    max_attempts: int = 1
    initial_interval: Seconds = 0.1
    backoff: float = 2.0
    max_interval: Seconds = 30.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based)."""
        factor = max(self.backoff, 1.0) ** min(max(attempt - 1, 0), 64)
        return min(seconds(self.initial_interval) * factor, seconds(self.max_interval))
