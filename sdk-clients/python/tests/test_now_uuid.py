"""`ctx.now()` and `ctx.uuid()` at work: their records cost no round trip of their own (against
tests/fake_server.py), and a workflow recovered by another run reads the same time and UUID as
the first (against the real server). Replay without a server is in test_replay.py."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from conftest import Workers, eventually
from fake_server import FakeServer

from waymark import Client, WorkflowContext, WorkflowStatus
from waymark._payload import from_payload
from waymark._proto import worker_pb2


def records(steps: list[worker_pb2.RecordStep]) -> list[tuple[int, str, Any]]:
    return [(s.step_id, s.name, from_payload(s.output)) for s in steps]


async def test_their_records_ride_on_the_completion() -> None:
    fake = FakeServer()

    @fake.workflow("stamps")
    async def stamps(ctx: WorkflowContext) -> list[Any]:
        return [ctx.now_ms(), str(ctx.uuid())]

    try:
        run = fake.dispatch("wf-stamps", "stamps")
        await fake.ended(run)
        # No message of their own: the completion carries both records.
        assert fake.of_kind("record_step") == []
        [done] = fake.of_kind("complete_workflow")
        now_ms, drawn = from_payload(done.output)
        assert records(done.steps) == [
            (0, "waymark.now", {"now_ms": now_ms}),
            (1, "waymark.uuid", {"uuid": drawn}),
        ]
        assert UUID(drawn).version == 4 and drawn == drawn.lower()
    finally:
        await fake.stop()


async def test_their_records_are_durable_before_the_next_step_runs() -> None:
    fake = FakeServer()

    def recorded_so_far() -> list[tuple[int, str, Any]]:
        return records(fake.of_kind("record_step"))

    @fake.workflow("then_a_step")
    async def then_a_step(ctx: WorkflowContext) -> Any:
        ctx.now()
        ctx.uuid()
        # The step's function may act on those values: their records went (together) first.
        return await ctx.step("after", recorded_so_far)

    try:
        run = fake.dispatch("wf-then", "then_a_step")
        await fake.ended(run)
        [done] = fake.of_kind("complete_workflow")
        assert [(i, name) for i, name, _ in from_payload(done.output)] == [
            (0, "waymark.now"),
            (1, "waymark.uuid"),
        ]
        assert [s.name for s in done.steps] == ["after"]
    finally:
        await fake.stop()


async def test_a_recovered_workflow_reads_the_time_and_uuid_the_first_run_read(
    client: Client, workers: Workers
) -> None:
    # Kept in memory while it waits (not parked), so the test can make the worker lose it.
    w = workers.new(park_after=None)
    runs: list[tuple[int, bool, datetime, UUID]] = []

    @w.workflow("stamped")
    async def stamped(ctx: WorkflowContext) -> dict[str, Any]:
        replaying = ctx.is_replaying
        now = ctx.now()
        drawn = ctx.uuid()
        runs.append((ctx.epoch, replaying, now, drawn))
        # A request: the two records above go with the wait's deadline, durable before it.
        await ctx.recv("go")
        return {"now": now.isoformat(), "uuid": str(drawn)}

    await workers.start(w)
    h = await client.start("stamped", queue=workers.queue)
    await eventually(lambda: runs, what="the first run")

    async def waiting() -> bool:
        names = [s.name for s in await client.steps(h.workflow_id)]
        return names == ["waymark.now", "waymark.uuid", "waymark.recv.deadline"]

    await eventually(waiting, what="the first run to wait for its message")
    # Past the millisecond the first run read, so a clock read again would differ.
    await asyncio.sleep(0.01)
    assert w._lose_run(h.workflow_id), "the first run was running on this worker"
    # The server sees it missing from the next heartbeat (every 500 ms) and dispatches it again.
    await eventually(lambda: len(runs) == 2, timeout=60, what="the recovered run")

    await h.send("now", topic="go")
    wf = await h.wait(timeout=60)
    assert wf.status is WorkflowStatus.SUCCESS, wf
    assert wf.recovery_attempts >= 1
    (epoch1, replaying1, now1, uuid1), (epoch2, replaying2, now2, uuid2) = runs
    assert epoch2 > epoch1 and (replaying1, replaying2) == (False, True)
    assert (now2, uuid2) == (now1, uuid1)
    assert now1.tzinfo is UTC and uuid1.version == 4
    assert wf.output == {"now": now1.isoformat(), "uuid": str(uuid1)}

    # Recorded once each, in the shapes worker.proto gives, by the first run.
    steps = await client.steps(h.workflow_id)
    now_step, uuid_step = steps[:2]
    assert (now_step.name, uuid_step.name) == ("waymark.now", "waymark.uuid")
    epoch_ms = (now1 - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)
    assert now_step.output == {"now_ms": epoch_ms}
    assert uuid_step.output == {"uuid": str(uuid1)}
    assert now_step.epoch == uuid_step.epoch == epoch1
    assert [s.name for s in steps[2:]] == ["waymark.recv.deadline", "waymark.recv"]
