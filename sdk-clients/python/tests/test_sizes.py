"""The worker keeps within the sizes the server's `Welcome` states: no payload over
`max_payload_bytes` (an output too large fails the workflow or the step; a value too large to
send is refused before it is sent) and no message over `max_message_bytes` (a batch is split;
step records too large to ride on the completion go before it). Against a fake server
(tests/fake_server.py) stating small limits, so the sizes stay small; test_sizes_live.py runs
the defaults against a real server."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from fake_server import FakeServer, accept

from waymark import PayloadTooLarge, RetryPolicy, StepFailed, WorkflowContext
from waymark._payload import from_payload, to_payload
from waymark._proto import types_pb2, worker_pb2
from waymark.worker._conn import Conn
from waymark.worker._limits import (
    DEFAULT_MAX_MESSAGE,
    DEFAULT_MAX_PAYLOAD,
    ENVELOPE,
    MAX_FAILURE_MESSAGE,
    Limits,
    json_size,
)

# Shaped as the server's (its message limit is two payloads and 1 MiB): room in a message for
# one payload and the envelope the SDK keeps, not for three payloads.
PAYLOAD, MESSAGE = 10_000, 28_000
SMALL = worker_pb2.Welcome(max_payload_bytes=PAYLOAD, max_message_bytes=MESSAGE)


def test_a_server_that_states_no_limits_gets_the_defaults() -> None:
    assert Limits.from_welcome(worker_pb2.Welcome()) == Limits(4 * 1024 * 1024, 9 * 1024 * 1024)
    assert (DEFAULT_MAX_PAYLOAD, DEFAULT_MAX_MESSAGE) == (4 * 1024 * 1024, 9 * 1024 * 1024)
    assert Limits.from_welcome(SMALL) == Limits(PAYLOAD, MESSAGE)


def test_payloads_are_measured_as_compact_utf8_json() -> None:
    value = {"a": 'é\n"', "b": [1, 2.5, None, True]}
    assert json_size(to_payload(value)) == len('{"a":"é\\n\\"","b":[1,2.5,null,true]}'.encode())
    limits = Limits.from_welcome(SMALL)
    # A control character is six bytes of JSON ("\u0001") for one of protobuf: measured, not
    # guessed from the encoding.
    limits.check_payload("at the limit", to_payload("\x01" * 1666))  # 9998 bytes
    with pytest.raises(PayloadTooLarge) as e:
        limits.check_payload("one over", to_payload("\x01" * 1667))  # 10004 bytes
    assert (e.value.reason, e.value.kind, e.value.size, e.value.limit) == (
        "PAYLOAD_TOO_LARGE",
        "PAYLOAD_TOO_LARGE",
        10004,
        PAYLOAD,
    )
    assert "one over is 10004 bytes of JSON" in e.value.message


def test_a_payload_whose_encoding_would_not_fit_in_a_message_is_too_large() -> None:
    limits = Limits.from_welcome(SMALL)
    # 8001 bytes of JSON, within the payload limit; eleven bytes each encoded, 44,000 in all.
    zeros = to_payload([0] * 4000)
    assert json_size(zeros) == 8001
    with pytest.raises(PayloadTooLarge) as e:
        limits.check_payload("the zeros", zeros)
    assert e.value.size == zeros.ByteSize() > MESSAGE
    assert e.value.message == (
        f"the zeros is {zeros.ByteSize()} bytes encoded; a worker message carries at most "
        f"{MESSAGE - ENVELOPE}"
    )


async def test_an_output_over_the_payload_limit_fails_the_workflow() -> None:
    fake = FakeServer(welcome=SMALL)

    @fake.workflow("sized")
    async def sized(ctx: WorkflowContext, n: int) -> str:
        return "x" * n

    try:
        # Quoted, 9998 characters are exactly the limit; one more is over it.
        fits = fake.dispatch("wf-fits", "sized", 9998)
        over = fake.dispatch("wf-over", "sized", 9999)
        await fake.ended(fits)
        await fake.ended(over)
        done = {c.workflow_id: c for c in fake.of_kind("complete_workflow")}
        assert from_payload(done["wf-fits"].output) == "x" * 9998
        failed = done["wf-over"]
        assert not failed.HasField("output")
        assert failed.failure.kind == "PAYLOAD_TOO_LARGE"
        assert failed.failure.message == (
            "the workflow's output is 10001 bytes of JSON; the server takes at most 10000"
        )
    finally:
        await fake.stop()


async def test_a_step_output_over_the_payload_limit_is_a_recorded_step_failure() -> None:
    fake = FakeServer(welcome=SMALL)
    calls: list[int] = []
    seen: list[tuple[type[BaseException], str, str]] = []

    def big() -> str:
        calls.append(1)
        return "x" * PAYLOAD

    @fake.workflow("big_step")
    async def big_step(ctx: WorkflowContext) -> str:
        try:
            await ctx.step("big", big, retry=RetryPolicy(max_attempts=3, initial_interval=0))
        except StepFailed as e:
            seen.append((type(e), str(e), e.step_kind))
        return "went on"

    try:
        first = fake.dispatch("wf-big-step", "big_step")
        await fake.ended(first)
        # Failed at once: running it again would return as much (and do its effects again).
        assert calls == [1]
        [done] = fake.of_kind("complete_workflow")
        assert from_payload(done.output) == "went on"
        [record] = done.steps
        assert (record.name, record.step_id, record.HasField("output")) == ("big", 0, False)
        assert record.failure.kind == "PAYLOAD_TOO_LARGE"
        assert "the output of step 'big' is 10002 bytes" in record.failure.message

        # A replay from that record: the workflow sees the same failure, and nothing runs.
        recorded = types_pb2.Step(step_id=0, name="big", failure=record.failure)
        again = fake.dispatch("wf-big-step", "big_step", steps=[recorded], epoch=2)
        await fake.ended(again)
        assert calls == [1]
        assert len(seen) == 2 and seen[0] == seen[1], seen
        assert seen[0][2] == "PAYLOAD_TOO_LARGE"
    finally:
        await fake.stop()


async def test_values_over_the_payload_limit_are_refused_before_they_are_sent() -> None:
    fake = FakeServer(welcome=SMALL)
    big = "x" * PAYLOAD
    refused: list[tuple[str, str]] = []

    @fake.workflow("writes")
    async def writes(ctx: WorkflowContext) -> str:
        attempts: list[tuple[str, Any]] = [
            ("send", lambda: ctx.send("other", big)),
            ("set_event", lambda: ctx.set_event("k", big)),
            ("write_stream", lambda: ctx.write_stream("s", big)),
            ("start_child", lambda: ctx.start_child("child", big)),
            ("call_step", lambda: ctx.start_step("remote", big)),
        ]
        for what, write in attempts:
            try:
                await write()
            except PayloadTooLarge as e:
                refused.append((what, e.reason))
        return "done"

    @fake.workflow("uncaught")
    async def uncaught(ctx: WorkflowContext) -> None:
        await ctx.set_event("k", big)

    try:
        await fake.ended(fake.dispatch("wf-writes", "writes"))
        await fake.ended(fake.dispatch("wf-uncaught", "uncaught"))
        assert refused == [
            ("send", "PAYLOAD_TOO_LARGE"),
            ("set_event", "PAYLOAD_TOO_LARGE"),
            ("write_stream", "PAYLOAD_TOO_LARGE"),
            ("start_child", "PAYLOAD_TOO_LARGE"),
            ("call_step", "PAYLOAD_TOO_LARGE"),
        ]
        kinds = {m.WhichOneof("kind") for m in fake.sent}
        assert kinds <= {"credit", "complete_workflow"}, kinds
        done = {c.workflow_id: c for c in fake.of_kind("complete_workflow")}
        assert from_payload(done["wf-writes"].output) == "done"
        # Left uncaught, the refusal fails the workflow with its kind.
        assert done["wf-uncaught"].failure.kind == "PAYLOAD_TOO_LARGE"
        assert done["wf-uncaught"].failure.message.startswith("the value of event 'k' is 10002")
    finally:
        await fake.stop()


async def test_a_remote_step_output_over_the_payload_limit_is_sent_as_its_failure() -> None:
    fake = FakeServer(welcome=SMALL)
    fake.worker.step("big")(lambda _: "x" * PAYLOAD)
    try:
        d = worker_pb2.DispatchStep(workflow_id="caller", step_id=3, step_name="big", attempt=1)
        fake.session._handle(worker_pb2.ServerMessage(dispatch_step=d))
        await fake.seen(lambda sent: any(m.HasField("step_result") for m in sent))
        [result] = fake.of_kind("step_result")
        assert (result.workflow_id, result.step_id) == ("caller", 3)
        assert not result.HasField("output")
        assert result.failure.kind == "PAYLOAD_TOO_LARGE"
    finally:
        await fake.stop()


def _record(step_id: int, output: str) -> worker_pb2.WorkerMessage:
    """A step record of the same size for every `step_id` from 1 to 127."""
    r = worker_pb2.RecordStep(workflow_id="wf", epoch=1, step_id=step_id, name="s")
    r.output.CopyFrom(to_payload(output))
    return worker_pb2.WorkerMessage(request_id=step_id, record_step=r)


async def test_a_batch_is_split_to_stay_within_the_message_limit() -> None:
    msgs = [_record(i, "x" * 300) for i in range(1, 11)]
    conn = Conn()
    # Exactly three of these messages fit in one batch.
    limit = worker_pb2.WorkerMessage(batch=worker_pb2.Batch(messages=msgs[:3])).ByteSize()
    conn.limits = Limits(max_message=limit)
    for m in msgs:
        conn.send(m)
    conn.close()
    frames = [f async for f in conn.outgoing()]
    assert [len(f.batch.messages) if f.HasField("batch") else 1 for f in frames] == [3, 3, 3, 1]
    assert [f.ByteSize() for f in frames[:3]] == [limit] * 3
    assert frames[3] == msgs[9]
    # In order, none lost.
    assert [*frames[0].batch.messages, *frames[1].batch.messages, *frames[2].batch.messages] == (
        msgs[:9]
    )


async def test_a_message_alone_over_the_limit_is_not_sent(caplog: pytest.LogCaptureFixture) -> None:
    conn = Conn()
    conn.limits = Limits(max_message=200)
    with pytest.raises(PayloadTooLarge):
        await conn.request(_record(1, "x" * 300))
    with caplog.at_level(logging.ERROR, logger="waymark.worker"):
        conn.send(_record(2, "x" * 300))
    assert conn.outbox.empty()
    assert "not sending a record_step" in caplog.text


def holding_records(release: asyncio.Event):
    """An answer that acknowledges step records only once `release` is set."""

    async def answer(m: worker_pb2.WorkerMessage) -> worker_pb2.Reply:
        if m.HasField("record_step"):
            await release.wait()
        return await accept(m)

    return answer


async def test_records_too_large_to_ride_on_the_completion_go_before_it() -> None:
    release = asyncio.Event()
    fake = FakeServer(holding_records(release), welcome=SMALL)

    both_running = asyncio.Barrier(2)

    async def output(c: str) -> str:
        await both_running.wait()
        return c * 9900

    @fake.workflow("large")
    async def large(ctx: WorkflowContext) -> str:
        # Both run before either is recorded, so both records are still held back when the
        # function returns: with its output, more than one message takes.
        await asyncio.gather(ctx.step("a", output, "a"), ctx.step("b", output, "b"))
        return "c" * 9900

    try:
        run = fake.dispatch("wf-split", "large")
        await fake.seen(lambda sent: len([m for m in sent if m.HasField("record_step")]) == 2)
        for _ in range(50):
            await asyncio.sleep(0)
        assert fake.of_kind("complete_workflow") == [], "completed before its records were durable"

        release.set()
        await fake.ended(run)
        kinds = [m.WhichOneof("kind") for m in fake.sent if m.WhichOneof("kind") != "credit"]
        assert kinds == ["record_step", "record_step", "complete_workflow"]
        assert sorted(r.name for r in fake.of_kind("record_step")) == ["a", "b"]
        [done] = fake.of_kind("complete_workflow")
        assert (list(done.steps), from_payload(done.output)) == ([], "c" * 9900)
        assert max(f.ByteSize() for f in fake.frames) <= MESSAGE
    finally:
        release.set()
        await fake.stop()


async def test_a_completion_too_large_even_alone_fails_the_workflow_with_a_short_message() -> None:
    fake = FakeServer(welcome=SMALL)

    @fake.workflow("wordy")
    async def wordy(ctx: WorkflowContext) -> None:
        raise ValueError("y" * MESSAGE)

    try:
        await fake.ended(fake.dispatch("wf-wordy", "wordy"))
        [done] = fake.of_kind("complete_workflow")
        assert done.failure.kind == "PAYLOAD_TOO_LARGE"
        assert done.failure.message.startswith("the workflow's completion could not be sent")
        assert max(f.ByteSize() for f in fake.frames) <= MESSAGE
    finally:
        await fake.stop()


async def test_a_long_failure_message_is_cut_alike_live_and_on_replay() -> None:
    fake = FakeServer()
    seen: list[str] = []

    def wordy() -> None:
        raise ValueError("é" * 50_000)  # 100,000 bytes

    @fake.workflow("wordy_step")
    async def wordy_step(ctx: WorkflowContext) -> str:
        try:
            await ctx.step("wordy", wordy)
        except StepFailed as e:
            seen.append(e.message)
        return "went on"

    try:
        await fake.ended(fake.dispatch("wf-wordy-step", "wordy_step"))
        [done] = fake.of_kind("complete_workflow")
        [record] = done.steps
        message = record.failure.message
        assert len(message.encode()) <= MAX_FAILURE_MESSAGE
        assert message.endswith(" … (cut: 100000 bytes in all)")
        assert message.startswith("é" * 1000)
        recorded = types_pb2.Step(step_id=0, name="wordy", failure=record.failure)
        await fake.ended(fake.dispatch("wf-wordy-step", "wordy_step", steps=[recorded], epoch=2))
        assert seen == [message, message]
    finally:
        await fake.stop()


async def test_a_heartbeat_too_large_to_send_leaves_its_list_out() -> None:
    fake = FakeServer(welcome=SMALL)
    go = asyncio.Event()

    @fake.workflow("waits")
    async def waits(ctx: WorkflowContext) -> None:
        await go.wait()

    try:
        # 400 ids of 36 characters: more than a message of this size leaves room for.
        runs = [fake.dispatch(f"wf-{i:032d}", "waits") for i in range(400)]
        beat = fake.session.heartbeat()
        assert (beat.reports_held, list(beat.held_workflow_ids)) == (False, [])
        assert beat.dispatches_received == 400
        go.set()
        for run in runs:
            await fake.ended(run)
        beat = fake.session.heartbeat()
        assert (beat.reports_held, beat.dispatches_received) == (True, 400)
    finally:
        go.set()
        await fake.stop()
