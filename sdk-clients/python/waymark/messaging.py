"""A client's messages, events and streams: send to a workflow, read what it was sent, read (and
wait for) its events, follow its streams. `Client` has these methods; they live here to keep the
client's module to one concern."""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import AsyncIterator
from typing import Any

import grpc

from . import _rpc
from ._backoff import Backoff
from ._pages import read_all
from ._payload import from_payload, to_payload
from ._proto import workflow_pb2, workflow_pb2_grpc
from ._rpc import call
from ._time import Seconds, seconds, to_duration
from .types import Event, Message, StreamEntry


class MessagingCalls:
    """`Client`'s messaging methods (see the module's doc)."""

    _rpc: workflow_pb2_grpc.WorkflowServiceAsyncStub
    _patience: float

    async def send(
        self,
        workflow_id: str,
        message: Any,
        *,
        topic: str = "",
        idempotency_key: str | None = None,
    ) -> tuple[str, bool]:
        """Sends a message to a workflow, which takes it with `ctx.recv(topic)`. Returns the
        message id and whether it was a duplicate of an earlier send with the same key. Retried
        while the server is unavailable only with an `idempotency_key` (without one, a retry
        could deliver the message twice)."""
        req = workflow_pb2.SendMessageRequest(
            workflow_id=workflow_id,
            topic=topic,
            message=to_payload(message),
            idempotency_key=idempotency_key or "",
        )
        retry_for = self._patience if idempotency_key else 0.0
        r = await call(self._rpc.SendMessage, req, retry_for=retry_for)
        return r.message_id, r.duplicate

    async def messages(self, workflow_id: str) -> builtins.list[Message]:
        """Every message sent to the workflow, consumed or not, oldest first (read a page at a
        time)."""
        req = workflow_pb2.ListMessagesRequest(workflow_id=workflow_id)
        return await read_all(
            self._rpc.ListMessages,
            req,
            lambda r: map(Message.from_proto, r.messages),
            retry_for=self._patience,
        )

    async def get_event(
        self, workflow_id: str, key: str, *, timeout: Seconds | None = None, default: Any = None
    ) -> Any:
        """The current value of a workflow's event, waiting up to `timeout` for it to be set;
        `default` when it was not set (in time)."""
        req = workflow_pb2.GetEventRequest(workflow_id=workflow_id, key=key)
        # Room for the server to answer "not set" itself before the call's deadline.
        room = 5.0
        deadline = None if timeout is None else seconds(timeout) + room

        def attempt(left: float | None) -> Any:
            if left is not None:
                # A retry waits only for what is left of the caller's timeout.
                req.timeout.CopyFrom(to_duration(max(left - room, 0.0)))
            return self._rpc.GetEvent(req, timeout=left)

        r = await _rpc.attempts(attempt, deadline, self._patience)
        return from_payload(r.value) if r.found else default

    async def events(self, workflow_id: str) -> builtins.list[Event]:
        """Every event of the workflow with the history of its values (read a page at a
        time)."""
        req = workflow_pb2.ListEventsRequest(workflow_id=workflow_id)
        return await read_all(
            self._rpc.ListEvents,
            req,
            lambda r: map(Event.from_proto, r.events),
            retry_for=self._patience,
        )

    async def read_stream(
        self, workflow_id: str, key: str, *, from_offset: int = 0
    ) -> AsyncIterator[StreamEntry]:
        """Follows a workflow's stream: `async for entry in client.read_stream(id, key)` yields
        values as they are written and ends when the stream is closed or the workflow ends.
        When the server becomes unavailable, it reads on from the next offset once it is back
        (within the client's patience)."""
        offset = from_offset
        backoff: Backoff | None = None
        while True:
            req = workflow_pb2.ReadStreamRequest(
                workflow_id=workflow_id, key=key, from_offset=offset
            )
            stream = self._rpc.ReadStream(req)
            try:
                async for item in stream:
                    # Patience counts from the latest outage, not from the first.
                    backoff = None
                    offset = item.offset + 1
                    yield StreamEntry(item.offset, from_payload(item.value))
                return
            except grpc.aio.AioRpcError as e:
                error = _rpc.convert(e)
            finally:
                stream.cancel()
            if not _rpc.unavailable(error):
                raise error
            backoff = backoff or Backoff(self._patience)
            pause = backoff.pause()
            if pause is None:
                raise error
            _rpc.log.debug("stream read interrupted (%s); reading on in %.2f s", error, pause)
            await asyncio.sleep(pause)
