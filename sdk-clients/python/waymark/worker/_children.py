"""Child workflows: started as a step (the child's row and the parent's record of it commit
together, so a replaying parent re-joins its child), awaited as a durable wait."""

from __future__ import annotations

from collections.abc import Coroutine, Mapping
from typing import Any

from .. import _tracing
from .._proto import worker_pb2
from .._time import now_ms
from ..errors import ChildWorkflowFailed
from ._core import DELIVERED, ContextCore
from ._history import ChildOutcome
from ._replies import expect


class ChildrenMixin(ContextCore):
    def start_child(
        self,
        workflow_name: str,
        input: Any = None,
        *,
        workflow_id: str | None = None,
        queue: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> Coroutine[Any, Any, str]:
        """Starts a child workflow and returns its id: `workflow_id` when given, else derived
        from this workflow's id and the step. Its queue is this workflow's unless given.

        The child inherits this workflow's tags; `tags` replace or add keys (the same bounds as
        a start's tags: a bad one is refused, raising `WorkflowFailed` of kind
        INVALID_ARGUMENT). They are sent only when the child is started, not on a replay."""
        step_id = self._take()
        return self._start_child(
            step_id, workflow_name, input, workflow_id or "", queue or "", tags or {}
        )

    async def _start_child(
        self,
        step_id: int,
        name: str,
        input: Any,
        child_id: str,
        queue: str,
        tags: Mapping[str, str],
    ) -> str:
        started_id = self._history().child_started(step_id)
        if started_id is not None:
            return started_id
        self._check_cancelled()
        r = self._run
        req = worker_pb2.StartChild(
            workflow_id=r.workflow_id,
            epoch=r.epoch,
            step_id=step_id,
            workflow_name=name,
            child_workflow_id=child_id,
            input=self._payload(f"the input of child workflow {name!r}", input),
            queue_name=queue,
            tags=tags,
        )
        # The child's trace goes on from this span.
        with r.trace.op(f"start child {name}", "producer", step_id) as span:
            tc = _tracing.wire(span)
            if tc is not None:
                req.trace_context.CopyFrom(tc)
            started = expect(
                await self._request(worker_pb2.WorkerMessage(start_child=req)), "child_started"
            )
        return str(started.child_workflow_id)

    def await_child(self, workflow_id: str) -> Coroutine[Any, Any, Any]:
        """Waits for workflow `workflow_id` (a child, or any workflow) to finish and returns its
        output. A child that failed, was cancelled or dead-lettered raises
        `ChildWorkflowFailed` (kind ChildFailed, ChildCancelled or ChildDeadLettered)."""
        return self._await_child(self._take(), workflow_id)

    async def child(
        self,
        workflow_name: str,
        input: Any = None,
        *,
        workflow_id: str | None = None,
        queue: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> Any:
        """Starts a child workflow (see `start_child`) and waits for its output."""
        child_id = await self.start_child(
            workflow_name, input, workflow_id=workflow_id, queue=queue, tags=tags
        )
        return await self.await_child(child_id)

    async def _await_child(self, step_id: int, child_id: str) -> Any:
        outcome = self._history().child_outcome(step_id)
        if outcome is None:
            with self._run.trace.op("wait child", "internal", step_id):
                outcome = await self._wait_child(step_id, child_id)
        return _child_result(child_id, outcome)

    async def _wait_child(self, step_id: int, child_id: str) -> ChildOutcome:
        waiting_since = now_ms()
        r = self._run
        while True:
            self._check_cancelled()
            req = worker_pb2.AwaitChild(
                workflow_id=r.workflow_id,
                epoch=r.epoch,
                step_id=step_id,
                child_workflow_id=child_id,
            )
            res = expect(
                await self._request(worker_pb2.WorkerMessage(await_child=req)), "child_result"
            )
            if res.outcome == DELIVERED:
                return ChildOutcome.from_result(res)
            # Parked once it has waited past the threshold: children can run for days.
            await self._wait_parking(waiting_since, step_id, awaited_workflow_id=child_id)


def _child_result(child_id: str, v: ChildOutcome) -> Any:
    """The awaited workflow's output, or the error its ending raises (live and on replay)."""
    status = v.status
    if status == "SUCCESS":
        return v.output
    if status == "CANCELLED":
        kind, message = "ChildCancelled", f"child workflow {child_id} was cancelled"
    elif status == "MAX_RECOVERY_ATTEMPTS_EXCEEDED":
        kind, message = "ChildDeadLettered", f"child workflow {child_id} was dead-lettered"
    else:
        detail = f"{v.failure_kind}: {v.failure_message}"
        kind, message = "ChildFailed", f"child workflow {child_id} failed: {detail}"
    raise ChildWorkflowFailed(kind, message, workflow_id=child_id, status=status)
