"""The sending half of a worker stream, shared by every workflow running on it: requests with
a correlation id answered by a `Reply`, and messages that get none (credits, heartbeats)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator

from .._proto import worker_pb2
from ..errors import Disconnected

# Most messages sent as one batch.
MAX_BATCH = 256


class Conn:
    def __init__(self) -> None:
        # None closes the request stream.
        self.outbox: asyncio.Queue[worker_pb2.WorkerMessage | None] = asyncio.Queue()
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[worker_pb2.Reply]] = {}
        self.closed = False

    async def request(self, msg: worker_pb2.WorkerMessage) -> worker_pb2.Reply:
        """Sends a request and waits for the server's reply; `Disconnected` if the stream ends
        first."""
        if self.closed:
            raise Disconnected("the worker stream is closed")
        msg.request_id = next(self._ids)
        fut: asyncio.Future[worker_pb2.Reply] = asyncio.get_running_loop().create_future()
        self._pending[msg.request_id] = fut
        self.outbox.put_nowait(msg)
        try:
            return await fut
        finally:
            self._pending.pop(msg.request_id, None)

    def send(self, msg: worker_pb2.WorkerMessage) -> None:
        """Sends a message that gets no reply; dropped once the stream is closed."""
        if not self.closed:
            self.outbox.put_nowait(msg)

    async def outgoing(self) -> AsyncIterator[worker_pb2.WorkerMessage]:
        """The stream's messages, in order. Whatever queued while the last write was under way
        goes out as one `Batch`: each stream write costs the gRPC binding far more than its
        bytes, and a busy worker has many ready at once. The hello goes alone (it must come
        first, and the server reads it only there)."""
        while (m := await self.outbox.get()) is not None:
            batch = [m]
            closing = False
            while not m.HasField("hello") and len(batch) < MAX_BATCH and not self.outbox.empty():
                nxt = self.outbox.get_nowait()
                if nxt is None:
                    closing = True
                    break
                batch.append(nxt)
            if len(batch) == 1:
                yield m
            else:
                yield worker_pb2.WorkerMessage(batch=worker_pb2.Batch(messages=batch))
            if closing:
                return

    def resolve(self, reply: worker_pb2.Reply) -> None:
        fut = self._pending.pop(reply.request_id, None)
        if fut is not None and not fut.done():
            fut.set_result(reply)

    def close(self) -> None:
        """Fails every request still waiting: the stream they were sent on is gone."""
        self.closed = True
        self.outbox.put_nowait(None)
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(Disconnected("the worker stream ended"))
        self._pending.clear()
