"""Worker requests the server answered UNAVAILABLE are sent again, unchanged, with backoff.

UNAVAILABLE (whatever its reason, e.g. STORE_UNAVAILABLE while the database restarts) says
nothing about the workflow: it is the server's trouble, never the workflow's failure. Sending
the same request again is safe — every write is fenced by the dispatch's epoch and idempotent
at its step position: a step recorded twice with the same result is recorded once, a repeated
completion is adopted, and the built-in writes are steps, so a resend returns the answer
recorded the first time."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import grpc

from .._backoff import Backoff
from .._proto import worker_pb2
from ._conn import Conn

log = logging.getLogger("waymark.worker")

UNAVAILABLE = grpc.StatusCode.UNAVAILABLE.value[0]


class OutOfPatience(Exception):
    """The server kept answering UNAVAILABLE for longer than the worker waits."""


def unavailable(reply: worker_pb2.Reply) -> bool:
    return reply.WhichOneof("result") == "error" and reply.error.code == UNAVAILABLE


async def request(
    conn: Conn,
    msg: worker_pb2.WorkerMessage,
    patience: float,
    check: Callable[[], None] | None = None,
) -> worker_pb2.Reply:
    """Sends `msg` and returns the first answer that is not UNAVAILABLE. `OutOfPatience` after
    `patience` seconds of UNAVAILABLE; `Disconnected` if the stream ends first. `check`, when
    given, is called before each sending (the first and every resend); what it raises ends the
    request there, unsent."""
    backoff: Backoff | None = None
    while True:
        if check is not None:
            check()
        reply = await conn.request(msg)
        if not unavailable(reply):
            return reply
        backoff = backoff or Backoff(patience)
        pause = backoff.pause()
        if pause is None:
            raise OutOfPatience(f"{reply.error.message} ({reply.error.reason})")
        log.debug(
            "%s answered UNAVAILABLE (%s); sending it again in %.2f s",
            msg.WhichOneof("kind"),
            reply.error.reason,
            pause,
        )
        await asyncio.sleep(pause)
