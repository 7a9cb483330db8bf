"""The end and the start of a workflow's life on the real server: deleting finished workflows
(one, or a parent with its children) with what was recorded for them, refusals for what has not
finished, and a workflow enqueued before any worker registers its name, which runs once one
does."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable
from typing import Any

import grpc
import pytest
from conftest import Workers, eventually

from waymark import Client, RpcError, WorkflowContext, WorkflowStatus


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
