"""gRPC plumbing shared by the client and the worker: the channel, and server errors as
`RpcError` with their ErrorInfo reason.

The reason travels in the `grpc-status-details-bin` trailer (a `google.rpc.Status` holding an
`ErrorInfo`). Those two messages are declared here, in a private descriptor pool, rather than
pulling in googleapis-common-protos for two small messages.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from .errors import RpcError, UnavailableError

DEFAULT_SERVER = "127.0.0.1:7450"

_MAX_MESSAGE = 256 * 1024 * 1024
CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", _MAX_MESSAGE),
    ("grpc.keepalive_time_ms", 20_000),
    ("grpc.keepalive_timeout_ms", 60_000),
]


def target(server: str | None) -> str:
    """`host:port` from an address or URL; `WAYMARK_SERVER`, else 127.0.0.1:7450."""
    addr = (server or os.environ.get("WAYMARK_SERVER", "").strip() or DEFAULT_SERVER).strip()
    if "://" in addr:
        addr = addr.split("://", 1)[1]
    return addr.rstrip("/")


def channel(server: str | None) -> grpc.aio.Channel:
    return grpc.aio.insecure_channel(target(server), options=CHANNEL_OPTIONS)


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


R = TypeVar("R")


async def call(f: Callable[..., Awaitable[R]], request: Any, timeout: float | None = None) -> R:
    """One unary call, with server errors raised as the SDK's."""
    try:
        return await f(request, timeout=timeout)
    except grpc.aio.AioRpcError as e:
        raise convert(e) from None
