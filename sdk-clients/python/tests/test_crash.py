"""Kill -9 a worker process mid-workflow: another worker process finishes it, every step run
(to its end) once."""

from __future__ import annotations

import collections
import os
import pathlib
import signal
import subprocess
import sys

from conftest import eventually
from server import Server

from waymark import Client, WorkflowStatus

HERE = pathlib.Path(__file__).parent


def spawn(server: Server, queue: str, log: pathlib.Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(HERE / "crash_worker.py"), server.address, queue, str(log)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


# conformance: replay_after_kill
async def test_killed_worker_is_replaced_and_no_step_runs_twice(
    server: Server, client: Client, queue: str, tmp_path: pathlib.Path
) -> None:
    log = tmp_path / "steps.log"
    log.touch()
    first = spawn(server, queue, log)
    second = None
    try:
        await eventually(lambda: _queue_exists(client, queue), what="the first worker")
        h = await client.start("crashy", 5, queue=queue, workflow_id=f"crash-{queue}")

        async def two_steps_durable() -> bool:
            return len(await client.steps(h.workflow_id)) >= 2

        # The third step is running (sleeping) when the worker dies.
        await eventually(two_steps_durable, what="two recorded steps")
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        running = await client.get(h.workflow_id)
        assert running.status is WorkflowStatus.PENDING

        second = spawn(server, queue, log)
        assert await h.result(timeout=60) == [f"step-{i}" for i in range(5)]
        wf = await h.get()
        assert wf.recovery_attempts >= 1 and wf.epoch >= 2

        lines = [line.split() for line in log.read_text().splitlines()]
        counts = collections.Counter(name for name, _ in lines)
        assert counts == {f"step-{i}": 1 for i in range(5)}, lines
        pids = {pid for _, pid in lines}
        assert pids == {str(first.pid), str(second.pid)}, "both processes ran steps"
    finally:
        for p in (first, second):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()


async def _queue_exists(client: Client, queue: str) -> bool:
    return any(q.name == queue for q in await client.queues.list())
