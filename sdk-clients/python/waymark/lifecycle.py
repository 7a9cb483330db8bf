"""A workflow's course once started: cancel it, resume it, delete it and its records once it has
finished. `Client` has these methods; they live here to keep the client's module to one concern
(a fork, which starts a workflow, and a delayed start's delay are with the starts; re-pinning
and bulk operations are in `bulk`)."""

from __future__ import annotations

import builtins

from ._proto import workflow_pb2, workflow_pb2_grpc
from ._rpc import call
from .types import Workflow


class LifecycleCalls:
    """`Client`'s cancel, resume and delete methods (see the module's doc)."""

    _rpc: workflow_pb2_grpc.WorkflowServiceAsyncStub
    _patience: float

    async def cancel(self, workflow_id: str, *, cascade: bool = False) -> Workflow:
        """Cancels a workflow (and with `cascade`, its children and theirs). It stops at its
        next await point; a finished workflow is returned as it is."""
        req = workflow_pb2.CancelWorkflowRequest(workflow_id=workflow_id, cascade=cascade)
        r = await call(self._rpc.CancelWorkflow, req, retry_for=self._patience)
        return Workflow.from_proto(r.workflow)

    async def resume(self, workflow_id: str) -> Workflow:
        """Puts a cancelled, dead-lettered or failed (ERROR) workflow back in its queue; it
        replays. An ERROR workflow loses its failure and, when its last recorded step failed,
        that step's record, so the step runs again on the code its workers run now: the way to
        rerun a workflow after fixing the bug that failed it. A SUCCESS or unfinished workflow
        is `RpcError` reason WORKFLOW_NOT_RESUMABLE."""
        req = workflow_pb2.ResumeWorkflowRequest(workflow_id=workflow_id)
        r = await call(self._rpc.ResumeWorkflow, req, retry_for=self._patience)
        return Workflow.from_proto(r.workflow)

    async def delete(self, workflow_id: str, *, cascade: bool = False) -> builtins.list[str]:
        """Deletes a finished workflow and everything recorded for it (steps, messages to it,
        events, stream values); with `cascade`, its child workflows and theirs too. Returns the
        ids deleted, `workflow_id` first. Refused with `RpcError` (code FAILED_PRECONDITION)
        while it or, with `cascade`, a descendant has not finished (reason
        WORKFLOW_NOT_FINISHED: cancel it first), for a child whose parent has not finished
        (PARENT_NOT_FINISHED), or for a tree of more than 10,000 (TOO_MANY_TO_DELETE); a
        workflow that does not exist is NOT_FOUND (WORKFLOW_NOT_FOUND). Not retried when the
        server is unavailable: made again after a lost reply, it would find the workflow gone."""
        req = workflow_pb2.DeleteWorkflowRequest(workflow_id=workflow_id, cascade=cascade)
        r = await call(self._rpc.DeleteWorkflow, req)
        return builtins.list(r.deleted_workflow_ids)
