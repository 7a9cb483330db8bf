"""Remote steps and waiting for several things: a workflow calls a step by name and any worker
that registered it runs it — here, in another process, or in another language. The result is
recorded as this workflow's step, so a replay (even after this worker died) finds it."""

from __future__ import annotations

from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from .. import _tracing
from .._payload import from_payload, to_payload
from .._proto import types_pb2, worker_pb2
from .._time import Seconds, now_ms, to_duration
from ..errors import StepFailed
from ..retry import RetryPolicy
from ._core import DELIVERED, ContextCore
from ._replies import expect


@dataclass(frozen=True, slots=True)
class StepHandle:
    """A remote step that was called and may still be running. Get its result with
    `ctx.step_result(handle)`, or wait on it with others (`ctx.wait_first`, `ctx.wait_all`)."""

    step_id: int
    name: str
    input: types_pb2.Payload
    retry: RetryPolicy | None
    timeout: Seconds | None


# What a workflow can wait for alongside others: a StepHandle, or a workflow id (a child's).
Awaitable = StepHandle | str


class RemoteMixin(ContextCore):
    def call_step(
        self,
        name: str,
        input: Any = None,
        *,
        retry: RetryPolicy | None = None,
        timeout: Seconds | None = None,
    ) -> Coroutine[Any, Any, Any]:
        """Calls remote step `name` and waits for its result. The server retries it per `retry`
        (unset: 3 attempts, 1 s doubling up to 60 s) and fails an attempt past `timeout`
        (unset: 5 minutes); a step that fails for good raises `StepFailed`."""
        started = self.start_step(name, input, retry=retry, timeout=timeout)

        async def run() -> Any:
            return await self.step_result(await started)

        return run()

    def start_step(
        self,
        name: str,
        input: Any = None,
        *,
        retry: RetryPolicy | None = None,
        timeout: Seconds | None = None,
    ) -> Coroutine[Any, Any, StepHandle]:
        """Calls remote step `name` without waiting for it: the call is durable when this
        returns."""
        handle = StepHandle(self._take(), name, to_payload(input), retry, timeout)
        return self._start_step(handle)

    async def _start_step(self, h: StepHandle) -> StepHandle:
        # Recorded, even as a failure: the call was made; `step_result` replays how it ended.
        if self._history().recorded(h.step_id, h.name):
            return h
        self._check_cancelled()
        self._run.limits.check_payload(f"the input of step {h.name!r}", h.input)
        # The `call` span: open from this call until its result is delivered (or the run ends).
        self._run.trace.open_call(h.step_id, h.name)
        try:
            await self._call(h)
        except BaseException as e:
            self._run.trace.end_call(h.step_id, _tracing.failed(e))
            raise
        return h

    async def _call(self, h: StepHandle) -> worker_pb2.CallResult:
        """Makes the call, or asks again for its result (the server calls once per position)."""
        r = self._run
        req = worker_pb2.CallStep(
            workflow_id=r.workflow_id,
            epoch=r.epoch,
            step_id=h.step_id,
            step_name=h.name,
            input=h.input,
        )
        if h.retry is not None:
            req.retry.max_attempts = h.retry.max_attempts
            req.retry.initial_interval.CopyFrom(to_duration(h.retry.initial_interval))
            req.retry.backoff_coefficient = h.retry.backoff
            req.retry.max_interval.CopyFrom(to_duration(h.retry.max_interval))
        if h.timeout is not None:
            req.timeout.CopyFrom(to_duration(h.timeout))
        tc = _tracing.wire(r.trace.calls.get(h.step_id))
        if tc is not None:
            req.trace_context.CopyFrom(tc)
        result: worker_pb2.CallResult = expect(
            await self._request(worker_pb2.WorkerMessage(call_step=req)), "call_result"
        )
        return result

    async def step_result(self, handle: StepHandle) -> Any:
        """The result of a remote step started with `start_step`, waiting for it. A workflow
        that waits past its worker's park threshold is parked until the result is recorded."""
        replayed = self._history().replay(handle.step_id, handle.name)
        if replayed is not None:
            return replayed.output
        waiting_since = now_ms()
        try:
            while True:
                self._check_cancelled()
                res = await self._call(handle)
                if res.outcome == DELIVERED:
                    if res.HasField("failure"):
                        raise StepFailed(handle.name, res.failure.message, res.failure.kind)
                    self._run.trace.end_call(handle.step_id)
                    return from_payload(res.output)
                await self._wait_parking(waiting_since, handle.step_id, step=handle.step_id)
        except BaseException as e:
            self._run.trace.end_call(handle.step_id, _tracing.failed(e))
            raise

    def wait_first(self, *targets: Awaitable) -> Coroutine[Any, Any, int]:
        """Waits until the first of `targets` (step handles, workflow ids) finishes and returns
        its index. The winner is recorded, so a replay takes the same branch."""
        return self._wait_several(self._take(), targets, False)

    def wait_all(self, *targets: Awaitable) -> Coroutine[Any, Any, int]:
        """Waits until every one of `targets` has finished; returns the index of the last."""
        return self._wait_several(self._take(), targets, True)

    async def _wait_several(self, step_id: int, targets: tuple[Awaitable, ...], all: bool) -> int:
        index = self._history().selected(step_id, all)
        if index is not None:
            return index
        if not targets:
            raise ValueError("nothing to wait for")
        wire = [
            worker_pb2.WaitTarget(step_id=t.step_id)
            if isinstance(t, StepHandle)
            else worker_pb2.WaitTarget(workflow_id=t)
            for t in targets
        ]
        r = self._run
        with r.trace.op("wait select", "internal", step_id):
            while True:
                self._check_cancelled()
                req = worker_pb2.Select(
                    workflow_id=r.workflow_id, epoch=r.epoch, step_id=step_id, targets=wire, all=all
                )
                reply = await self._request(worker_pb2.WorkerMessage(select=req))
                selected = expect(reply, "selected")
                if selected.outcome == DELIVERED:
                    return int(selected.index)
                await self._wait_until(None, 0)
