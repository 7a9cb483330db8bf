"""Finishing a workflow on the server within the message limit.

The completion carries the step records the run held back (see _records). With large step
outputs beside a large workflow output that can come to more than the server takes in one
message — and a message over the limit ends the stream, so the workflow would be dispatched
again and fail the same way, for ever. Such records go first, on their own (the stream splits
them across as many messages as they need); the completion follows once they are durable, as
any request follows the records taken before it."""

from __future__ import annotations

import asyncio
from typing import Any

from .._proto import types_pb2, worker_pb2
from ..errors import PayloadTooLarge
from ._core import log
from ._run import Run

# Room for the request id the stream gives the completion (a varint field: at most 11 bytes).
_REQUEST_ID = 11


async def complete(run: Run, outcome: dict[str, Any], held: list[worker_pb2.RecordStep]) -> None:
    """Sends the completion with `outcome` (`output`, `failure` or `continue_as_new`) and the
    records `held`."""
    msg = worker_pb2.WorkerMessage(
        complete_workflow=worker_pb2.CompleteWorkflow(
            workflow_id=run.workflow_id, epoch=run.epoch, steps=held, **outcome
        )
    )
    try:
        size = msg.ByteSize() + _REQUEST_ID
        if held and size > run.limits.max_message:
            log.debug(
                "completion of %s with its %d step records is %d bytes, over the %d-byte "
                "message limit: sending the records first",
                run.workflow_id,
                len(held),
                size,
                run.limits.max_message,
            )
            if not await _record(run, held):
                return
            del msg.complete_workflow.steps[:]
        await _send(run, msg)
    except PayloadTooLarge as e:
        # Outputs were checked against the payload limit before; only a failure's message (the
        # workflow's, or a step's) can be this large. The workflow fails with a short one.
        failure = types_pb2.Failure(
            kind=e.kind, message=f"the workflow's completion could not be sent: {e.message}"
        )
        short = worker_pb2.CompleteWorkflow(
            workflow_id=run.workflow_id, epoch=run.epoch, failure=failure
        )
        await _send(run, worker_pb2.WorkerMessage(complete_workflow=short))


async def _record(run: Run, held: list[worker_pb2.RecordStep]) -> bool:
    """Sends the records on their own, all at once (a record depends on nothing), and waits for
    every acknowledgement. False when one was refused: the completion would be refused too."""
    msgs = [worker_pb2.WorkerMessage(record_step=r) for r in held]
    replies = await asyncio.gather(*(run.ask(m) for m in msgs))
    for record, reply in zip(held, replies, strict=True):
        if reply.HasField("error"):
            log.info(
                "record of step %d (%r) of %s refused: %s (%s); not completing it",
                record.step_id,
                record.name,
                run.workflow_id,
                reply.error.message,
                reply.error.reason,
            )
            return False
    return True


async def _send(run: Run, msg: worker_pb2.WorkerMessage) -> None:
    reply = await run.ask(msg)
    if reply.HasField("error"):
        log.info(
            "completion of %s refused: %s (%s)",
            run.workflow_id,
            reply.error.message,
            reply.error.reason,
        )
