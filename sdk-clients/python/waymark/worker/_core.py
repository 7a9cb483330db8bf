"""The part of a workflow context every operation shares: the recorded history it replays
from (see _history), held-back step records, requests to the server and waiting for wakeups.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from .._payload import to_payload
from .._proto import types_pb2, worker_pb2
from .._time import now_ms
from ..errors import Parked
from ._history import History
from ._replies import expect
from ._run import Run

log = logging.getLogger("waymark.worker")

DELIVERED = worker_pb2.RecvResult.OUTCOME_DELIVERED
TIMED_OUT = worker_pb2.RecvResult.OUTCOME_TIMED_OUT


class ContextCore:
    """Shared machinery of `WorkflowContext`; the operations live in its other bases."""

    def __init__(self, run: Run) -> None:
        self._run = run

    @property
    def workflow_id(self) -> str:
        return self._run.workflow_id

    @property
    def workflow_name(self) -> str:
        return self._run.workflow_name

    @property
    def epoch(self) -> int:
        """The fencing epoch of this run: it rises each time the workflow is dispatched."""
        return self._run.epoch

    @property
    def recovery_attempts(self) -> int:
        """How many times this workflow was recovered from a worker that died."""
        return self._run.recovery_attempts

    @property
    def is_replaying(self) -> bool:
        """True while the next step is answered from the recorded history."""
        return self._run.history.replaying

    @property
    def cancelled(self) -> bool:
        return self._run.cancelled

    @property
    def log(self) -> logging.LoggerAdapter[logging.Logger]:
        """A logger that names this workflow in every record."""
        return logging.LoggerAdapter(log, {"workflow_id": self.workflow_id})

    def _take(self, n: int = 1) -> int:
        """Takes the next `n` positions; called when an operation is called (see `History.take`)."""
        return self._run.history.take(n)

    def _live(self, step_id: int) -> None:
        """About to do something at `step_id` a replay must not: see `Run.live`."""
        self._run.live(step_id)

    def _check_cancelled(self) -> None:
        """Raises when the run may not go on: dropped by this worker, or cancelled."""
        self._run.check_dropped()
        if self._run.cancelled:
            raise asyncio.CancelledError("workflow cancelled")

    def _history(self) -> History:
        """The recorded history to replay from. Every operation reads it through here, so a
        dropped run cannot go on even by replaying."""
        self._run.check_dropped()
        return self._run.history

    def _payload(self, what: str, value: Any) -> types_pb2.Payload:
        """`value` as a payload to send, or `PayloadTooLarge` when the server would not take it:
        refused here, before it is sent, so the workflow gets the error it can handle (and
        would get again on replay) rather than a message that ends the stream."""
        p = to_payload(value)
        self._run.limits.check_payload(what, p)
        return p

    def _defer(
        self, step_id: int, name: str, attempts: int, took: float | None = None, **outcome: Any
    ) -> None:
        """Holds a step's record back until the workflow's next step, request or completion.
        `took` is how long the step ran in seconds, retries included (for steps whose function
        this worker ran): the server dates the step's start from it."""
        r = self._run
        r.check_dropped()
        record = worker_pb2.RecordStep(
            workflow_id=r.workflow_id,
            epoch=r.epoch,
            step_id=step_id,
            name=name,
            attempts=attempts,
            **outcome,
        )
        if took is not None:
            record.duration.FromNanoseconds(max(int(took * 1e9), 0))
        r.records.hold(record)

    async def _flush(self) -> None:
        """Returns once every step record taken before this call is durable (see _records)."""
        self._run.check_dropped()
        await self._run.records.durable()

    async def _request(self, msg: worker_pb2.WorkerMessage) -> worker_pb2.Reply:
        """Sends a request for this workflow once the step records before it are durable."""
        await self._flush()
        return await self._run.ask(msg)

    async def _record(self, step_id: int, name: str, output: types_pb2.Payload) -> None:
        """Checkpoints a step and waits until the server says it is durable (with whatever
        records were held back before it, in one flush)."""
        self._defer(step_id, name, 1, output=output)
        await self._flush()

    def _should_park(self, until_ms: int, now: int) -> bool:
        after = self._run.park_after
        return after is not None and until_ms - now > after * 1000

    async def _park(self, step_id: int, wake_at_ms: int, **on: Any) -> None:
        """Asks the server to park this workflow; raises `Parked` when it did (the run ends
        here). Returns when the wait had already resolved: the caller asks again."""
        r = self._run
        req = worker_pb2.Park(
            workflow_id=r.workflow_id, epoch=r.epoch, step_id=step_id, wake_at_ms=wake_at_ms, **on
        )
        parked = expect(await self._request(worker_pb2.WorkerMessage(park=req)), "parked")
        if parked.parked:
            raise Parked(f"parked at step {step_id}")

    async def _wait_until(self, until_ms: int | None, now: int) -> None:
        """Waits until `until_ms` (by a clock reading `now` at this moment) or a wakeup."""
        if self._run.offline:
            # A replay never waits: what the wait led to is recorded, or the history ends at
            # the request before it (every caller asks the server, or checks `_live`, first).
            return
        timeout = None if until_ms is None else max(until_ms - now, 0) / 1000
        try:
            await asyncio.wait_for(self._run.wakeup.wait(), timeout)
        except TimeoutError:
            pass
        self._run.wakeup.clear()
        self._check_cancelled()

    async def _wait_parking(self, waiting_since: int, step_id: int, **on: Any) -> None:
        """One turn of an open-ended wait (a child, a remote step): until a wakeup, and once it
        has lasted past the park threshold, parks the workflow."""
        after = self._run.park_after
        if after is None:
            await self._wait_until(None, 0)
            return
        park_at = waiting_since + int(after * 1000)
        if now_ms() >= park_at:
            await self._park(step_id, 2**63 - 1, **on)
        else:
            await self._wait_until(park_at, now_ms())
