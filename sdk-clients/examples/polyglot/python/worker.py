"""The Python part of the polyglot example: a worker with two workflows.

- `combine` (input: a text) calls two remote steps by name — `shout`, served by the TypeScript
  worker, and `reverse`, served by the Go worker — and returns both results. It starts both
  calls before waiting for either, so they run at once; each result is recorded as this
  workflow's step, and a replay reads it back instead of calling again.
- `countdown` (input: N) writes N, N-1, ..., 1 to its stream `countdown`, a durable sleep apart,
  closes the stream and returns "liftoff". The TypeScript client follows the stream live.

Run it with the SDK's venv (`make -C sdk-clients/python deps`):

    WAYMARK_SERVER=127.0.0.1:7450 sdk-clients/python/.venv/bin/python sdk-clients/examples/polyglot/python/worker.py
"""

import asyncio
import logging

from waymark import Worker, WorkflowContext

worker = Worker(app_name="polyglot-python", app_version="1")  # server: WAYMARK_SERVER


@worker.workflow("combine")
async def combine(ctx: WorkflowContext, text: str) -> dict[str, str]:
    shout = await ctx.start_step("shout", text)  # TypeScript
    reverse = await ctx.start_step("reverse", text)  # Go
    return {
        "shout": await ctx.step_result(shout),
        "reverse": await ctx.step_result(reverse),
    }


@worker.workflow("countdown")
async def countdown(ctx: WorkflowContext, n: int) -> str:
    for i in range(n, 0, -1):
        await ctx.write_stream("countdown", i)
        await ctx.sleep(0.5)  # so a reader sees the values arrive one by one
    await ctx.close_stream("countdown")
    return "liftoff"


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    asyncio.run(worker.run())
