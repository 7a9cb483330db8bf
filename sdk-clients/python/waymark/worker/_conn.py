"""The sending half of a worker stream, shared by every workflow running on it: requests with
a correlation id answered by a `Reply`, and messages that get none (credits, heartbeats)."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncIterator

from .._proto import worker_pb2
from ..errors import Disconnected, PayloadTooLarge
from ._limits import Limits

log = logging.getLogger("waymark.worker")

# Most messages sent as one batch.
MAX_BATCH = 256

# A message waiting to go out, with the bytes of its encoding (measured once, when queued).
Queued = tuple[worker_pb2.WorkerMessage, int]


class Conn:
    def __init__(self) -> None:
        # None closes the request stream.
        self.outbox: asyncio.Queue[Queued | None] = asyncio.Queue()
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[worker_pb2.Reply]] = {}
        self.closed = False
        # What the server takes; its `Welcome` says (the defaults until then: only the hello,
        # which is small, goes before it).
        self.limits = Limits()

    async def request(self, msg: worker_pb2.WorkerMessage) -> worker_pb2.Reply:
        """Sends a request and waits for the server's reply; `Disconnected` if the stream ends
        first, `PayloadTooLarge` (nothing sent) if the message is larger than the server
        takes."""
        if self.closed:
            raise Disconnected("the worker stream is closed")
        msg.request_id = next(self._ids)
        size = self._measure(msg)
        fut: asyncio.Future[worker_pb2.Reply] = asyncio.get_running_loop().create_future()
        self._pending[msg.request_id] = fut
        self.outbox.put_nowait((msg, size))
        try:
            return await fut
        finally:
            self._pending.pop(msg.request_id, None)

    def send(self, msg: worker_pb2.WorkerMessage) -> None:
        """Sends a message that gets no reply; dropped once the stream is closed, or (logged)
        when it is larger than the server takes."""
        if self.closed:
            return
        try:
            self.outbox.put_nowait((msg, self._measure(msg)))
        except PayloadTooLarge as e:
            log.error("not sending a %s: %s", msg.WhichOneof("kind"), e)

    def _measure(self, msg: worker_pb2.WorkerMessage) -> int:
        """The message's encoded size. One over the limit would end the stream, and with it
        every workflow on it: it is refused here instead. (The payload checks keep what a
        workflow sends well under the limit; this is the guard behind them.)"""
        size = msg.ByteSize()
        if size > self.limits.max_message:
            raise PayloadTooLarge(
                f"a {msg.WhichOneof('kind')} message of {size} bytes is larger than the "
                f"{self.limits.max_message} bytes the server takes",
                size=size,
                limit=self.limits.max_message,
            )
        return size

    async def outgoing(self) -> AsyncIterator[worker_pb2.WorkerMessage]:
        """The stream's messages, in order. Whatever queued while the last write was under way
        goes out as one `Batch`: each stream write costs the gRPC binding far more than its
        bytes, and a busy worker has many ready at once. A batch stops short of the server's
        message limit (the next one carries the rest). The hello goes alone (it must come
        first, and the server reads it only there)."""
        carried: Queued | None = None
        while True:
            first = carried if carried is not None else await self.outbox.get()
            carried = None
            if first is None:
                return
            m, size = first
            batch, content = [m], _in_batch(size)
            closing = False
            while not m.HasField("hello") and len(batch) < MAX_BATCH and not self.outbox.empty():
                nxt = self.outbox.get_nowait()
                if nxt is None:
                    closing = True
                    break
                grown = content + _in_batch(nxt[1])
                if _batch_size(grown) > self.limits.max_message:
                    carried = nxt
                    break
                batch.append(nxt[0])
                content = grown
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


# Sizes in the protobuf encoding. A message inside `Batch.messages` (field 1) costs a one-byte
# tag and its length as a varint besides its own bytes; the batch as a whole is field 18 of
# `WorkerMessage`: a two-byte tag and the varint length of its content.
def _in_batch(size: int) -> int:
    return 1 + _varint_len(size) + size


def _batch_size(content: int) -> int:
    return 2 + _varint_len(content) + content


def _varint_len(n: int) -> int:
    return max(1, (n.bit_length() + 6) // 7)
