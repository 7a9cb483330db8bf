"""A worker process on the Python SDK serving the workflow `counted` exactly as the Rust test
worker (integration-tests/src/bin/waymark-test-worker.rs) does: same input, step names, side
effects and output, so a workflow begun on either worker is recovered and replayed on the other.

`counted`: input {"steps": N, "step_ms": M}. For i in 0..N a local step named `step-{i}` sleeps
M ms, appends `<workflow_id> <i> <epoch> <pid>` to the file `WAYMARK_SIDE_EFFECTS` and returns
i; a step that replays as anything but i fails the workflow with kind WrongReplay. Output: N.

Environment: WAYMARK_SERVER (http://host:port), WAYMARK_SIDE_EFFECTS (default /dev/null),
WAYMARK_CAPACITY (workflows at once, default 100), WAYMARK_APP_VERSION (default test-1),
WAYMARK_WORKER_ID (generated when unset), WAYMARK_QUEUES (comma-separated; the default queue
when unset), WAYMARK_TEST_VARIANT=renamed (steps named `renamed-step-{i}`, so a replay of a
workflow begun by the normal variant is non-deterministic). Logs go to stderr; SIGTERM or
SIGINT stops it with status 0.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from typing import Any

from waymark import Worker, WorkflowContext, WorkflowFailed

log = logging.getLogger("counted")


def append_effect(path: str, workflow_id: str, step_id: int, epoch: int) -> None:
    """One line, in one write on an O_APPEND descriptor: lines from concurrent writers (other
    workflows here, other worker processes) land whole, never interleaved."""
    line = f"{workflow_id} {step_id} {epoch} {os.getpid()}\n".encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        written = os.write(fd, line)
    finally:
        os.close(fd)
    if written != len(line):
        # A partial line would be read as another effect; the step fails instead.
        raise OSError(f"wrote {written} of {len(line)} bytes to {path}")


async def counted(ctx: WorkflowContext, input: dict[str, Any]) -> int:
    steps = int(input["steps"])
    step_ms = int(input.get("step_ms") or 0)
    effects = os.environ.get("WAYMARK_SIDE_EFFECTS") or "/dev/null"
    prefix = "renamed-step" if os.environ.get("WAYMARK_TEST_VARIANT") == "renamed" else "step"

    async def step(i: int) -> int:
        if step_ms > 0:
            await asyncio.sleep(step_ms / 1000)
        append_effect(effects, ctx.workflow_id, i, ctx.epoch)
        return i

    for i in range(steps):
        # What a replay returns is whatever was recorded, hence checked.
        got: Any = await ctx.step(f"{prefix}-{i}", step, i)
        if got != i:
            raise WorkflowFailed("WrongReplay", f"step {i} replayed as {got}")
    return steps


def worker_from_env() -> Worker:
    queues = [q for q in os.environ.get("WAYMARK_QUEUES", "").split(",") if q]
    worker = Worker(
        server=os.environ.get("WAYMARK_SERVER"),
        app_version=os.environ.get("WAYMARK_APP_VERSION") or "test-1",
        worker_id=os.environ.get("WAYMARK_WORKER_ID") or None,
        queues=queues,
        max_concurrent_workflows=int(os.environ.get("WAYMARK_CAPACITY") or 100),
    )
    worker.workflow("counted")(counted)
    return worker


async def main() -> None:
    worker = worker_from_env()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, worker.stop)
    log.info("python test worker %s pid %d", worker.worker_id, os.getpid())
    await worker.run()
    log.info("stopped")


if __name__ == "__main__":
    logging.basicConfig(
        stream=sys.stderr,
        level=os.environ.get("WAYMARK_LOG_LEVEL", "INFO").upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    asyncio.run(main())
