"""A run the worker lost without a word — its task died — is not left PENDING with a healthy
worker: the next heartbeat does not list it, so the server puts it back in its queue and
dispatches it again, and it finishes."""

from __future__ import annotations

import asyncio

from conftest import Workers

from waymark import Client, WorkflowContext, WorkflowStatus


async def test_a_run_lost_by_its_worker_is_dispatched_again(
    client: Client, workers: Workers
) -> None:
    w = workers.new(park_after=None)
    epochs: list[int] = []
    ran: list[str] = []
    first_run_waiting = asyncio.Event()

    @w.workflow("lost_once")
    async def lost_once(ctx: WorkflowContext) -> str:
        await ctx.step("before", ran.append, "before")
        # A request: the record of "before" is durable once it returns.
        await ctx.set_event("stage", "past before")
        epochs.append(ctx.epoch)
        if len(epochs) == 1:
            # The first run stays here, in memory, until the test makes the worker lose it.
            first_run_waiting.set()
            await asyncio.Event().wait()
        return "done"

    await workers.start(w)
    h = await client.start("lost_once", queue=workers.queue)
    await asyncio.wait_for(first_run_waiting.wait(), 30)
    assert w._lose_run(h.workflow_id), "the first run was running on this worker"

    # Heartbeats come every 500 ms (tests/server.py); the generous wait is for a loaded machine.
    wf = await h.wait(timeout=60)
    assert wf.status is WorkflowStatus.SUCCESS, wf
    assert wf.output == "done"
    assert len(epochs) == 2 and epochs[1] > epochs[0], epochs
    assert wf.recovery_attempts >= 1
    # What the first run recorded was replayed, not done again.
    assert ran == ["before"]
    names = [s.name for s in await client.steps(h.workflow_id)]
    assert names == ["before", "waymark.set_event"], names
