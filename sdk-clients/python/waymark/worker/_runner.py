"""The life of one run of a workflow: call its function, then finish the workflow on the
server with the outcome — or, when this worker let go of the run (dropped), send nothing."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from .. import _tracing
from .._payload import from_payload, to_payload
from .._proto import types_pb2, worker_pb2
from ..errors import (
    ContinueAsNew,
    Dropped,
    Parked,
    PayloadTooLarge,
    WorkflowFailed,
    WorkflowInterrupted,
    failure_kind,
    failure_message,
)
from ._complete import complete
from ._context import WorkflowContext
from ._core import log
from ._limits import bounded
from ._run import Run

WorkflowFn = Callable[[WorkflowContext, Any], Awaitable[Any]]


def as_workflow_fn(fn: Callable[..., Awaitable[Any]]) -> WorkflowFn:
    """A registered workflow function, `fn(ctx, input)` or `fn(ctx)`, as one that takes both."""
    if len(inspect.signature(fn).parameters) > 1:
        return fn

    async def call(ctx: WorkflowContext, input: Any) -> Any:
        return await fn(ctx)

    return call


async def run_workflow(run: Run, fn: WorkflowFn | None, input: types_pb2.Payload) -> None:
    """Runs the workflow function and sends its completion; returns when the server has
    answered, or at once when the run ends without one (dropped, or the stream broke). The
    run's `workflow` span is open meanwhile (when OpenTelemetry is installed; not offline)."""
    if not run.offline:
        run.trace.begin(
            run.workflow_name, run.trace_context, run.epoch, run.replays, run.recovery_attempts
        )
    failure: str | None = None
    try:
        with _tracing.current(run.trace.span):
            outcome = await _call(run, fn, input)
        if outcome is not None and "failure" in outcome:
            failure = outcome["failure"].message
        await _finish(run, outcome)
    finally:
        run.trace.finish(failure)


async def _finish(run: Run, outcome: dict[str, Any] | None) -> None:
    """Sends the run's outcome (nothing when dropped)."""
    # Checked after the function returned, whatever it did: code that caught `Dropped` and
    # returned (or failed) anyway must not finish a workflow this worker let go of.
    if run.dropped:
        _log_dropped(run)
        return
    try:
        held = await run.records.settle()
        if run.dropped:  # a flush under way dropped it
            _log_dropped(run)
            return
        if outcome is None:
            # The run stopped without an outcome: what it held back still goes, so no finished
            # step is run again.
            for r in held:
                await run.ask(worker_pb2.WorkerMessage(record_step=r))
            return
        await complete(run, outcome, held)
    except (Dropped, asyncio.CancelledError):
        # Dropped while finishing (the server stayed unavailable, or the stream broke), or
        # cancelled: the server hands the workflow out again, or has finished it.
        log.info("workflow %s let go before it was finished", run.workflow_id)
    except PayloadTooLarge as e:
        # A record held by a run that stopped without an outcome, too large to send (only a
        # step's failure message can be): the run ends without it.
        log.warning("workflow %s ended with a record it could not send: %s", run.workflow_id, e)


async def _call(run: Run, fn: WorkflowFn | None, input: types_pb2.Payload) -> dict[str, Any] | None:
    """The workflow function's outcome as `CompleteWorkflow` fields (`output`, `failure` or
    `continue_as_new`); None when the run ended without one (cancelled, parked, fenced,
    dropped)."""
    try:
        if fn is None:
            raise WorkflowFailed(
                "UnknownWorkflow", f"this worker has no workflow named {run.workflow_name!r}"
            )
        result = await fn(WorkflowContext(run), from_payload(input))
        output = to_payload(result)
        # The server would fail the workflow for an output over the limit too; sending it could
        # end the stream instead, and the workflow would run again.
        run.limits.check_payload("the workflow's output", output)
        return {"output": output}
    except ContinueAsNew as e:
        # Not a failure: the run ends, and the workflow goes on with this input.
        log.info("workflow %s continues as new", run.workflow_id)
        return _continue_as_new(run, e)
    except asyncio.CancelledError:
        log.info("workflow %s stopped: cancelled", run.workflow_id)
    except Parked:
        log.debug("workflow %s parked", run.workflow_id)
    except WorkflowInterrupted as e:
        log.info("workflow %s stopped: %s", run.workflow_id, e)
    except Exception as e:
        log.info("workflow %s failed: %s: %s", run.workflow_id, type(e).__name__, e)
        failure = types_pb2.Failure(kind=failure_kind(e), message=bounded(failure_message(e)))
        return {"failure": failure}
    return None


def _continue_as_new(run: Run, e: ContinueAsNew) -> dict[str, Any]:
    """The completion's `continue_as_new` outcome; a failure when the next run's input is not
    JSON or is over the limit (the server would fail the workflow for it too)."""
    try:
        payload = to_payload(e.input)
        run.limits.check_payload("the next run's input", payload)
    except Exception as err:
        log.info("workflow %s failed to continue as new: %s", run.workflow_id, err)
        failure = types_pb2.Failure(kind=failure_kind(err), message=bounded(failure_message(err)))
        return {"failure": failure}
    return {"continue_as_new": worker_pb2.ContinueAsNew(input=payload)}


def _log_dropped(run: Run) -> None:
    log.info("workflow %s dropped; the server will dispatch it again", run.workflow_id)
