"""Finding and moving many workflows at once on the real server, with this SDK's worker: tags
given at the start are read back, inherited by children (a child start's own replacing or
adding keys) and filter a listing (all of them must match), as do the parent, worker and
version; workflows stranded on a retired application version are counted, re-pinned one
by hand and the rest by filter, and then run; waiting workflows are cancelled, resumed and
deleted by tag in batches, and a repeated bulk call changes nothing twice. Each test tags its
workflows with values of its own, as the server is shared by the session."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Mapping
from typing import Any

import grpc
import pytest
from conftest import Workers

from waymark import (
    BulkAction,
    Client,
    RpcError,
    WorkflowContext,
    WorkflowFailed,
    WorkflowFilter,
    WorkflowStatus,
)


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


async def refused(call: Awaitable[Any]) -> RpcError:
    """The `RpcError` `call` raises."""
    with pytest.raises(RpcError) as e:
        await call
    return e.value


async def tagged(
    client: Client, tags: Mapping[str, str], status: WorkflowStatus | None = None
) -> list[str]:
    """The ids of the workflows carrying `tags` (and in `status` when given), sorted."""
    page = await client.list(tags=tags, statuses=[status] if status else None, page_size=1000)
    assert page.next_page_token is None
    return sorted(w.workflow_id for w in page.workflows)


async def test_tags_are_kept_inherited_by_children_and_listed_by(
    client: Client, workers: Workers
) -> None:
    w, q = workers.new(), workers.queue

    @w.workflow("echo")
    async def echo(ctx: WorkflowContext, n: int) -> int:
        return n

    @w.workflow("family")
    async def family(ctx: WorkflowContext) -> list[int]:
        a = await ctx.start_child("echo", 1, workflow_id=f"{ctx.workflow_id}-a", queue=q)
        b = await ctx.start_child("echo", 2, workflow_id=f"{ctx.workflow_id}-b", queue=q)
        return [await ctx.await_child(a), await ctx.await_child(b)]

    await workers.start(w)
    team, fam = uid("payments"), uid("fam")
    tags = {"team": team, "run": "r1"}
    h = await client.start("family", workflow_id=fam, queue=q, tags=tags)
    assert h.workflow is not None and h.workflow.tags == tags
    assert await h.result(timeout=30) == [1, 2]
    assert (await client.get(fam)).tags == tags

    tree = await tagged(client, {"team": team})
    assert tree == sorted([fam, f"{fam}-a", f"{fam}-b"]), "the parent and both children"
    for child in (f"{fam}-a", f"{fam}-b"):
        got = await client.get(child)
        assert (got.parent_workflow_id, got.tags) == (fam, tags), "inherited"
    assert await tagged(client, {"team": team, "run": "r2"}) == [], "all must match"
    assert await tagged(client, {"team": team, "run": "r1"}) == tree
    plain = await client.start("echo", 3, queue=q)
    assert plain.workflow is not None and plain.workflow.tags == {}
    assert await plain.result(timeout=30) == 3

    # Bounds: a key with `=`, or more than 16 tags, is refused and nothing is started.
    bad = uid("bad-tag")
    e = await refused(client.start("echo", 1, workflow_id=bad, queue=q, tags={"a=b": "c"}))
    assert (e.code, e.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    many = {f"k{i}": "v" for i in range(17)}
    e = await refused(client.start("echo", 1, queue=q, tags=many))
    assert e.code == grpc.StatusCode.INVALID_ARGUMENT and "at most 16" in str(e), e
    e = await refused(client.get(bad))
    assert e.reason == "WORKFLOW_NOT_FOUND", "a refused start leaves nothing"


async def test_a_child_start_overrides_inherited_tags_and_lists_by_parent(
    client: Client, workers: Workers
) -> None:
    w, q = workers.new(), workers.queue

    @w.workflow("echo")
    async def echo(ctx: WorkflowContext, n: int) -> int:
        return n

    @w.workflow("family")
    async def family(ctx: WorkflowContext, own: dict[str, str]) -> list[int]:
        a = await ctx.start_child("echo", 1, workflow_id=f"{ctx.workflow_id}-a", queue=q)
        b = await ctx.start_child("echo", 2, workflow_id=f"{ctx.workflow_id}-b", queue=q, tags=own)
        return [await ctx.await_child(a), await ctx.await_child(b)]

    await workers.start(w)
    team, fam = uid("a"), uid("fam")
    tags = {"team": team, "tier": "gold"}
    own = {"tier": "silver", "extra": "x"}
    await client.start("family", own, workflow_id=fam, queue=q, tags=tags)
    assert await client.result(fam, timeout=30) == [1, 2]
    plain, tagged_child = await client.get(f"{fam}-a"), await client.get(f"{fam}-b")
    assert plain.tags == tags, "inherited as they are"
    assert tagged_child.tags == {"team": team, "tier": "silver", "extra": "x"}, "overridden"

    async def listed(**filters: Any) -> list[str]:
        page = await client.list(page_size=1000, **filters)
        assert page.next_page_token is None
        return sorted(wf.workflow_id for wf in page.workflows)

    children = [f"{fam}-a", f"{fam}-b"]
    assert await listed(parent_workflow_id=fam) == children
    assert await listed(tags={"team": team, "tier": "silver"}) == [f"{fam}-b"]
    # The worker and version filters narrow the parent's children as the server has them.
    assert await listed(parent_workflow_id=fam, app_version="test") == children
    assert await listed(parent_workflow_id=fam, app_version="other") == []
    assert plain.worker_id, "a finished workflow keeps the worker that ran it"
    assert await listed(parent_workflow_id=fam, worker_id=plain.worker_id) == children
    assert await listed(parent_workflow_id=fam, worker_id="no-such-worker") == []

    # A bad key is refused by the server: the start raises, and uncaught it fails the parent
    # with the refusal's reason; no child is started.
    bad = uid("bad-child-tag")
    await client.start("family", {"a=b": "x"}, workflow_id=bad, queue=q, tags=tags)
    with pytest.raises(WorkflowFailed) as failed:
        await client.result(bad, timeout=30)
    e = failed.value
    assert (e.kind, e.status) == ("INVALID_ARGUMENT", "ERROR"), e
    assert "tag key" in e.message, e
    assert await listed(parent_workflow_id=bad) == [f"{bad}-a"], "only the plain child"


async def test_workflows_stranded_on_a_retired_version_are_re_pinned_one_or_by_filter(
    client: Client, workers: Workers
) -> None:
    w, q = workers.new(), workers.queue  # app version "test": the live one

    @w.workflow("echo")
    async def echo(ctx: WorkflowContext, n: int) -> int:
        return n

    await workers.start(w)
    batch = uid("stranded")
    ids = [uid(f"old-{i}") for i in range(6)]
    # Pinned to a version whose workers are gone: they wait ENQUEUED.
    for i, wid in enumerate(ids):
        h = await client.start(
            "echo", i, workflow_id=wid, queue=q, app_version="retired", tags={"batch": batch}
        )
        assert h.workflow is not None and h.workflow.status is WorkflowStatus.ENQUEUED
    stranded = WorkflowFilter(app_version="retired", tags={"batch": batch})
    assert await client.count_matching(stranded) == 6

    # A version no worker serves is refused unless asked, and the refusal changes nothing.
    e = await refused(client.set_version(ids[0], "test-9"))
    assert (e.code, e.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "VERSION_NOT_SERVED")
    assert (await client.get(ids[0])).app_version == "retired"
    # One by hand: it runs on the live version's worker.
    moved = await client.set_version(ids[0], "test")
    assert moved.app_version == "test"
    done = await client.wait(ids[0], timeout=30)
    assert (done.status, done.app_version, done.output) == (WorkflowStatus.SUCCESS, "test", 0)
    e = await refused(client.set_version(ids[0], "test", allow_unserved=True))
    assert (e.code, e.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "WORKFLOW_FINISHED")

    # The rest by filter: counted first, then moved two at a time (three batches).
    assert await client.count_matching(stranded) == 5
    repinned = await client.bulk(stranded, BulkAction.set_version("test"), batch_size=2)
    assert (repinned.matched, repinned.applied, repinned.skipped) == (5, 5, {})
    for i, wid in enumerate(ids[1:], start=1):
        assert await client.result(wid, timeout=30) == i
        assert (await client.get(wid)).app_version == "test"
    # Again: nothing is pinned there any more.
    again = await client.bulk(stranded, BulkAction.set_version("test"), batch_size=2)
    assert (again.matched, again.applied, again.skipped) == (0, 0, {})
    assert await client.count_matching(stranded) == 0
    # Re-pinning finished ones by tag: each skipped as finished.
    by_tag = WorkflowFilter(tags={"batch": batch})
    finished = await client.bulk(by_tag, BulkAction.set_version("test-2", allow_unserved=True), 4)
    assert (finished.matched, finished.applied) == (6, 0)
    assert finished.skipped == {"WORKFLOW_FINISHED": 6}


async def test_workflows_are_cancelled_resumed_and_deleted_by_filter_in_batches(
    client: Client, workers: Workers
) -> None:
    w, q = workers.new(), workers.queue

    @w.workflow("inbox")
    async def inbox(ctx: WorkflowContext) -> object:
        return await ctx.recv("t", timeout=600)

    await workers.start(w)
    job = uid("nightly")
    ids = [uid(f"n-{i}") for i in range(5)]
    for wid in ids:
        await client.start("inbox", workflow_id=wid, queue=q, tags={"job": job})
    other = await client.start("inbox", workflow_id=uid("other"), queue=q)
    nightly = WorkflowFilter(tags={"job": job})
    assert await client.count_matching(nightly) == 5

    # Deleting what has not finished: every one skipped, none touched.
    refusal = await client.bulk(nightly, BulkAction.DELETE, batch_size=2)
    assert (refusal.matched, refusal.applied) == (5, 0)
    assert refusal.skipped == {"WORKFLOW_NOT_FINISHED": 5}

    # Cancel in batches of two (three calls); the untagged one is left alone.
    first = await client.bulk_batch(nightly, BulkAction.CANCEL, 2)
    assert (first.matched, first.applied, first.skipped) == (2, 2, {})
    assert first.next_page_token is not None
    rest = await client.bulk(nightly, BulkAction.CANCEL, batch_size=2)
    assert (rest.matched, rest.applied) == (5, 3)
    assert rest.skipped == {"WORKFLOW_FINISHED": 2}, "the first batch's, already cancelled"
    assert await tagged(client, {"job": job}, WorkflowStatus.CANCELLED) == sorted(ids)
    assert not (await other.get()).status.is_terminal
    # Twice is safe: nothing is cancelled again.
    twice = await client.bulk(nightly, BulkAction.CANCEL, batch_size=2)
    assert (twice.matched, twice.applied) == (5, 0)
    assert twice.skipped == {"WORKFLOW_FINISHED": 5}

    # Resume them: they wait again, and a message finishes one.
    resumed = await client.bulk(nightly, BulkAction.RESUME, batch_size=100)
    assert (resumed.matched, resumed.applied, resumed.skipped) == (5, 5, {})
    await client.send(ids[0], "go", topic="t")
    assert await client.result(ids[0], timeout=30) == "go"

    # Delete the finished one by filter; the four still waiting are skipped.
    deleted = await client.bulk(nightly, BulkAction.DELETE, batch_size=3)
    assert (deleted.matched, deleted.applied) == (5, 1)
    assert deleted.skipped == {"WORKFLOW_NOT_FINISHED": 4}
    e = await refused(client.get(ids[0]))
    assert (e.code, e.reason) == (grpc.StatusCode.NOT_FOUND, "WORKFLOW_NOT_FOUND")
    # Cancel and delete the rest by status and tag.
    cancelled = await client.bulk(nightly, BulkAction.CANCEL, batch_size=100)
    assert (cancelled.matched, cancelled.applied) == (4, 4)
    done = WorkflowFilter(statuses=[WorkflowStatus.CANCELLED], tags={"job": job})
    assert await client.count_matching(done) == 4
    gone = await client.bulk(done, BulkAction.DELETE, batch_size=100)
    assert (gone.matched, gone.applied, gone.skipped) == (4, 4, {})
    assert await client.count_matching(nightly) == 0
    assert await tagged(client, {"job": job}) == []
    for wid in ids:
        e = await refused(client.get(wid))
        assert e.reason == "WORKFLOW_NOT_FOUND", wid
    status = (await other.get()).status
    assert not status.is_terminal, f"outside the filter: untouched ({status})"

    # A bad filter or batch size is refused.
    e = await refused(client.bulk(WorkflowFilter(tags={"": "x"}), BulkAction.CANCEL, 10))
    assert (e.code, e.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    e = await refused(client.bulk(nightly, BulkAction.CANCEL, batch_size=-1))
    assert e.reason == "INVALID_ARGUMENT", "a negative batch size"
    await other.cancel()
