"""Cancellation (asyncio cancellation inside the workflow), workflow timeouts, resume."""

from __future__ import annotations

import asyncio

from conftest import Workers, eventually

from waymark import Client, WorkflowContext, WorkflowStatus


# conformance: cancel
async def test_cancel_reaches_the_workflow_as_cancelled_error(
    client: Client, workers: Workers
) -> None:
    # Kept in memory while it waits (not parked), so the cancel reaches the running function.
    w = workers.new(park_after=None)
    seen: list[str] = []

    @w.workflow("cancellable")
    async def cancellable(ctx: WorkflowContext) -> str:
        try:
            await ctx.recv("never", timeout=600)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        return "finished"

    await workers.start(w)
    h = await client.start("cancellable", queue=workers.queue)
    await eventually(lambda: _has_step(client, h.workflow_id, "waymark.recv.deadline"))
    wf = await h.cancel()
    assert wf.status is WorkflowStatus.CANCELLED
    await eventually(lambda: seen == ["cancelled"], what="the workflow to see CancelledError")
    assert (await h.wait(timeout=10)).status is WorkflowStatus.CANCELLED

    # Resumed, it replays to the wait and takes the message sent meanwhile.
    await h.send("late", topic="never")
    resumed = await client.resume(h.workflow_id)
    assert resumed.status in (WorkflowStatus.ENQUEUED, WorkflowStatus.PENDING)
    assert await h.result(timeout=30) == "finished"


async def test_workflow_timeout_cancels_it(client: Client, workers: Workers) -> None:
    w = workers.new()

    @w.workflow("too_slow")
    async def too_slow(ctx: WorkflowContext) -> None:
        await ctx.sleep(600)

    await workers.start(w)
    h = await client.start("too_slow", queue=workers.queue, timeout=0.5)
    assert h.workflow is not None and h.workflow.deadline is not None
    wf = await h.wait(timeout=30)
    assert wf.status is WorkflowStatus.CANCELLED


async def _has_step(client: Client, workflow_id: str, name: str) -> bool:
    return any(s.name == name for s in await client.steps(workflow_id))
