"""`WorkflowContext` replaying through its history cursor, with no server: the run's connection
is closed, so an operation that asked the server anything would fail at once (and drop the run)
instead of waiting forever; every test checks that none did."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import pytest

from waymark import Dropped, NonDeterminismError, StepFailed, WorkflowContext
from waymark._payload import from_payload, to_payload
from waymark._proto import types_pb2, worker_pb2
from waymark._time import now_ms
from waymark.worker._conn import Conn
from waymark.worker._run import Run


def out(step_id: int, name: str, value: Any) -> types_pb2.Step:
    return types_pb2.Step(step_id=step_id, name=name, output=to_payload(value))


def replaying(*steps: types_pb2.Step) -> tuple[WorkflowContext, Run]:
    d = worker_pb2.DispatchWorkflow(workflow_id="wf", workflow_name="w", epoch=2, steps=steps)
    conn = Conn()
    conn.closed = True
    run = Run(d, conn, park_after=None, patience=1.0)
    return WorkflowContext(run), run


def never(*_: Any) -> Any:
    raise AssertionError("a replayed step's function ran")


def nothing_sent(run: Run) -> bool:
    # A request on the closed connection raises `Disconnected` and drops the run.
    return run.conn.outbox.empty() and not run.dropped


async def test_steps_started_together_replay_by_call_order_not_await_order() -> None:
    ctx, run = replaying(out(0, "a", "A"), out(1, "b", "B"))
    a = ctx.step("a", never)
    b = ctx.step("b", never)
    # Awaited the other way round: b runs first, still at position 1.
    assert await asyncio.gather(b, a) == ["B", "A"]
    assert run.history.next_position == 2
    assert nothing_sent(run)


async def test_operations_of_several_positions_started_together_keep_their_order() -> None:
    past = now_ms() - 1000
    ctx, run = replaying(
        out(0, "waymark.sleep", {"wake_at_ms": past}),
        out(1, "waymark.recv.deadline", {"deadline_ms": past}),
        out(2, "waymark.recv", None),
        out(3, "after", {"ok": True}),
        out(4, "waymark.get_event.deadline", {"deadline_ms": past}),
        out(5, "waymark.get_event", {"value": 17}),
    )
    sleep = ctx.sleep(60)
    got = ctx.recv("orders", timeout=5)
    after = ctx.step("after", never)
    event = ctx.get_event("other", "k")
    # A recv takes two positions (its deadline, its result), so "after" is at 3, not 2.
    assert await asyncio.gather(event, after, got, sleep) == [17, {"ok": True}, None, None]
    assert run.history.next_position == 6
    assert nothing_sent(run)


async def test_a_replayed_failure_is_raised_and_the_function_not_run() -> None:
    failure = types_pb2.Failure(kind="StepFailed", message="card declined")
    ctx, run = replaying(types_pb2.Step(step_id=0, name="charge", failure=failure))
    with pytest.raises(StepFailed) as e:
        await ctx.step("charge", never)
    assert (e.value.name, e.value.message) == ("charge", "card declined")
    assert nothing_sent(run)


async def test_a_different_step_at_a_recorded_position_is_non_determinism() -> None:
    ctx, run = replaying(out(0, "a", 1), out(1, "waymark.send", {"message_id": "m"}))
    assert await ctx.step("a", never) == 1
    with pytest.raises(NonDeterminismError) as e:
        await ctx.set_event("k", "v")
    assert str(e.value) == (
        "workflow 'wf' called step 'waymark.set_event' at position 1, "
        "where its history records 'waymark.send'"
    )
    assert nothing_sent(run)


async def test_replayed_writes_and_children_return_what_was_recorded() -> None:
    ctx, run = replaying(
        out(0, "waymark.send", {"message_id": "m-9"}),
        out(1, "waymark.set_event", {"key": "k"}),
        out(2, "waymark.write_stream", {"offset": 3}),
        out(3, "waymark.close_stream", {"offset": 4}),
        out(4, "waymark.start_child", {"workflow_id": "wf-c"}),
        out(5, "waymark.await_child", {"status": "SUCCESS", "output": "done"}),
        out(6, "waymark.select", {"index": 1}),
    )
    assert await ctx.send("other", {"hi": 1}) == "m-9"
    assert await ctx.set_event("k", "v") is None
    assert await ctx.write_stream("s", 1) == 3
    assert await ctx.close_stream("s") is None
    assert await ctx.child("child", None) == "done"
    assert await ctx.wait_first("wf-x", "wf-y") == 1
    assert nothing_sent(run)


async def test_a_replayed_remote_step_is_not_called_again() -> None:
    ctx, run = replaying(out(0, "remote.add", 5))
    assert await ctx.call_step("remote.add", [2, 3]) == 5
    assert nothing_sent(run)


async def test_past_the_history_a_step_runs_live_at_the_next_position() -> None:
    ctx, run = replaying(out(0, "a", 1))
    calls = []

    def b(x: int) -> int:
        calls.append(x)
        return x * 10

    assert ctx.is_replaying
    assert await ctx.step("a", never) == 1
    assert not ctx.is_replaying
    assert await ctx.step("b", b, 4) == 40
    assert calls == [4]
    # Its record is held back (nothing sent yet) and goes with the completion.
    [record] = await run.records.settle()
    assert (record.step_id, record.name, from_payload(record.output)) == (1, "b", 40)
    assert (record.workflow_id, record.epoch, record.attempts) == ("wf", 2, 1)
    assert nothing_sent(run)


async def test_a_dropped_run_does_not_go_on_even_by_replaying() -> None:
    ctx, run = replaying(out(0, "a", 1))
    run.drop()
    with pytest.raises(Dropped):
        await ctx.step("a", never)
    assert run.conn.outbox.empty()


UUID_TEXT = "0b8e4c1e-3f55-4c1a-9d3e-2a7f6d1c9b20"


async def test_the_time_and_a_uuid_replay_as_recorded() -> None:
    ctx, run = replaying(
        out(0, "waymark.now", {"now_ms": 1_700_000_000_123}),
        out(1, "waymark.now", {"now_ms": 1_700_000_000_456}),
        out(2, "waymark.uuid", {"uuid": UUID_TEXT}),
    )
    now = ctx.now()
    assert now == datetime(2023, 11, 14, 22, 13, 20, 123_000, tzinfo=UTC)
    assert now.tzinfo is UTC
    # `now_ms` reads the same step: either can replay the other's record.
    assert ctx.now_ms() == 1_700_000_000_456
    assert ctx.uuid() == UUID(UUID_TEXT)
    assert run.history.next_position == 3
    assert nothing_sent(run)
    assert await run.records.settle() == []


async def test_the_time_and_uuids_take_positions_in_call_order_among_other_steps() -> None:
    past = now_ms() - 1000
    ctx, run = replaying(
        out(0, "a", "A"),
        out(1, "waymark.now", {"now_ms": 5}),
        out(2, "waymark.recv.deadline", {"deadline_ms": past}),
        out(3, "waymark.recv", None),
        out(4, "waymark.uuid", {"uuid": UUID_TEXT}),
        out(5, "b", "B"),
    )
    a = ctx.step("a", never)
    now = ctx.now_ms()
    got = ctx.recv("orders", timeout=5)
    # Taken when called, like a step: after the recv's two positions, before "b".
    drawn = ctx.uuid()
    b = ctx.step("b", never)
    assert (now, drawn) == (5, UUID(UUID_TEXT))
    assert await asyncio.gather(b, got, a) == ["B", None, "A"]
    assert run.history.next_position == 6
    assert nothing_sent(run)


async def test_the_time_or_a_uuid_where_another_step_is_recorded_is_non_determinism() -> None:
    ctx, run = replaying(
        out(0, "waymark.uuid", {"uuid": UUID_TEXT}),
        out(1, "charge", 1),
        out(2, "waymark.now", {"now_ms": 5}),
    )
    with pytest.raises(NonDeterminismError) as e:
        ctx.now()
    assert str(e.value) == (
        "workflow 'wf' called step 'waymark.now' at position 0, "
        "where its history records 'waymark.uuid'"
    )
    with pytest.raises(NonDeterminismError) as e:
        ctx.uuid()
    assert str(e.value) == (
        "workflow 'wf' called step 'waymark.uuid' at position 1, where its history records 'charge'"
    )
    # And a step where the time is recorded.
    with pytest.raises(NonDeterminismError) as e:
        await ctx.step("charge", never)
    assert str(e.value) == (
        "workflow 'wf' called step 'charge' at position 2, where its history records 'waymark.now'"
    )
    assert nothing_sent(run)


async def test_past_the_history_the_time_and_a_uuid_are_read_live_and_held_back() -> None:
    ctx, run = replaying(out(0, "a", 1))
    assert await ctx.step("a", never) == 1
    before = now_ms()
    now = ctx.now()
    drawn = ctx.uuid()
    ms = ctx.now_ms()
    assert before <= ms and now.tzinfo is UTC and drawn.version == 4
    # Held back as a step's record (nothing sent yet), with the shapes worker.proto gives.
    records = await run.records.settle()
    first_ms = from_payload(records[0].output)["now_ms"]
    assert [(r.step_id, r.name, from_payload(r.output)) for r in records] == [
        (1, "waymark.now", {"now_ms": first_ms}),
        (2, "waymark.uuid", {"uuid": str(drawn)}),
        (3, "waymark.now", {"now_ms": ms}),
    ]
    assert before <= first_ms <= ms
    assert all((r.workflow_id, r.epoch, r.attempts) == ("wf", 2, 1) for r in records)
    assert nothing_sent(run)
    # What the live run returned is what a replay of its records returns: the time to the
    # millisecond, not finer.
    again, rerun = replaying(
        out(0, "a", 1),
        *(types_pb2.Step(step_id=r.step_id, name=r.name, output=r.output) for r in records),
    )
    assert await again.step("a", never) == 1
    assert (again.now(), again.uuid(), again.now_ms()) == (now, drawn, ms)
    assert nothing_sent(rerun)


async def test_a_cancelled_run_replays_the_time_but_reads_no_new_one() -> None:
    ctx, run = replaying(out(0, "waymark.now", {"now_ms": 5}))
    run.cancelled = True
    # As a step: what is recorded is returned; nothing new is read or recorded.
    assert ctx.now_ms() == 5
    with pytest.raises(asyncio.CancelledError):
        ctx.uuid()
    with pytest.raises(asyncio.CancelledError):
        ctx.now()
    assert await run.records.settle() == []
    assert nothing_sent(run)


async def test_a_dropped_run_reads_neither_the_time_nor_a_uuid() -> None:
    ctx, run = replaying(out(0, "waymark.now", {"now_ms": 5}))
    run.drop()
    with pytest.raises(Dropped):
        ctx.now()
    with pytest.raises(Dropped):
        ctx.uuid()
    assert run.conn.outbox.empty()


def marker(step_id: int, patch_id: str) -> types_pb2.Step:
    return out(step_id, "waymark.patch", {"patch_id": patch_id})


async def test_past_the_history_a_patch_applies_and_its_marker_is_held_back() -> None:
    ctx, run = replaying(out(0, "a", 1))
    assert await ctx.step("a", never) == 1
    assert ctx.patched("fix") is True
    assert run.history.next_position == 2, "the marker took position 1"
    # Held back as a step's record (nothing sent yet), in the shape worker.proto gives.
    records = await run.records.settle()
    assert [(r.step_id, r.name, from_payload(r.output)) for r in records] == [
        (1, "waymark.patch", {"patch_id": "fix"})
    ]
    assert all((r.workflow_id, r.epoch, r.attempts) == ("wf", 2, 1) for r in records)
    assert nothing_sent(run)


async def test_a_patch_replays_its_marker_and_the_new_branch_after_it() -> None:
    ctx, run = replaying(marker(0, "fix"), out(1, "charge-cents", 100))
    assert ctx.patched("fix") is True
    assert await ctx.step("charge-cents", never) == 100
    assert run.history.next_position == 2
    assert await run.records.settle() == []
    assert nothing_sent(run)


async def test_under_old_history_a_patch_does_not_apply_and_the_old_step_keeps_its_place() -> None:
    ctx, run = replaying(out(0, "charge", 1))
    assert ctx.patched("cents") is False
    assert run.history.next_position == 0
    assert await ctx.step("charge", never) == 1, "the old branch's step replays at position 0"
    assert await run.records.settle() == []
    assert nothing_sent(run)


async def test_another_patchs_marker_answers_false_then_its_own_id_true() -> None:
    ctx, run = replaying(marker(0, "older"), out(1, "ship", "shipped"))
    assert ctx.patched("newer") is False
    assert ctx.patched("older") is True
    assert await ctx.step("ship", never) == "shipped"
    assert await run.records.settle() == []
    assert nothing_sent(run)


async def test_a_patch_asked_about_twice_live_takes_two_positions() -> None:
    ctx, run = replaying()
    assert (ctx.patched("a"), ctx.patched("b")) == (True, True)
    records = await run.records.settle()
    assert [(r.step_id, from_payload(r.output)) for r in records] == [
        (0, {"patch_id": "a"}),
        (1, {"patch_id": "b"}),
    ]


async def test_a_malformed_patch_marker_is_an_error() -> None:
    ctx, run = replaying(out(0, "waymark.patch", {"id": "fix"}))
    with pytest.raises(ValueError, match=r"'waymark\.patch' at position 0"):
        ctx.patched("fix")
    assert await run.records.settle() == []
    assert nothing_sent(run)


async def test_a_cancelled_run_replays_a_marker_but_records_none() -> None:
    ctx, run = replaying(marker(0, "fix"))
    run.cancelled = True
    assert ctx.patched("fix") is True
    with pytest.raises(asyncio.CancelledError):
        ctx.patched("other")
    assert await run.records.settle() == []
    assert nothing_sent(run)


async def test_a_dropped_run_asks_about_no_patch() -> None:
    ctx, run = replaying(marker(0, "fix"))
    run.drop()
    with pytest.raises(Dropped):
        ctx.patched("fix")
    assert run.conn.outbox.empty()
