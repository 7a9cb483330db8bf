"""Queues from a client (`waymark.v1.QueueService`): `client.queues.create(...)` and friends."""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import grpc
from google.protobuf import field_mask_pb2

from ._pages import read_all
from ._proto import queue_pb2, queue_pb2_grpc
from ._rpc import call
from ._time import Seconds, from_duration, from_timestamp, to_duration


@dataclass(frozen=True, slots=True)
class RateLimit:
    """At most `max_starts` starts in any window of `period`."""

    max_starts: int
    period: Seconds


@dataclass(frozen=True, slots=True)
class Queue:
    """A queue as the server reports it. `None` limits are no limit."""

    name: str
    worker_concurrency: int | None
    global_concurrency: int | None
    rate_limit: RateLimit | None
    partition_concurrency: int | None
    created_at: datetime | None
    updated_at: datetime | None

    @classmethod
    def from_proto(cls, q: queue_pb2.Queue) -> Queue:
        rate = None
        if q.HasField("rate_limit"):
            period: timedelta = from_duration(q.rate_limit.period)
            rate = RateLimit(q.rate_limit.max_starts, period)
        return cls(
            name=q.name,
            worker_concurrency=q.worker_concurrency if q.HasField("worker_concurrency") else None,
            global_concurrency=q.global_concurrency if q.HasField("global_concurrency") else None,
            rate_limit=rate,
            partition_concurrency=(
                q.partition_concurrency if q.HasField("partition_concurrency") else None
            ),
            created_at=from_timestamp(q.created_at, q.HasField("created_at")),
            updated_at=from_timestamp(q.updated_at, q.HasField("updated_at")),
        )


class _Keep:
    def __repr__(self) -> str:
        return "KEEP"


# An `update` argument left at KEEP leaves that limit as it is; None removes it.
KEEP: Any = _Keep()

_LIMITS = ("worker_concurrency", "global_concurrency", "partition_concurrency")


def _wire(name: str, limits: dict[str, Any]) -> queue_pb2.Queue:
    q = queue_pb2.Queue(name=name)
    for field in _LIMITS:
        if limits.get(field) is not None:
            setattr(q, field, limits[field])
    rate: RateLimit | None = limits.get("rate_limit")
    if rate is not None:
        q.rate_limit.max_starts = rate.max_starts
        q.rate_limit.period.CopyFrom(to_duration(rate.period))
    return q


class Queues:
    """Named lanes of work with limits the server keeps across every replica and worker."""

    def __init__(self, channel: grpc.aio.Channel, retry_for: float = 0.0) -> None:
        # Reads are retried this long while the server is unavailable; writes are not.
        self._retry_for = retry_for
        self._rpc = queue_pb2_grpc.QueueServiceStub(channel)

    async def create(
        self,
        name: str,
        *,
        worker_concurrency: int | None = None,
        global_concurrency: int | None = None,
        rate_limit: RateLimit | None = None,
        partition_concurrency: int | None = None,
    ) -> Queue:
        """Creates a queue; `RpcError` reason QUEUE_EXISTS when the name is taken."""
        q = _wire(name, locals())
        r = await call(self._rpc.CreateQueue, queue_pb2.CreateQueueRequest(queue=q))
        return Queue.from_proto(r.queue)

    async def update(
        self,
        name: str,
        *,
        worker_concurrency: int | None = KEEP,
        global_concurrency: int | None = KEEP,
        rate_limit: RateLimit | None = KEEP,
        partition_concurrency: int | None = KEEP,
    ) -> Queue:
        """Changes the limits given (None removes one); the others stay as they are."""
        given = {
            k: v for k, v in locals().items() if k in (*_LIMITS, "rate_limit") and v is not KEEP
        }
        if not given:
            return await self.get(name)
        req = queue_pb2.UpdateQueueRequest(
            queue=_wire(name, given), update_mask=field_mask_pb2.FieldMask(paths=sorted(given))
        )
        r = await call(self._rpc.UpdateQueue, req)
        return Queue.from_proto(r.queue)

    async def get(self, name: str) -> Queue:
        req = queue_pb2.GetQueueRequest(name=name)
        r = await call(self._rpc.GetQueue, req, retry_for=self._retry_for)
        return Queue.from_proto(r.queue)

    async def list(self) -> builtins.list[Queue]:
        """Every queue, by name (read a page at a time)."""
        req = queue_pb2.ListQueuesRequest()
        return await read_all(
            self._rpc.ListQueues,
            req,
            lambda r: map(Queue.from_proto, r.queues),
            retry_for=self._retry_for,
        )

    async def delete(self, name: str) -> None:
        """Removes a queue; "default" cannot be removed (reason QUEUE_PROTECTED)."""
        await call(self._rpc.DeleteQueue, queue_pb2.DeleteQueueRequest(name=name))
