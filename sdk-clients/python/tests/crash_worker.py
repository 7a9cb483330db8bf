"""A worker process for the crash test: `python crash_worker.py SERVER QUEUE LOG`.

Workflow `crashy` runs five steps; each sleeps, then appends "<step> <pid>" to LOG as its last
act, so a line is written only by a step that finished."""

from __future__ import annotations

import asyncio
import logging
import os
import sys

from waymark import Worker, WorkflowContext

server, queue, log_path = sys.argv[1:4]
worker = Worker(server=server, queues=[queue], app_version="crash", park_after=None)


async def work(name: str) -> str:
    await asyncio.sleep(0.4)
    # A blocking append is the point: the line is on disk before the step returns.
    with open(log_path, "a") as f:  # noqa: ASYNC230
        f.write(f"{name} {os.getpid()}\n")
    return name


@worker.workflow("crashy")
async def crashy(ctx: WorkflowContext, n: int) -> list[str]:
    done = []
    for i in range(n):
        done.append(await ctx.step(f"step-{i}", work, f"step-{i}"))
    return done


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    asyncio.run(worker.run())
