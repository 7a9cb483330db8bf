"""Durations and times between Python (seconds or `timedelta`, aware `datetime`) and protobuf."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from google.protobuf import duration_pb2, timestamp_pb2

# Everything that takes a duration takes seconds (like asyncio) or a timedelta.
Seconds = float | timedelta

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def seconds(d: Seconds) -> float:
    return d.total_seconds() if isinstance(d, timedelta) else float(d)


def to_duration(d: Seconds) -> duration_pb2.Duration:
    s = seconds(d)
    whole = int(s // 1)
    return duration_pb2.Duration(seconds=whole, nanos=round((s - whole) * 1e9) % 1_000_000_000)


def from_duration(d: duration_pb2.Duration) -> timedelta:
    return timedelta(seconds=d.seconds, microseconds=d.nanos // 1000)


def to_timestamp(t: datetime) -> timestamp_pb2.Timestamp:
    ts = timestamp_pb2.Timestamp()
    ts.FromDatetime(t if t.tzinfo else t.replace(tzinfo=UTC))
    return ts


# The last second a `datetime` (and a valid protobuf Timestamp) can hold: 9999-12-31T23:59:59Z.
_LAST_SECOND = 253_402_300_799


def from_timestamp(ts: timestamp_pb2.Timestamp | None, present: bool = True) -> datetime | None:
    """A timestamp as an aware UTC datetime; `None` for an unset field, and for one past year
    9999, which means never: a worker that parks a wait with no deadline (awaiting a child or a
    remote step) asks to be woken at the largest integer its language has, and the server
    gives that back as the workflow's wake time."""
    if ts is None or not present or ts.seconds > _LAST_SECOND:
        return None
    return ts.ToDatetime(tzinfo=UTC)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def from_ms(ms: int) -> datetime:
    """Milliseconds since the epoch as an aware UTC datetime, exactly (no float rounding)."""
    return _EPOCH + timedelta(milliseconds=ms)


def timestamp_ms(ts: timestamp_pb2.Timestamp) -> int:
    return ts.seconds * 1000 + ts.nanos // 1_000_000
