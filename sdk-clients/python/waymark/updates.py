"""A client's workflow updates: ask a running workflow something and get its answer in the same
call. The workflow takes the update with `ctx.recv_update(name)` and answers it with
`ctx.answer_update` (or refuses it with `ctx.reject_update`). `Client` has the method; it lives
here to keep the client's module to one concern."""

from __future__ import annotations

import os
import time
import uuid
from typing import Any

from . import _rpc
from ._payload import from_payload, to_payload
from ._proto import workflow_pb2, workflow_pb2_grpc
from ._time import Seconds, seconds, to_duration

# Room for the server to answer UPDATE_PENDING itself before the call's deadline.
_ROOM = 5.0
# The least wait a resend asks for (zero is refused): once the caller's timeout has run out, a
# resend still learns whether the answer is there, and otherwise gets UPDATE_PENDING.
_LEAST_WAIT = 0.001


class UpdateCalls:
    """`Client`'s update method (see the module's doc)."""

    _rpc: workflow_pb2_grpc.WorkflowServiceAsyncStub
    _patience: float

    async def update_workflow(
        self,
        workflow_id: str,
        name: str,
        args: Any = None,
        *,
        update_id: str | None = None,
        timeout: Seconds | None = None,
    ) -> Any:
        """Sends update `name` with `args` (JSON) to workflow `workflow_id` and waits up to
        `timeout` (the server's 60 s when None) for its answer, which it returns.

        The same `update_id` is the same update: delivered once and answered once, so calling
        again with it returns the first answer without the workflow doing anything twice. One
        is made here (a UUID v7) when not given, so that the call, resent while the server is
        unavailable, stays one update.

        Raises `RpcError` with reason UPDATE_REJECTED (code FAILED_PRECONDITION) when the
        workflow rejected it (its reason is in the message), UPDATE_PENDING (code
        DEADLINE_EXCEEDED) when it had not answered within the timeout — call again with the
        same update id (in `metadata["update_id"]`) to keep waiting — UPDATE_NOT_ANSWERED (code
        FAILED_PRECONDITION) when it ended without answering, WORKFLOW_NOT_RUNNING when it had
        ended before, WORKFLOW_NOT_FOUND when there is no such workflow; a zero timeout is
        INVALID_ARGUMENT."""
        req = workflow_pb2.UpdateWorkflowRequest(
            workflow_id=workflow_id,
            name=name,
            args=to_payload(args),
            update_id=update_id or str(uuid7()),
        )
        deadline = None
        if timeout is not None:
            # As given, even when zero or negative: the server's refusal says what is wrong.
            req.timeout.CopyFrom(to_duration(timeout))
            deadline = max(seconds(timeout), 0.0) + _ROOM
        sent = False

        def attempt(left: float | None) -> Any:
            nonlocal sent
            if sent and left is not None:
                # A resend waits only for what is left of the caller's timeout.
                req.timeout.CopyFrom(to_duration(max(left - _ROOM, _LEAST_WAIT)))
            sent = True
            return self._rpc.UpdateWorkflow(req, timeout=left)

        r = await _rpc.attempts(attempt, deadline, self._patience)
        return from_payload(r.result)


def uuid7() -> uuid.UUID:
    """A UUID version 7 (RFC 9562; the standard library has one from Python 3.14): the time in
    ms, then random bits, so that update ids sort by when they were made, as the server's own
    do."""
    value = (time.time_ns() // 1_000_000 & (1 << 48) - 1) << 80
    value |= int.from_bytes(os.urandom(10)) & (1 << 80) - 1
    value = value & ~(0xF << 76) | 0x7 << 76  # the version
    value = value & ~(0x3 << 62) | 0x2 << 62  # the variant, RFC 9562's
    return uuid.UUID(int=value)
