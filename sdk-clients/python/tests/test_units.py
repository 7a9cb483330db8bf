"""Pieces that need no server: JSON payloads, retry backoff, addresses, durations, the worker
stream's batching."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from google.protobuf import timestamp_pb2

from waymark import RetryPolicy
from waymark._connection import resolve
from waymark._payload import from_payload, to_payload
from waymark._proto import worker_pb2
from waymark._time import from_duration, from_timestamp, to_duration
from waymark.worker._conn import Conn


def test_json_round_trip_keeps_integers_integral() -> None:
    value = {"n": 3, "f": 2.5, "big": 2**40, "s": "x", "l": [None, True, {"k": []}], "t": (1, 2)}
    back = from_payload(to_payload(value))
    assert back == {**value, "t": [1, 2]}
    assert isinstance(back["n"], int) and isinstance(back["f"], float)
    assert from_payload(None) is None
    # Empty containers stay what they were, not null.
    assert from_payload(to_payload({"d": {}, "l": []})) == {"d": {}, "l": []}
    assert from_payload(to_payload({})) == {}


def test_non_json_values_are_refused() -> None:
    with pytest.raises(TypeError):
        to_payload({1: "int key"})
    with pytest.raises(TypeError):
        to_payload(float("nan"))
    with pytest.raises(TypeError):
        to_payload(object())


def test_retry_backoff_grows_and_is_capped() -> None:
    p = RetryPolicy(max_attempts=5, initial_interval=0.1, backoff=2.0, max_interval=0.35)
    assert [round(p.delay(n), 3) for n in (1, 2, 3, 60)] == [0.1, 0.2, 0.35, 0.35]
    assert RetryPolicy(initial_interval=timedelta(milliseconds=50)).delay(1) == 0.05


def test_addresses_and_durations(monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve("http://10.1.2.3:7450/").target == "10.1.2.3:7450"
    monkeypatch.setenv("WAYMARK_SERVER", "example:1")
    assert resolve(None).target == "example:1"
    monkeypatch.delenv("WAYMARK_SERVER")
    assert resolve(None).target == "127.0.0.1:7450"
    assert from_duration(to_duration(1.25)) == timedelta(seconds=1.25)
    assert from_duration(to_duration(timedelta(hours=2))) == timedelta(hours=2)


async def test_queued_messages_go_out_as_one_batch_and_the_hello_alone() -> None:
    conn = Conn()
    hello = worker_pb2.WorkerMessage(hello=worker_pb2.Hello(worker_id="w"))
    credits = [worker_pb2.WorkerMessage(credit=worker_pb2.Credit(workflows=n)) for n in (1, 2, 3)]
    for m in [hello, *credits]:
        conn.send(m)
    out = conn.outgoing()
    assert await anext(out) == hello
    batch = await anext(out)
    assert list(batch.batch.messages) == credits
    # One message waiting goes as itself; closing ends the stream after what was queued.
    conn.send(credits[0])
    conn.close()
    assert await anext(out) == credits[0]
    with pytest.raises(StopAsyncIteration):
        await anext(out)


def test_timestamps_past_year_9999_mean_never() -> None:
    last = timestamp_pb2.Timestamp(seconds=253_402_300_799)
    assert from_timestamp(last) == datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
    # The wake time of a workflow parked awaiting a child: the largest millisecond (Python and
    # Go workers ask for it), or JavaScript's largest safe integer (TypeScript workers).
    never = timestamp_pb2.Timestamp(seconds=(2**63 - 1) // 1000, nanos=807_000_000)
    assert from_timestamp(never) is None
    assert from_timestamp(timestamp_pb2.Timestamp(seconds=(2**53 - 1) // 1000)) is None
    assert from_timestamp(last, present=False) is None
