"""The time and random UUIDs, read once and recorded.

Workflow code runs again on every replay, so a value it computes from the clock or a random
source (`time.time()`, `datetime.now()`, `uuid.uuid4()`) differs from one run to the next, and
a workflow that branches on it, or writes it anywhere, stops replaying what the first run did.
These methods take a step position like any step: the first run reads the value and records it,
a replay returns the recorded one.

They return at once, without a round trip: reading a clock or drawing a UUID has no effect
outside the workflow, so it need not wait for earlier records to be durable, and its own record
is held back with a local step's (see _records) — it goes with the workflow's next step,
request or completion, which waits for it before doing anything that could depend on the
value. Like a step, a cancelled workflow still replays what is recorded, but reads nothing new
(`asyncio.CancelledError`)."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID, uuid4

from .. import _time
from .._payload import to_payload
from ._core import ContextCore
from ._history import NOW_STEP, UUID_STEP, now_output, uuid_output


class ValuesMixin(ContextCore):
    def now(self) -> datetime:
        """The current time as an aware UTC `datetime` (to the millisecond), recorded: a replay
        returns the time the first run read. Use it, not `datetime.now()` or `time.time()`, for
        any time the workflow acts on. Takes one step position (recorded as `waymark.now`), the
        same as `now_ms()`, so the two may replace each other in a later version of a workflow.
        Not awaited."""
        return _time.from_ms(self.now_ms())

    def now_ms(self) -> int:
        """The current time in ms since the Unix epoch, recorded; see `now()`. Not awaited."""
        step_id = self._take()
        recorded = self._history().now_read(step_id)
        if recorded is not None:
            return recorded
        self._live(step_id)
        self._check_cancelled()
        now = _time.now_ms()
        self._defer(step_id, NOW_STEP, 1, output=to_payload(now_output(now)))
        return now

    def uuid(self) -> UUID:
        """A random UUID (version 4), recorded: a replay returns the one the first run drew. Use
        it, not `uuid.uuid4()`, for ids the workflow keeps or sends (an idempotency key, say).
        Takes one step position (recorded as `waymark.uuid`). Not awaited."""
        step_id = self._take()
        recorded = self._history().uuid_drawn(step_id)
        if recorded is not None:
            return recorded
        self._live(step_id)
        self._check_cancelled()
        drawn = uuid4()
        self._defer(step_id, UUID_STEP, 1, output=to_payload(uuid_output(drawn)))
        return drawn
