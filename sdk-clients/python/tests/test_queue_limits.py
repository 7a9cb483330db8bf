"""conformance: queue_limits — a queue's limits hold on a Python worker."""

import asyncio

from conftest import Workers

from waymark import Client, WorkflowContext


async def test_queue_limits_hold_on_this_worker(client: Client, workers: Workers) -> None:
    """conformance: queue_limits"""
    w = workers.new(max_concurrent_workflows=10)
    state = {"running": 0, "most": 0}

    @w.workflow("one_at_a_time")
    async def one_at_a_time(ctx: WorkflowContext) -> int:
        state["running"] += 1
        state["most"] = max(state["most"], state["running"])
        try:
            await asyncio.sleep(0.05)
        finally:
            state["running"] -= 1
        return 1

    await workers.start(w)
    await client.queues.update(workers.queue, worker_concurrency=1)
    handles = [await client.start("one_at_a_time", queue=workers.queue) for _ in range(6)]
    for h in handles:
        assert await h.result(timeout=30) == 1
    # Ten credits, six workflows at once in the queue: only the limit kept them apart.
    assert state["most"] == 1
