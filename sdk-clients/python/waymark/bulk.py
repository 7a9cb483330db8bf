"""Moving many workflows at once: re-pinning one to another application version, and cancel,
resume, delete or re-pin by filter (`WorkflowService.SetWorkflowVersion` and `BulkWorkflows`).
`Client` has these methods; they live here to keep the client's module to one concern."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar

from ._proto import types_pb2, workflow_pb2, workflow_pb2_grpc
from ._rpc import call
from ._time import to_timestamp
from .types import Workflow, WorkflowStatus


@dataclass(frozen=True, slots=True)
class WorkflowFilter:
    """Which workflows a bulk operation acts on: the filters of a listing, all of which must
    match. `WorkflowFilter()` matches every workflow of the namespace."""

    statuses: Sequence[WorkflowStatus] = ()
    workflow_name: str | None = None
    queue: str | None = None
    # Created at or after / before.
    created_after: datetime | None = None
    created_before: datetime | None = None
    # Running on (PENDING) or last run by this worker.
    worker_id: str | None = None
    # Pinned to this application version.
    app_version: str | None = None
    # The children of this workflow.
    parent_workflow_id: str | None = None
    # Carrying every one of these tags (key and value).
    tags: Mapping[str, str] = field(default_factory=dict)

    def to_proto(self) -> workflow_pb2.WorkflowFilter:
        f = workflow_pb2.WorkflowFilter(
            statuses=[types_pb2.WorkflowStatus.ValueType(s.value) for s in self.statuses],
            workflow_name=self.workflow_name or "",
            queue_name=self.queue or "",
            worker_id=self.worker_id or "",
            app_version=self.app_version or "",
            parent_workflow_id=self.parent_workflow_id or "",
            tags=dict(self.tags),
        )
        if self.created_after is not None:
            f.created_after.CopyFrom(to_timestamp(self.created_after))
        if self.created_before is not None:
            f.created_before.CopyFrom(to_timestamp(self.created_before))
        return f


@dataclass(frozen=True, slots=True)
class BulkAction:
    """What a bulk operation does to each workflow its filter matches: `BulkAction.CANCEL`,
    `BulkAction.RESUME`, `BulkAction.DELETE` (each as the single-workflow call, without
    cascade), or `BulkAction.set_version(app_version, allow_unserved=False)` (as
    `Client.set_version`)."""

    kind: str
    app_version: str = ""
    allow_unserved: bool = False

    CANCEL: ClassVar[BulkAction]
    RESUME: ClassVar[BulkAction]
    DELETE: ClassVar[BulkAction]

    @staticmethod
    def set_version(app_version: str, allow_unserved: bool = False) -> BulkAction:
        return BulkAction("set_version", app_version, allow_unserved)

    def into(self, req: workflow_pb2.BulkWorkflowsRequest) -> None:
        """Sets the request's action."""
        if self.kind == "cancel":
            req.cancel.SetInParent()
        elif self.kind == "resume":
            req.resume.SetInParent()
        elif self.kind == "delete":
            req.delete.SetInParent()
        elif self.kind == "set_version":
            req.set_version.app_version = self.app_version
            req.set_version.allow_unserved = self.allow_unserved
        else:
            raise ValueError(f"unknown bulk action {self.kind!r}")


BulkAction.CANCEL = BulkAction("cancel")
BulkAction.RESUME = BulkAction("resume")
BulkAction.DELETE = BulkAction("delete")


@dataclass(frozen=True, slots=True)
class BulkOutcome:
    """What a bulk operation did, to one batch (`Client.bulk_batch`) or to all (`Client.bulk`)."""

    # Workflows looked at (matched the filter).
    matched: int = 0
    # Of those, the ones the action changed.
    applied: int = 0
    # The others, by the reason the single-workflow call gives (e.g. WORKFLOW_NOT_FINISHED for a
    # delete of one still running, WORKFLOW_FINISHED for a cancel of one already finished).
    skipped: dict[str, int] = field(default_factory=dict)
    # After one batch: the token of the next; None when it was the last (and after `bulk`).
    next_page_token: str | None = None


class BulkCalls:
    """`Client`'s re-pinning and bulk methods (see the module's doc)."""

    _rpc: workflow_pb2_grpc.WorkflowServiceAsyncStub
    _patience: float

    async def set_version(
        self, workflow_id: str, app_version: str, *, allow_unserved: bool = False
    ) -> Workflow:
        """Re-pins the unfinished `workflow_id` to `app_version` — the way to move work off a
        retired version whose workers are gone: its next dispatch goes to that version's
        workers, which replay its history (check with a `Replayer` first that their code
        can). Refused with `RpcError` (FAILED_PRECONDITION) reason VERSION_NOT_SERVED when no
        connected worker of that version registers its name, unless `allow_unserved` (it then
        waits for one); WORKFLOW_FINISHED for a finished one. Retried while the server is
        unavailable: a repeat sets the same version."""
        req = workflow_pb2.SetWorkflowVersionRequest(
            workflow_id=workflow_id, app_version=app_version, allow_unserved=allow_unserved
        )
        r = await call(self._rpc.SetWorkflowVersion, req, retry_for=self._patience)
        return Workflow.from_proto(r.workflow)

    async def count_matching(self, filter: WorkflowFilter) -> int:
        """How many workflows `filter` matches (a bulk operation's dry run: nothing changes)."""
        req = workflow_pb2.BulkWorkflowsRequest(filter=filter.to_proto(), dry_run=True)
        BulkAction.CANCEL.into(req)
        r = await call(self._rpc.BulkWorkflows, req, retry_for=self._patience)
        return r.total

    async def bulk_batch(
        self,
        filter: WorkflowFilter,
        action: BulkAction,
        batch_size: int = 0,
        page_token: str | None = None,
    ) -> BulkOutcome:
        """Applies `action` to one batch of the workflows `filter` matches (at most
        `batch_size`, 1-1000; 0 for 100), from `page_token` (None: the first). A workflow the
        action does not apply to is skipped and counted by reason. Retried while the server is
        unavailable: a repeated batch changes nothing twice."""
        req = workflow_pb2.BulkWorkflowsRequest(
            filter=filter.to_proto(), batch_size=batch_size, page_token=page_token or ""
        )
        action.into(req)
        r = await call(self._rpc.BulkWorkflows, req, retry_for=self._patience)
        return BulkOutcome(r.matched, r.applied, dict(r.skipped), r.next_page_token or None)

    async def bulk(
        self, filter: WorkflowFilter, action: BulkAction, batch_size: int = 0
    ) -> BulkOutcome:
        """Applies `action` to every workflow `filter` matches, batch after batch (see
        `bulk_batch`), and returns the sums. Count first with `count_matching`. Safe to run
        again: what was done is skipped (e.g. WORKFLOW_FINISHED for a second cancel)."""
        matched = applied = 0
        skipped: dict[str, int] = {}
        token: str | None = None
        while True:
            batch = await self.bulk_batch(filter, action, batch_size, token)
            matched += batch.matched
            applied += batch.applied
            for reason, n in batch.skipped.items():
                skipped[reason] = skipped.get(reason, 0) + n
            token = batch.next_page_token
            if token is None:
                return BulkOutcome(matched, applied, skipped)
