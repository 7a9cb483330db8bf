"""Durable waits on time, messages and events: the deadline (or wake time) is recorded as a
step first, so a recovered workflow keeps its original timeout instead of starting it over."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from .._payload import from_payload, to_payload
from .._proto import worker_pb2
from .._time import Seconds, now_ms, seconds
from ._core import DELIVERED, TIMED_OUT, ContextCore
from ._history import GET_EVENT, RECV, SLEEP_STEP, Wait, deadline_output, sleep_output
from ._replies import expect

# A wait without a timeout still needs a deadline on the wire: this far away.
_FOREVER = 10 * 365 * 24 * 3600.0


class WaitsMixin(ContextCore):
    def sleep(self, duration: Seconds) -> Coroutine[Any, Any, None]:
        """Sleeps durably: the wake time is recorded, so a workflow recovered mid-sleep sleeps
        only what is left. A long sleep parks the workflow (see `Worker(park_after=...)`)."""
        return self._sleep(self._take(), seconds(duration))

    async def _sleep(self, step_id: int, duration: float) -> None:
        wake_at = self._history().sleep(step_id)
        if wake_at is not None and now_ms() >= wake_at:
            return  # replayed, and over
        with self._run.trace.op("wait sleep", "internal", step_id):
            if wake_at is None:
                self._check_cancelled()
                wake_at = now_ms() + int(duration * 1000)
                await self._record(step_id, SLEEP_STEP, to_payload(sleep_output(wake_at)))
            if self._should_park(wake_at, now_ms()):
                await self._park(step_id, wake_at, timer=True)
            while now_ms() < wake_at:
                # A replay of a sleep still running ends where the live run sleeps.
                self._live(step_id)
                await self._wait_until(wake_at, now_ms())

    def recv(self, topic: str = "", *, timeout: Seconds | None = None) -> Coroutine[Any, Any, Any]:
        """Takes the oldest message sent to this workflow on `topic`, waiting up to `timeout`
        (forever when None); None when none came. The message is consumed and recorded in one
        transaction, so it is received exactly once. The server wakes the wait; nothing polls."""
        step_id = self._take(2)
        r = self._run

        def request(result_step: int, deadline_ms: int) -> worker_pb2.WorkerMessage:
            return worker_pb2.WorkerMessage(
                recv=worker_pb2.Recv(
                    workflow_id=r.workflow_id,
                    epoch=r.epoch,
                    step_id=result_step,
                    topic=topic,
                    deadline_ms=deadline_ms,
                )
            )

        span = ("wait recv", {"waymark_wait_topic": topic})
        return self._durable_wait(step_id, RECV, timeout, {"topic": topic}, request, span)

    def get_event(
        self, workflow_id: str, key: str, *, timeout: Seconds | None = None
    ) -> Coroutine[Any, Any, Any]:
        """Reads workflow `workflow_id`'s event `key`, waiting up to `timeout` for it to be set
        (forever when None); None when it was not. Recorded, with its deadline, like `recv`."""
        step_id = self._take(2)
        r = self._run

        def request(result_step: int, deadline_ms: int) -> worker_pb2.WorkerMessage:
            return worker_pb2.WorkerMessage(
                get_event=worker_pb2.GetEventStep(
                    workflow_id=r.workflow_id,
                    epoch=r.epoch,
                    step_id=result_step,
                    target_workflow_id=workflow_id,
                    key=key,
                    deadline_ms=deadline_ms,
                )
            )

        park_on = {"event": worker_pb2.EventKey(workflow_id=workflow_id, key=key)}
        span = ("wait event", {"waymark_wait_key": key})
        return self._durable_wait(step_id, GET_EVENT, timeout, park_on, request, span)

    async def _durable_wait(
        self,
        deadline_step: int,
        kind: Wait,
        timeout: Seconds | None,
        park_on: dict[str, Any],
        request: Callable[[int, int], worker_pb2.WorkerMessage],
        span: tuple[str, dict[str, Any]],
    ) -> Any:
        """A wait over two positions: the deadline (recorded first) and the outcome, which the
        server records. Asks; on WAITING waits for the wakeup or the deadline, then asks again.
        `span`: the name and attributes of the span a wait done now opens."""
        result_step = deadline_step + 1
        deadline_ms = self._history().deadline(deadline_step, kind)
        if deadline_ms is not None:
            replayed = self._history().wait_result(result_step, kind)
            if replayed is not None:
                return replayed.output
        name, attributes = span
        with self._run.trace.op(name, "internal", deadline_step, **attributes):
            if deadline_ms is None:
                self._check_cancelled()
                wait = _FOREVER if timeout is None else seconds(timeout)
                deadline_ms = now_ms() + int(wait * 1000)
                payload = to_payload(deadline_output(deadline_ms))
                await self._record(deadline_step, kind.deadline_step, payload)
                replayed = self._history().wait_result(result_step, kind)
                if replayed is not None:
                    return replayed.output
            return await self._wait_for(result_step, deadline_ms, park_on, request)

    async def _wait_for(
        self,
        result_step: int,
        deadline_ms: int,
        park_on: dict[str, Any],
        request: Callable[[int, int], worker_pb2.WorkerMessage],
    ) -> Any:
        """Asks for a wait's outcome until it is delivered or timed out."""
        while True:
            self._check_cancelled()
            # The server may have completed the wait itself and sent the answer with the wakeup.
            pushed = self._run.delivered.pop(result_step, None)
            if pushed is not None:
                return from_payload(pushed)
            reply = await self._request(request(result_step, deadline_ms))
            which = reply.WhichOneof("result")
            answer = expect(reply, "event_result" if which == "event_result" else "recv_result")
            value = answer.value if which == "event_result" else answer.message
            if answer.outcome == DELIVERED:
                return from_payload(value)
            if answer.outcome == TIMED_OUT:
                return None
            # Waiting: for a wakeup, or until the deadline by the server's clock.
            if self._should_park(deadline_ms, answer.server_now_ms):
                await self._park(result_step, deadline_ms, **park_on)
                continue
            await self._wait_until(deadline_ms, answer.server_now_ms)
