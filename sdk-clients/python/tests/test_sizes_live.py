"""Sizes against a real server (its defaults: 4 MiB payloads, 9 MiB messages): a workflow whose
input, two steps and output are 3 MiB each finishes, its completion split so no message is over
the limit; one whose output is 5 MiB fails with PAYLOAD_TOO_LARGE. The worker's stream stays up
throughout: one connection, each workflow run once.

The large workflow is read back through another workflow awaiting it, which works on every
server: a server before commit 5b3fd0c could not send a workflow whose input and output together
are more than one payload through its client API (OUT_OF_RANGE)."""

from __future__ import annotations

import asyncio

import pytest
from conftest import Workers

from waymark import Client, WorkflowContext, WorkflowStatus

MiB = 1024 * 1024


async def test_large_payloads_finish_without_the_stream_dropping(
    client: Client, workers: Workers, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("DEBUG", logger="waymark.worker")
    w = workers.new(park_after=None)
    both_running = asyncio.Barrier(2)
    # Recovery attempts seen by each run of "large": a dropped stream would run it again.
    runs: list[int] = []

    async def three_mib(c: str) -> str:
        # Both steps finish before either is recorded: their records are still held when the
        # workflow returns, and with its output come to more than one message may carry.
        await both_running.wait()
        return c * (3 * MiB)

    @w.workflow("large")
    async def large(ctx: WorkflowContext, input: str) -> str:
        runs.append(ctx.recovery_attempts)
        a, b = await asyncio.gather(ctx.step("a", three_mib, "a"), ctx.step("b", three_mib, "b"))
        assert (a, b) == ("a" * (3 * MiB), "b" * (3 * MiB))
        return input.upper()

    @w.workflow("watch")
    async def watch(ctx: WorkflowContext, workflow_id: str) -> bool:
        # Raises unless it finished SUCCESS.
        output = await ctx.await_child(workflow_id)
        return bool(output == "I" * (3 * MiB))

    @w.workflow("too_large")
    async def too_large(ctx: WorkflowContext) -> str:
        return "x" * (5 * MiB)

    await workers.start(w)
    h = await client.start("large", "i" * (3 * MiB), queue=workers.queue)
    watcher = await client.start("watch", h.workflow_id, queue=workers.queue)
    assert await watcher.result(timeout=120) is True
    assert runs == [0]
    assert f"completion of {h.workflow_id} with its 2 step records" in caplog.text

    h = await client.start("too_large", queue=workers.queue)
    wf = await h.wait(timeout=120)
    assert wf.status is WorkflowStatus.ERROR
    assert wf.failure is not None and wf.failure.kind == "PAYLOAD_TOO_LARGE"
    assert f"is {5 * MiB + 2} bytes of JSON" in wf.failure.message, wf.failure.message
    assert wf.recovery_attempts == 0

    connects = [r for r in caplog.records if r.getMessage().startswith("connected to Waymark")]
    assert len(connects) == 1, [r.getMessage() for r in connects]
    assert "worker stream ended" not in caplog.text
