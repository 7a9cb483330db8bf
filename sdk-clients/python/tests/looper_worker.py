"""A worker process for the continue-as-new test: `python looper_worker.py SERVER QUEUE`.

Workflow `looper`: each run waits for a message on topic "go" (with a timeout), runs a step
"tick" returning `n`, and continues as new with `n + 1` until `n == until`, which it returns."""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any

from waymark import Worker, WorkflowContext

server, queue = sys.argv[1:3]
worker = Worker(server=server, queues=[queue], app_version="looper", park_after=0)


@worker.workflow("looper")
async def looper(ctx: WorkflowContext, input: dict[str, Any]) -> int:
    await ctx.recv("go", timeout=600)
    n: int = input["n"]
    tick: int = await ctx.step("tick", lambda: n)
    if tick >= input["until"]:
        return tick
    ctx.continue_as_new({**input, "n": n + 1})


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    asyncio.run(worker.run())
