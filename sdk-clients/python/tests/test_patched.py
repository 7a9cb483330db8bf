"""`ctx.patched()` at work: its marker costs no round trip of its own (against
tests/fake_server.py), and on the real server a workflow begun under old code replays the old
branch under new code while one begun under the new code takes the new branch and records the
marker. The cursor is in test_history.py, replay without a server in test_replay.py and
test_replayer.py."""

from __future__ import annotations

import asyncio
from typing import Any

from conftest import Workers, eventually
from fake_server import FakeServer

from waymark import Client, WorkflowContext, WorkflowStatus
from waymark._payload import from_payload, to_payload
from waymark._proto import types_pb2, worker_pb2


def records(steps: list[worker_pb2.RecordStep]) -> list[tuple[int, str, Any]]:
    return [(s.step_id, s.name, from_payload(s.output)) for s in steps]


async def test_its_marker_rides_on_the_completion() -> None:
    fake = FakeServer()

    @fake.workflow("patched")
    async def patched(ctx: WorkflowContext) -> bool:
        return ctx.patched("fix")

    try:
        run = fake.dispatch("wf-patched", "patched")
        await fake.ended(run)
        # No message of its own: the completion carries the marker.
        assert fake.of_kind("record_step") == []
        [done] = fake.of_kind("complete_workflow")
        assert from_payload(done.output) is True
        assert records(done.steps) == [(0, "waymark.patch", {"patch_id": "fix"})]
    finally:
        await fake.stop()


async def test_its_marker_is_durable_before_the_new_branchs_step_runs() -> None:
    fake = FakeServer()

    def recorded_so_far() -> list[tuple[int, str, Any]]:
        return records(fake.of_kind("record_step"))

    @fake.workflow("then_a_step")
    async def then_a_step(ctx: WorkflowContext) -> Any:
        assert ctx.patched("fix")
        return await ctx.step("new", recorded_so_far)

    try:
        run = fake.dispatch("wf-then", "then_a_step")
        await fake.ended(run)
        [done] = fake.of_kind("complete_workflow")
        assert from_payload(done.output) == [[0, "waymark.patch", {"patch_id": "fix"}]]
        assert [(s.step_id, s.name) for s in done.steps] == [(1, "new")]
    finally:
        await fake.stop()


async def test_a_replayed_marker_is_not_recorded_again() -> None:
    fake = FakeServer()

    @fake.workflow("patched")
    async def patched(ctx: WorkflowContext) -> bool:
        return ctx.patched("fix")

    try:
        marker = to_payload({"patch_id": "fix"})
        steps = [types_pb2.Step(step_id=0, name="waymark.patch", output=marker)]
        run = fake.dispatch("wf-again", "patched", steps=steps, epoch=2, recovery_attempts=1)
        await fake.ended(run)
        [done] = fake.of_kind("complete_workflow")
        assert from_payload(done.output) is True
        assert list(done.steps) == [] and fake.of_kind("record_step") == []
    finally:
        await fake.stop()


async def test_old_runs_keep_the_old_branch_and_new_runs_take_the_new_one(
    client: Client, workers: Workers
) -> None:
    # Worker A runs the code as it was before the change.
    a = workers.new()
    old_runs: list[str] = []

    @a.workflow("patch-demo")
    async def before_the_change(ctx: WorkflowContext) -> str:
        old_runs.append(ctx.workflow_id)
        branch: str = await ctx.step("old", lambda: "old")
        await ctx.recv("go")
        return branch

    await workers.start(a)
    p1 = await client.start("patch-demo", queue=workers.queue)

    async def waiting(workflow_id: str, *names: str) -> bool:
        return [s.name for s in await client.steps(workflow_id)] == [*names]

    await eventually(
        lambda: waiting(p1.workflow_id, "old", "waymark.recv.deadline"),
        what="p1 to record step old and wait",
    )
    assert old_runs == [p1.workflow_id]
    a.stop()
    await asyncio.wait_for(workers.tasks[-1][1], 10)

    # Worker B runs the changed code for the same workflow name.
    b = workers.new()
    new_runs: list[tuple[str, bool]] = []

    @b.workflow("patch-demo")
    async def after_the_change(ctx: WorkflowContext) -> str:
        applies = ctx.patched("demo-fix")
        new_runs.append((ctx.workflow_id, applies))
        if applies:
            branch: str = await ctx.step("new", lambda: "new")
        else:
            branch = await ctx.step("old", lambda: "changed code ran the old step again")
        await ctx.recv("go")
        return branch

    await workers.start(b)
    # p1 began under the old code: the new code replays its old branch.
    await p1.send("now", topic="go")
    wf1 = await p1.wait(timeout=60)
    assert wf1.status is WorkflowStatus.SUCCESS, wf1
    assert wf1.output == "old"
    assert (p1.workflow_id, False) in new_runs, "the changed code finished p1"
    assert [(s.step_id, s.name) for s in await client.steps(p1.workflow_id)] == [
        (0, "old"),
        (1, "waymark.recv.deadline"),
        (2, "waymark.recv"),
    ]

    # p2 begins under the new code: the new branch, and the marker at position 0.
    p2 = await client.start("patch-demo", queue=workers.queue)
    await eventually(
        lambda: waiting(p2.workflow_id, "waymark.patch", "new", "waymark.recv.deadline"),
        what="p2 to take the new branch and wait",
    )
    await p2.send("now", topic="go")
    wf2 = await p2.wait(timeout=60)
    assert wf2.status is WorkflowStatus.SUCCESS, wf2
    assert wf2.output == "new"
    assert new_runs[-1] == (p2.workflow_id, True)
    history = await client.history(p2.workflow_id)
    assert history["steps"][0] == {
        "step_id": 0,
        "name": "waymark.patch",
        "output": {"patch_id": "demo-fix"},
    }
    assert [s["name"] for s in history["steps"]] == [
        "waymark.patch",
        "new",
        "waymark.recv.deadline",
        "waymark.recv",
    ]
    assert old_runs == [p1.workflow_id], "worker A ran nothing after it stopped"
