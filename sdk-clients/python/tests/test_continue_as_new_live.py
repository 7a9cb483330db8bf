"""Continue-as-new through a real server with real worker processes, as the server's
integration test (continue_as_new.rs) does it: a workflow that loops by continuing as new keeps
its id (its awaiter, its inbox), each run starts with an empty history, each ended run is kept
as `<id>/run-<n>` with its own steps, and a worker killed -9 between runs loses nothing and
continues no run twice."""

from __future__ import annotations

import asyncio
import os
import pathlib
import signal
import subprocess
import sys

from conftest import eventually
from server import Server

from waymark import Client, Workflow, WorkflowStatus

HERE = pathlib.Path(__file__).parent
WORKFLOW_ID = "loop-python"


def spawn(server: Server, queue: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(HERE / "looper_worker.py"), server.address, queue],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def test_a_looping_workflow_continues_as_new_under_its_id(
    server: Server, client: Client, queue: str
) -> None:
    first = spawn(server, queue)
    second = None
    try:
        await eventually(lambda: _queue_exists(client, queue), what="the first worker")
        input = {"n": 0, "until": 3, "wait": True}
        h = await client.start("looper", input, queue=queue, workflow_id=WORKFLOW_ID)
        awaiter = asyncio.create_task(client.wait(WORKFLOW_ID, timeout=120))
        await client.send(WORKFLOW_ID, 0, topic="go")

        # The first run ends and the second waits: the worker is killed -9 there.
        async def second_run_waiting() -> Workflow | None:
            w = await client.get(WORKFLOW_ID)
            return w if w.run == 1 and w.status is WorkflowStatus.DELAYED else None

        waiting = await eventually(second_run_waiting, 60, "the second run waiting")
        assert waiting.input == {"n": 1, "until": 3, "wait": True}
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        second = spawn(server, queue)
        # Messages sent to the workflow's id reach whichever run is current, read or not yet.
        for i in range(1, 4):
            await client.send(WORKFLOW_ID, i, topic="go")

        done = await h.wait(timeout=120)
        assert (done.status, done.output, done.run) == (WorkflowStatus.SUCCESS, 3, 3)
        awaited = await awaiter
        assert (awaited.workflow_id, awaited.status) == (WORKFLOW_ID, WorkflowStatus.SUCCESS)

        # The current run's history is its own: the recv (its deadline, then the message) and
        # one tick.
        steps = await client.steps(WORKFLOW_ID)
        assert [s.name for s in steps] == ["waymark.recv.deadline", "waymark.recv", "tick"]
        assert (steps[1].output, steps[2].output) == ({"message": 3}, 3)

        # Every ended run kept its own, exactly once each: nothing ran twice after the kill.
        page = await client.list(statuses=[WorkflowStatus.CONTINUED_AS_NEW], workflow_name="looper")
        ended = sorted(page.workflows, key=lambda w: w.workflow_id)
        assert [w.workflow_id for w in ended] == [f"{WORKFLOW_ID}/run-{i}" for i in range(3)]
        for i, w in enumerate(ended):
            assert (w.status, w.run, w.continued_as_workflow_id) == (
                WorkflowStatus.CONTINUED_AS_NEW,
                i,
                WORKFLOW_ID,
            )
            assert w.status.is_terminal
            assert w.input == {"n": i, "until": 3, "wait": True}
            run_steps = await client.steps(w.workflow_id)
            assert [s.name for s in run_steps] == [
                "waymark.recv.deadline",
                "waymark.recv",
                "tick",
            ], w.workflow_id
            # Each run read its own message, and its tick returned its number.
            assert (run_steps[1].output, run_steps[2].output) == ({"message": i}, i)
    finally:
        for p in (first, second):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()


async def _queue_exists(client: Client, queue: str) -> bool:
    return any(q.name == queue for q in await client.queues.list())
