"""Exceptions. `WaymarkError` is the base of everything the SDK raises on purpose.

Inside a workflow, any exception the function lets escape fails the workflow, with the
exception's class name as the failure kind (or `WorkflowFailed.kind`). The interruptions that
end a run without failing it (parked, fenced, dropped, disconnected) derive from
`BaseException`, like `asyncio.CancelledError`, so an `except Exception` in a workflow does not
swallow them.
"""

from __future__ import annotations

from typing import Any

import grpc


class WaymarkError(Exception):
    """Base of the SDK's errors."""


class RpcError(WaymarkError):
    """The server refused a call. `reason` is the stable ErrorInfo reason a program can match
    (e.g. `WORKFLOW_NOT_FOUND`, `DEDUP_ID_TAKEN`); `message` is safe to show."""

    def __init__(
        self,
        code: grpc.StatusCode,
        reason: str,
        message: str,
        metadata: dict[str, str] | None = None,
    ) -> None:
        super().__init__(f"{message} ({reason})")
        self.code = code
        self.reason = reason
        self.message = message
        # ErrorInfo metadata, e.g. `holder_workflow_id` for DEDUP_ID_TAKEN.
        self.metadata = metadata or {}


class PayloadTooLarge(RpcError):
    """A payload (a workflow's or a step's output, a message, an event or stream value, a child's
    or remote step's input) or a whole message is larger than the server takes. The worker
    refuses it before sending, with the reason the server would give; left uncaught in a
    workflow, it fails the workflow with kind PAYLOAD_TOO_LARGE."""

    kind = "PAYLOAD_TOO_LARGE"

    def __init__(self, message: str, *, size: int, limit: int) -> None:
        super().__init__(grpc.StatusCode.RESOURCE_EXHAUSTED, self.kind, message)
        # Bytes of the JSON text (of the encoded message, for a whole message), and the limit.
        self.size = size
        self.limit = limit


class UnavailableError(WaymarkError):
    """The server could not be reached (after the client's retries, for calls it retries)."""


class WorkflowFailed(WaymarkError):
    """A workflow failed with a kind of your choosing. Raise it from a workflow to pick the
    failure kind; the client raises it when the awaited workflow did not succeed."""

    def __init__(self, kind: str, message: str, *, workflow_id: str = "", status: str = "") -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message
        self.workflow_id = workflow_id
        # The workflow's status when raised by the client: ERROR, CANCELLED or
        # MAX_RECOVERY_ATTEMPTS_EXCEEDED.
        self.status = status


class StepFailed(WaymarkError):
    """A step failed for good (its retries exhausted, or its output too large to record).
    Recorded: a replay raises it again. `step_kind` is the recorded failure's kind: StepFailed
    when the function raised, PAYLOAD_TOO_LARGE when its output was over the server's limit, the
    remote step's own for a remote step. (`kind`, the workflow's failure kind when this is left
    uncaught, stays StepFailed.)"""

    kind = "StepFailed"

    def __init__(self, name: str, message: str, step_kind: str = "StepFailed") -> None:
        super().__init__(f"step {name!r} failed: {message}")
        self.name = name
        self.message = message
        self.step_kind = step_kind or "StepFailed"


class NonDeterminismError(WaymarkError):
    """The workflow called a different step than its history records at that position."""

    kind = "NonDeterminism"


class ChildWorkflowFailed(WorkflowFailed):
    """An awaited child workflow failed (`ChildFailed`), was cancelled (`ChildCancelled`) or
    dead-lettered (`ChildDeadLettered`)."""


class WorkflowInterrupted(BaseException):
    """This run of the workflow ends here without finishing it; someone else carries on."""


class Parked(WorkflowInterrupted):
    """The workflow was released from this worker while it waits; it is dispatched again (and
    replays to the wait) when the wait resolves."""


class Fenced(WorkflowInterrupted):
    """Another dispatch owns the workflow now; this run stops without writing anything."""


class Dropped(WorkflowInterrupted):
    """This worker let go of the run without finishing it: the server stayed unavailable past
    the worker's patience, or the stream broke while the run waited for an answer. Nothing more
    is sent for it — every later operation raises this again, and its completion is never sent
    — and the server dispatches the workflow again, which replays from its checkpoints."""


class Disconnected(Dropped):
    """The stream to the server broke; the server hands the workflow out again."""


class HistoryEnded(WorkflowInterrupted):
    """Only in an offline replay (`Replayer`): the workflow made a call at `step_id`, a position
    its history does not record, where a live run would go on — ask the server, run a step,
    read the clock. The replay ends here (`Suspended`) instead, having sent and run nothing."""

    def __init__(self, step_id: int) -> None:
        super().__init__(f"the history ends at step {step_id}")
        self.step_id = step_id


class ContinueAsNew(BaseException):
    """Not a failure: this run ends and the workflow goes on under its id with `input` and an
    empty history. Raised by `WorkflowContext.continue_as_new`; let it escape the workflow
    function. A `BaseException`, like the interruptions, so an `except Exception` in the
    workflow does not swallow it. `input` is the next run's input, as JSON values."""

    def __init__(self, input: Any) -> None:
        super().__init__("continued as new")
        self.input = input


def failure_kind(e: BaseException) -> str:
    """The failure kind recorded for an exception that fails a workflow."""
    kind = getattr(e, "kind", None)
    return kind if isinstance(kind, str) and kind else type(e).__name__


def failure_message(e: BaseException) -> str:
    """The failure message recorded beside `failure_kind(e)`. An error that names its own kind
    gives its message alone (its text repeats the kind: "PaymentDeclined: card expired"), as
    every SDK records it; any other exception, its text."""
    if isinstance(e, WorkflowFailed | PayloadTooLarge):
        return e.message
    return str(e) or type(e).__name__
