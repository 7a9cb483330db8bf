"""gRPC plumbing shared by the client and the worker: the channel (built by `_connection`), and
server errors as `RpcError` with their ErrorInfo reason.

The reason travels in the `grpc-status-details-bin` trailer (a `google.rpc.Status` holding an
`ErrorInfo`). Those two messages are declared here, in a private descriptor pool, rather than
pulling in googleapis-common-protos for two small messages.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from ._backoff import Backoff
from ._connection import Connection, open_channel, resolve
from .errors import RpcError, UnavailableError

log = logging.getLogger("waymark.client")


def channel(where: Connection | str | None) -> grpc.aio.Channel:
    """The channel to the server: a resolved `Connection`, or an address (with every other
    option from the environment)."""
    return open_channel(where if isinstance(where, Connection) else resolve(where))


def _status_classes() -> tuple[Any, Any]:
    f = descriptor_pb2.FileDescriptorProto(
        name="waymark_sdk/rpc_status.proto", package="google.rpc", syntax="proto3"
    )
    T = descriptor_pb2.FieldDescriptorProto
    status = f.message_type.add(name="Status")
    status.field.add(name="code", number=1, type=T.TYPE_INT32, label=T.LABEL_OPTIONAL)
    status.field.add(name="message", number=2, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
    status.field.add(
        name="details",
        number=3,
        type=T.TYPE_MESSAGE,
        label=T.LABEL_REPEATED,
        type_name=".google.rpc.Any",
    )
    # Any's shape, declared locally so the pool needs no well-known imports.
    anyp = f.message_type.add(name="Any")
    anyp.field.add(name="type_url", number=1, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
    anyp.field.add(name="value", number=2, type=T.TYPE_BYTES, label=T.LABEL_OPTIONAL)
    info = f.message_type.add(name="ErrorInfo")
    info.field.add(name="reason", number=1, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
    info.field.add(name="domain", number=2, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
    entry = info.nested_type.add(name="MetadataEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
    info.field.add(
        name="metadata",
        number=3,
        type=T.TYPE_MESSAGE,
        label=T.LABEL_REPEATED,
        type_name=".google.rpc.ErrorInfo.MetadataEntry",
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return (
        message_factory.GetMessageClass(pool.FindMessageTypeByName("google.rpc.Status")),
        message_factory.GetMessageClass(pool.FindMessageTypeByName("google.rpc.ErrorInfo")),
    )


_Status, _ErrorInfo = _status_classes()


def _error_info(e: grpc.aio.AioRpcError) -> tuple[str, dict[str, str]] | None:
    for key, value in e.trailing_metadata() or ():
        if key != "grpc-status-details-bin" or not isinstance(value, bytes):
            continue
        status = _Status.FromString(value)
        for detail in status.details:
            if detail.type_url.endswith("/google.rpc.ErrorInfo"):
                info = _ErrorInfo.FromString(detail.value)
                return info.reason, dict(info.metadata)
    return None


def convert(e: grpc.aio.AioRpcError) -> Exception:
    """The SDK's error for a failed call."""
    found = _error_info(e)
    code = e.code()
    if found is None and code == grpc.StatusCode.UNAVAILABLE:
        return UnavailableError(f"the Waymark server is unavailable: {e.details()}")
    reason, metadata = found or (code.name, {})
    return RpcError(code, reason, e.details() or "", metadata)


def unavailable(e: Exception) -> bool:
    """The server could not be reached, or could not reach its database: worth trying again."""
    if isinstance(e, UnavailableError):
        return True
    return isinstance(e, RpcError) and e.code == grpc.StatusCode.UNAVAILABLE


R = TypeVar("R")


async def call(
    f: Callable[..., Awaitable[R]],
    request: Any,
    timeout: float | None = None,
    *,
    retry_for: float = 0.0,
) -> R:
    """One unary call, with server errors raised as the SDK's. With `retry_for`, see
    `attempts`: only for calls that are safe to make twice."""
    return await attempts(lambda left: f(request, timeout=left), timeout, retry_for)


async def attempts(
    make: Callable[[float | None], Awaitable[R]], timeout: float | None, retry_for: float
) -> R:
    """Makes a call with `make(seconds left of timeout)`, and makes it again, with backoff, while
    the server answers UNAVAILABLE — for up to `retry_for` seconds and within `timeout`. Past
    either, the last error is raised. `retry_for` 0 makes one attempt."""
    ends = None if timeout is None else time.monotonic() + timeout
    backoff: Backoff | None = None
    while True:
        left = None if ends is None else max(ends - time.monotonic(), 0.0)
        try:
            return await make(left)
        except grpc.aio.AioRpcError as e:
            error = convert(e)
        if retry_for <= 0 or not unavailable(error):
            raise error
        backoff = backoff or Backoff(retry_for)
        pause = backoff.pause()
        if pause is None or (ends is not None and time.monotonic() + pause >= ends):
            raise error
        log.debug("the server is unavailable (%s); retrying in %.2f s", error, pause)
        await asyncio.sleep(pause)
