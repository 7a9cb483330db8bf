"""The Python golden workflows run live (against the real server) record the committed golden
histories — times, UUIDs and message ids aside — as the Rust ones do: the Python copy makes the
same calls in the same order. And a live run's history, read back with `Client.history`,
replays offline to what the run returned. (The offline replays of the committed files are in
test_golden.py.)"""

from __future__ import annotations

from typing import Any

import golden_workflows as golden
from conftest import Workers

from waymark import Client, Worker
from waymark.replay import Replayer, Returned

# The scenarios run live: file, workflow (the others are derived from these; see
# integration-tests/tests/golden.rs).
LIVE = [
    ("steps", "golden.steps"),
    ("sleep", "golden.sleep"),
    ("messages", "golden.messages"),
    ("events", "golden.events"),
    ("stream", "golden.stream"),
    ("child", "golden.child"),
    ("remote_retry", "golden.remote"),
    ("drawn", "golden.drawn"),
    ("patched", "golden.patched"),
    # After golden.remote: they call its remote step, whose attempts it counts.
    ("select", "golden.select"),
    ("wait_all", "golden.wait_all"),
]
# And golden.update (file "update"), which a client sends an update to: see the test.

# Values that differ from run to run, blanked for the comparison.
VARYING = {"wake_at_ms": 0, "deadline_ms": 0, "now_ms": 0, "uuid": "", "message_id": ""}


def normalized(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: VARYING[k] if k in VARYING else normalized(x) for k, x in v.items()}
    if isinstance(v, list):
        return [normalized(x) for x in v]
    return v


async def test_the_golden_workflows_record_the_golden_histories(
    workers: Workers, client: Client, queue: str
) -> None:
    await workers.start(golden.register(workers.new()))
    replayer = Replayer(golden.register(Worker()))
    for file, workflow in LIVE:
        workflow_id = f"golden-{file}-{queue}"
        await client.start(workflow, {"n": 41}, workflow_id=workflow_id, queue=queue)
        output = await client.result(workflow_id, timeout=60)
        await recorded_as_committed(client, replayer, file, workflow_id, output)
    # golden.update needs a client to send it its update (as integration-tests/tests/golden.rs
    # does).
    workflow_id = f"golden-update-{queue}"
    await client.start("golden.update", {}, workflow_id=workflow_id, queue=queue)
    answer = await client.update_workflow(
        workflow_id, "add", {"n": 41}, update_id="golden-update-1", timeout=120
    )
    assert answer == {"total": 42}
    output = await client.result(workflow_id, timeout=60)
    await recorded_as_committed(client, replayer, "update", workflow_id, output)


async def recorded_as_committed(
    client: Client, replayer: Replayer, file: str, workflow_id: str, output: Any
) -> None:
    """The live run's outcome and history are the committed file's, and the history replays to
    what the run returned, running nothing."""
    live = await client.history(workflow_id)
    committed = golden.read(golden.HISTORIES / f"{file}.json")
    assert normalized(committed["expect"]) == normalized({"returned": output}), file
    # Recorded under another id; a child's id is derived from its parent's.
    want = {**committed["history"], "workflow_id": workflow_id}
    for step in want["steps"]:
        if step["name"] == "waymark.start_child":
            step["output"]["workflow_id"] = f"{workflow_id}/child-{step['step_id']}"
    assert normalized(live) == normalized(want), file
    golden.ran.clear()
    assert await replayer.replay(live) == Returned(output), file
    assert golden.ran == [], file
