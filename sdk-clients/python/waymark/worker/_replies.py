"""The server's answers to a workflow's requests, as results or as the exceptions the workflow
sees."""

from __future__ import annotations

import asyncio
from typing import Any

from .._proto import worker_pb2
from ..errors import Fenced, NonDeterminismError, WorkflowFailed


def refused(e: worker_pb2.ReplyError) -> BaseException:
    """A refused write as the exception the workflow sees. (UNAVAILABLE never gets here: it is
    resent, or the run is dropped.)"""
    if e.reason == "STALE_EPOCH":
        return Fenced(e.message)
    if e.reason == "WORKFLOW_NOT_RUNNING":
        # Cancelled (or finished elsewhere): the run stops as a cancelled task does.
        return asyncio.CancelledError(e.message)
    if e.reason == "NON_DETERMINISM":
        return NonDeterminismError(e.message)
    return WorkflowFailed(e.reason, e.message)


def expect(reply: worker_pb2.Reply, field: str) -> Any:
    """The reply's `field`, or the refusal raised."""
    which = reply.WhichOneof("result")
    if which == field:
        return getattr(reply, field)
    if which == "error":
        raise refused(reply.error)
    raise WorkflowFailed("UnexpectedReply", f"the server answered {which!r}, expected {field!r}")


def check_recorded(reply: worker_pb2.Reply) -> None:
    expect(reply, "step_recorded")
