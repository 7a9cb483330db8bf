"""The `make bench` worker: registers workflow `bench`, whose input is `{"steps": K}`; it runs K
trivial checkpointed steps and returns K. Serves the queue in WAYMARK_QUEUE with
WAYMARK_CAPACITY workflows at once, against WAYMARK_SERVER (see waymark-bench's polyglot
workload, which starts it and measures steps per second next to the Rust worker's)."""

import asyncio
import os
from typing import Any

from waymark import Worker, WorkflowContext, WorkflowFailed

worker = Worker(
    app_name="waymark-bench",
    app_version="bench-1",
    queues=[os.environ.get("WAYMARK_QUEUE", "default")],
    max_concurrent_workflows=int(os.environ.get("WAYMARK_CAPACITY", "1000")),
)


async def ident(i: int) -> int:
    return i


@worker.workflow("bench")
async def bench(ctx: WorkflowContext, input: dict[str, Any]) -> int:
    steps = int(input["steps"])
    for i in range(steps):
        got = await ctx.step(f"s{i}", ident, i)
        if got != i:
            raise WorkflowFailed("WrongReplay", f"step {i} replayed as {got}")
    return steps


if __name__ == "__main__":
    asyncio.run(worker.run())
