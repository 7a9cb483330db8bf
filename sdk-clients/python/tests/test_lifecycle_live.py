"""The end and the start of a workflow's life on the real server: deleting finished workflows
(one, or a parent with its children) with what was recorded for them, refusals for what has not
finished, a workflow enqueued before any worker registers its name, which runs once one does,
and a second life: a finished workflow forked from a step runs only the steps from there, and a
failed one resumed after a fixed worker of its version replaced the buggy one reruns its failed
step."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable
from typing import Any

import grpc
import pytest
from conftest import Workers, eventually

from waymark import Client, RetryPolicy, RpcError, WorkflowContext, WorkflowStatus


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


async def refused(call: Awaitable[Any]) -> RpcError:
    """The `RpcError` `call` raises."""
    with pytest.raises(RpcError) as e:
        await call
    return e.value


async def test_a_finished_parent_is_deleted_with_its_children(
    client: Client, workers: Workers
) -> None:
    w, q = workers.new(), workers.queue

    @w.workflow("echo")
    async def echo(ctx: WorkflowContext, n: int) -> int:
        return n

    @w.workflow("family")
    async def family(ctx: WorkflowContext) -> object:
        a = await ctx.start_child("echo", 1, workflow_id=f"{ctx.workflow_id}-a", queue=q)
        b = await ctx.start_child("echo", 2, workflow_id=f"{ctx.workflow_id}-b", queue=q)
        children = [await ctx.await_child(a), await ctx.await_child(b)]
        # Its children have finished; it has not, until told to.
        await ctx.recv("go", timeout=600)
        return children

    await workers.start(w)
    parent = uid("fam")
    a, b = f"{parent}-a", f"{parent}-b"
    h = await client.start("family", workflow_id=parent, queue=q)

    async def waits_for_go() -> bool:
        return any(s.name == "waymark.recv.deadline" for s in await client.steps(parent))

    await eventually(waits_for_go, what="the parent to wait for its message")
    for child in (a, b):
        assert (await client.get(child)).status is WorkflowStatus.SUCCESS

    # While the parent runs: a child may still be awaited, and the tree is not finished.
    e = await refused(client.delete(a))
    assert (e.code, e.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "PARENT_NOT_FINISHED")
    e = await refused(client.delete(parent, cascade=True))
    assert (e.code, e.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "WORKFLOW_NOT_FINISHED")

    await h.send("now", topic="go")
    assert await h.result(timeout=30) == [1, 2]
    # A child goes alone; then the parent with what is left of its tree, the one asked for first.
    assert await client.delete(a) == [a]
    assert await client.delete(parent, cascade=True) == [parent, b]
    for gone in (parent, a, b):
        e = await refused(client.get(gone))
        assert (e.code, e.reason) == (grpc.StatusCode.NOT_FOUND, "WORKFLOW_NOT_FOUND"), gone
        e = await refused(client.steps(gone))
        assert e.reason == "WORKFLOW_NOT_FOUND", gone
    # A repeated delete finds it gone, as does one of an id never started.
    for missing in (parent, uid("never")):
        e = await refused(client.delete(missing))
        assert (e.code, e.reason) == (grpc.StatusCode.NOT_FOUND, "WORKFLOW_NOT_FOUND"), missing


async def test_a_waiting_workflow_is_deleted_only_once_cancelled(
    client: Client, workers: Workers
) -> None:
    w = workers.new()

    @w.workflow("inbox")
    async def inbox(ctx: WorkflowContext) -> object:
        return await ctx.recv("t", timeout=600)

    await workers.start(w)
    wid = uid("waiting")
    h = await client.start("inbox", workflow_id=wid, queue=workers.queue)
    await h.send("unread", topic="other")
    e = await refused(client.delete(wid))
    assert (e.code, e.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "WORKFLOW_NOT_FINISHED")
    assert len(await client.messages(wid)) == 1, "a refused delete touches nothing"
    await h.cancel()
    assert await client.delete(wid) == [wid]
    e = await refused(client.get(wid))
    assert e.reason == "WORKFLOW_NOT_FOUND"
    # The same id starts afresh: nothing of the old one is left to read.
    again = await client.start("inbox", workflow_id=wid, queue=workers.queue)
    assert again.created
    assert await client.messages(wid) == [], "the old inbox went with it"
    await again.cancel()


async def test_a_workflow_enqueued_before_its_worker_runs_once_one_registers_it(
    client: Client, workers: Workers
) -> None:
    # A name no worker of this server has ever registered, on a queue no worker serves yet.
    name, q = uid("early"), workers.queue
    await client.queues.create(q)
    e = await refused(client.start(name, 1, queue=q))
    assert (e.code, e.reason) == (grpc.StatusCode.NOT_FOUND, "WORKFLOW_NAME_UNKNOWN")

    wid = uid("early")
    h = await client.start(name, {"n": 7}, workflow_id=wid, queue=q, allow_unregistered=True)
    assert h.created and not h.name_registered
    assert h.workflow is not None and h.workflow.status is WorkflowStatus.ENQUEUED
    again = await client.start(name, {"n": 7}, workflow_id=wid, queue=q, allow_unregistered=True)
    assert not again.created, "a retried start is the same start"

    # The worker arrives (a rolling deploy) and takes it.
    w = workers.new()

    @w.workflow(name)
    async def echo(ctx: WorkflowContext, x: object) -> object:
        return x

    await workers.start(w)
    assert await h.result(timeout=30) == {"n": 7}
    later = await client.start(name, 2, queue=q, allow_unregistered=True)
    assert later.created and later.name_registered
    assert await later.result(timeout=30) == 2


async def test_a_finished_workflow_forked_from_a_step_runs_only_the_steps_from_there(
    client: Client, workers: Workers
) -> None:
    w = workers.new()
    ran: list[tuple[str, int]] = []  # (workflow id, step) for every step function that ran

    @w.workflow("counted")
    async def counted(ctx: WorkflowContext, n: int) -> int:
        total = 0
        for i in range(n):

            def effect(i: int = i) -> int:
                ran.append((ctx.workflow_id, i))
                return i

            total += await ctx.step(f"step-{i}", effect)
        return total

    await workers.start(w)
    source, fork_id = uid("three"), uid("three-again")
    h = await client.start("counted", 3, workflow_id=source, queue=workers.queue)
    assert await h.result(timeout=30) == 3
    assert sorted(i for wid, i in ran if wid == source) == [0, 1, 2]

    fork = await client.fork(source, from_step=1, new_id=fork_id)
    assert fork.workflow_id == fork_id and fork.workflow is not None
    wf = fork.workflow
    assert (wf.forked_from_workflow_id, wf.forked_from_step) == (source, 1)
    assert (wf.workflow_name, wf.queue_name, wf.app_version) == ("counted", workers.queue, "test")
    assert await fork.result(timeout=30) == 3
    assert sorted(i for wid, i in ran if wid == fork_id) == [1, 2], "step 0 was copied, not run"
    assert [s.name for s in await client.steps(fork_id)] == ["step-0", "step-1", "step-2"]
    got = await client.get(fork_id)
    assert (got.forked_from_workflow_id, got.forked_from_step) == (source, 1)
    plain = await client.get(source)
    assert (plain.forked_from_workflow_id, plain.forked_from_step) == ("", 0)
    # The same fork again (a resend after a lost reply) is the first one; another source's
    # claim on the id is refused.
    again = await client.fork(source, from_step=1, new_id=fork_id)
    assert again.workflow_id == fork_id
    e = await refused(client.fork(fork_id, new_id=source))
    assert (e.code, e.reason) == (grpc.StatusCode.ALREADY_EXISTS, "WORKFLOW_ID_CONFLICT")
    e = await refused(client.fork(uid("never")))
    assert e.code == grpc.StatusCode.NOT_FOUND


async def test_a_failed_workflow_resumed_on_a_fixed_worker_reruns_its_failed_step(
    client: Client, workers: Workers
) -> None:
    def worker(fixed: bool) -> Any:
        w = workers.new()  # the same app version ("test") both times

        @w.workflow("charge")
        async def charge(ctx: WorkflowContext, amount: int) -> int:
            def pay() -> int:
                if not fixed:
                    raise ValueError("the bug")
                return amount

            return await ctx.step("pay", pay, retry=RetryPolicy(max_attempts=1))

        return w

    buggy = await workers.start(worker(fixed=False))
    wid = uid("bug")
    h = await client.start("charge", 5, workflow_id=wid, queue=workers.queue)
    failed = await h.wait(timeout=30)
    assert (failed.status, failed.app_version) == (WorkflowStatus.ERROR, "test"), failed
    assert failed.failure is not None
    steps = await client.steps(wid)
    assert len(steps) == 1 and steps[0].failure is not None

    # The fix ships under the same version: the buggy worker goes, a fixed one comes.
    buggy.stop()
    await asyncio.wait_for(next(t for w, t in workers.tasks if w is buggy), 10)
    await workers.start(worker(fixed=True))
    resumed = await client.resume(wid)
    assert (resumed.status, resumed.failure) == (WorkflowStatus.ENQUEUED, None)
    assert await h.result(timeout=30) == 5
    steps = await client.steps(wid)
    assert len(steps) == 1 and steps[0].failure is None, f"the failed record was replaced: {steps}"
    assert steps[0].output == 5
