"""The client on its own (no worker needed): start options, reads, errors, queues, schedules."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import grpc
import pytest
from conftest import eventually
from server import Server

from waymark import KEEP, Client, RateLimit, RpcError, Worker, WorkflowContext, WorkflowStatus


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


NAMES = [
    "nobody_runs_this",
    "job",
    "later",
    "bounce",
    "listed",
    "idle",
    "never_runs",
    "x",
    "nightly",
]


@pytest.fixture(scope="module", autouse=True)
async def registrar(server: Server) -> AsyncIterator[None]:
    """The server refuses to start workflow names no worker registered: this worker registers
    them, on a queue of its own that no test starts on, so nothing here gets run."""
    w = Worker(server=server.address, queues=[uid("registrar")], app_version="test")
    for name in NAMES:
        w.workflow(name)(_never)
    task = asyncio.create_task(w.run())
    async with Client(server.address) as c:

        async def registered() -> bool:
            try:
                await c.start("idle", queue=uid("nowhere"))
            except RpcError as e:
                return e.reason == "QUEUE_NOT_FOUND"
            return False

        await eventually(registered, what="the registrar worker")
    yield
    w.stop()
    await task


async def _never(ctx: WorkflowContext) -> None:
    raise AssertionError("not meant to run")


async def test_start_is_idempotent_and_carries_its_options(client: Client) -> None:
    q = uid("opts")
    await client.queues.create(q)
    wid = uid("wf")
    h = await client.start(
        "nobody_runs_this",
        {"a": [1, 2.5, None, True]},
        workflow_id=wid,
        queue=q,
        app_version="v7",
        timeout=timedelta(hours=1),
        priority=3,
        partition_key="tenant-1",
    )
    assert h.created and h.workflow is not None
    wf = h.workflow
    assert (wf.workflow_id, wf.queue_name, wf.app_version) == (wid, q, "v7")
    assert (wf.priority, wf.partition_key, wf.status) == (3, "tenant-1", WorkflowStatus.ENQUEUED)
    assert wf.input == {"a": [1, 2.5, None, True]}
    assert wf.deadline is not None and wf.deadline > datetime.now(UTC)
    again = await client.start("nobody_runs_this", {"other": "input"}, workflow_id=wid, queue=q)
    assert not again.created and again.workflow is not None
    assert again.workflow.input == {"a": [1, 2.5, None, True]}


async def test_dedup_ids(client: Client) -> None:
    q = uid("dedup")
    await client.queues.create(q)
    first = await client.start("job", queue=q, dedup_id="d1")
    with pytest.raises(RpcError) as e:
        await client.start("job", queue=q, dedup_id="d1")
    assert e.value.reason == "DEDUP_ID_TAKEN"
    assert e.value.code == grpc.StatusCode.ALREADY_EXISTS
    assert e.value.metadata.get("holder_workflow_id") == first.workflow_id
    holder = await client.start("job", queue=q, dedup_id="d1", return_existing=True)
    assert not holder.created and holder.workflow_id == first.workflow_id


async def test_delayed_start_and_debounce(client: Client) -> None:
    q = uid("delay")
    await client.queues.create(q)
    h = await client.start("later", queue=q, delay=3600)
    assert h.workflow is not None and h.workflow.status is WorkflowStatus.DELAYED
    assert h.workflow.wake_at is not None
    moved = await client.delay(h.workflow_id, timedelta(hours=2))
    assert moved.wake_at is not None and moved.wake_at > h.workflow.wake_at
    a = await client.start("bounce", 1, queue=q, delay=60, debounce_key="k")
    b = await client.start("bounce", 2, queue=q, delay=60, debounce_key="k", debounce_max_delay=600)
    assert b.workflow_id == a.workflow_id
    assert (await b.get()).input == 2


async def test_list_filters_and_pages(client: Client) -> None:
    q = uid("list")
    await client.queues.create(q)
    ids = [(await client.start("listed", i, queue=q)).workflow_id for i in range(5)]
    page = await client.list(queue=q, page_size=2)
    assert len(page.workflows) == 2 and page.next_page_token
    seen = [w.workflow_id for w in page.workflows]
    while page.next_page_token:
        page = await client.list(queue=q, page_size=2, page_token=page.next_page_token)
        seen += [w.workflow_id for w in page.workflows]
    assert sorted(seen) == sorted(ids)
    only = await client.list(queue=q, statuses=[WorkflowStatus.SUCCESS])
    assert only.workflows == []
    named = await client.list(
        workflow_name="listed", queue=q, created_after=datetime.now(UTC) - timedelta(minutes=5)
    )
    assert len(named.workflows) == 5


async def test_errors_carry_reasons(client: Client) -> None:
    with pytest.raises(RpcError) as e:
        await client.get(uid("missing"))
    assert e.value.reason == "WORKFLOW_NOT_FOUND" and e.value.code == grpc.StatusCode.NOT_FOUND
    with pytest.raises(RpcError) as e:
        await client.start("x", queue=uid("no-such-queue"))
    assert e.value.reason == "QUEUE_NOT_FOUND"
    with pytest.raises(RpcError) as e:
        await client.wait((await client.start("never_runs")).workflow_id, timeout=0.3)
    assert e.value.reason == "DEADLINE_EXCEEDED"


async def test_cancel_and_resume_without_a_worker(client: Client) -> None:
    h = await client.start("idle")
    assert (await h.cancel()).status is WorkflowStatus.CANCELLED
    assert (await client.wait(h.workflow_id, timeout=5)).status is WorkflowStatus.CANCELLED
    assert (await client.resume(h.workflow_id)).status is WorkflowStatus.ENQUEUED
    await h.cancel()


async def test_queues_crud(client: Client) -> None:
    name = uid("crud")
    q = await client.queues.create(name, worker_concurrency=2, rate_limit=RateLimit(10, 60))
    assert (q.worker_concurrency, q.global_concurrency) == (2, None)
    assert q.rate_limit is not None and q.rate_limit.max_starts == 10
    assert q.rate_limit.period == timedelta(seconds=60)
    with pytest.raises(RpcError) as e:
        await client.queues.create(name)
    assert e.value.reason == "QUEUE_EXISTS"
    q = await client.queues.update(
        name, global_concurrency=5, rate_limit=None, worker_concurrency=KEEP
    )
    assert (q.worker_concurrency, q.global_concurrency, q.rate_limit) == (2, 5, None)
    q = await client.queues.update(name, partition_concurrency=1)
    assert (q.global_concurrency, q.partition_concurrency) == (5, 1)
    assert name in [x.name for x in await client.queues.list()]
    assert (await client.queues.get(name)).partition_concurrency == 1
    await client.queues.delete(name)
    with pytest.raises(RpcError) as e:
        await client.queues.get(name)
    assert e.value.reason == "QUEUE_NOT_FOUND"
    with pytest.raises(RpcError) as e:
        await client.queues.delete("default")
    assert e.value.reason == "QUEUE_PROTECTED"


async def test_schedules(client: Client) -> None:
    name = uid("sched")
    s = await client.schedules.create(
        name, cron="0 0 * * *", workflow_name="nightly", input={"x": 1}, timezone="Europe/Berlin"
    )
    assert s.next_fire_time is not None and not s.paused
    s = await client.schedules.update(name, cron="30 1 * * *", input={"x": 2})
    assert (s.cron, s.input) == ("30 1 * * *", {"x": 2})
    assert (await client.schedules.pause(name)).paused
    assert not (await client.schedules.resume(name)).paused
    wf, created = await client.schedules.trigger(name, request_id="once")
    again, created_again = await client.schedules.trigger(name, request_id="once")
    assert created and not created_again and again.workflow_id == wf.workflow_id
    end = datetime.now(UTC) - timedelta(minutes=1)
    runs = await client.schedules.backfill(name, end - timedelta(days=2), end)
    assert len(runs) == 2 and all(r.created for r in runs)
    assert name in [x.name for x in await client.schedules.list()]
    await client.schedules.delete(name)
    with pytest.raises(RpcError):
        await client.schedules.get(name)
