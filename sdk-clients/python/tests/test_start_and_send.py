"""Start-and-send against the server: a start and a message in one call, delivered once with an
idempotency key, received by the workflow it started; the starts it refuses."""

from __future__ import annotations

import uuid

import grpc
import pytest
from conftest import Workers

from waymark import Client, RpcError, WorkflowContext, WorkflowStatus


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


async def idle_queue(client: Client) -> str:
    """A queue no worker serves: what is started there stays ENQUEUED with its messages unread.
    The starts on it pass `allow_unregistered`, as no worker registers their names."""
    q = uid("idle")
    await client.queues.create(q)
    return q


async def test_start_and_send_starts_the_workflow_with_its_message(client: Client) -> None:
    q = await idle_queue(client)
    wid = uid("customer")
    r = await client.start_and_send(
        "feed",
        {"customer": 7},
        workflow_id=wid,
        queue=q,
        allow_unregistered=True,
        topic="orders",
        message={"order": 1},
        idempotency_key="order-1",
    )
    assert r.handle.created and not r.duplicate and r.message_id
    assert not r.handle.name_registered
    wf = r.handle.workflow
    assert wf is not None
    assert (wf.workflow_id, wf.workflow_name, wf.queue_name) == (wid, "feed", q)
    assert (wf.status, wf.input) == (WorkflowStatus.ENQUEUED, {"customer": 7})
    [m] = await client.messages(wid)
    assert (m.message_id, m.topic, m.payload) == (r.message_id, "orders", {"order": 1})
    assert (m.idempotency_key, m.consumed) == ("order-1", False)


async def test_a_repeated_start_and_send_neither_starts_nor_delivers_again(client: Client) -> None:
    q = await idle_queue(client)
    wid = uid("customer")
    first = await client.start_and_send(
        "feed",
        workflow_id=wid,
        queue=q,
        allow_unregistered=True,
        message="hello",
        idempotency_key="k",
    )
    # Other input and another message: a retry is recognised by its id and key alone.
    again = await client.start_and_send(
        "feed",
        {"other": "input"},
        workflow_id=wid,
        queue=q,
        allow_unregistered=True,
        message="hello again",
        idempotency_key="k",
    )
    assert first.handle.created and not first.duplicate
    assert not again.handle.created and again.duplicate
    assert again.message_id == first.message_id
    assert again.handle.workflow is not None and again.handle.workflow.input is None
    assert [m.payload for m in await client.messages(wid)] == ["hello"]
    [wf] = (await client.list(queue=q)).workflows
    assert wf.workflow_id == wid


async def test_the_workflow_receives_what_start_and_send_sent(
    client: Client, workers: Workers
) -> None:
    w = workers.new()

    @w.workflow("tally")
    async def tally(ctx: WorkflowContext, customer: str) -> list[object]:
        first = await ctx.recv("orders", timeout=30)
        second = await ctx.recv("orders", timeout=30)
        return [customer, first, second]

    await workers.start(w)
    wid = uid("customer")
    first = await client.start_and_send(
        "tally", "c-1", workflow_id=wid, queue=workers.queue, topic="orders", message=1
    )
    # The workflow waits for a second message: this call finds it started and only sends.
    second = await client.start_and_send(
        "tally", "c-1", workflow_id=wid, queue=workers.queue, topic="orders", message=2
    )
    assert first.handle.created and not second.handle.created
    assert second.message_id != first.message_id and not second.duplicate
    assert await second.handle.result(timeout=30) == ["c-1", 1, 2]
    assert all(m.consumed for m in await client.messages(wid))
    # It succeeded: it takes no more, and nothing is started in its place.
    with pytest.raises(RpcError) as e:
        await client.start_and_send(
            "tally", "c-1", workflow_id=wid, queue=workers.queue, topic="orders", message=3
        )
    assert (e.value.code, e.value.reason) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "WORKFLOW_NOT_RUNNING",
    )
    assert len(await client.messages(wid)) == 2


async def test_a_debounced_start_is_refused(client: Client) -> None:
    q = await idle_queue(client)
    wid = uid("customer")
    with pytest.raises(RpcError) as e:
        await client.start_and_send(
            "feed",
            workflow_id=wid,
            queue=q,
            allow_unregistered=True,
            delay=60,
            debounce_key="d",
            message="hello",
        )
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(RpcError) as e:
        await client.get(wid)
    assert e.value.reason == "WORKFLOW_NOT_FOUND"


async def test_another_workflow_name_under_the_id_is_a_conflict(client: Client) -> None:
    q = await idle_queue(client)
    h = await client.start("feed", queue=q, allow_unregistered=True)
    with pytest.raises(RpcError) as e:
        await client.start_and_send(
            "other", workflow_id=h.workflow_id, queue=q, allow_unregistered=True, message="hi"
        )
    assert (e.value.code, e.value.reason) == (
        grpc.StatusCode.ALREADY_EXISTS,
        "WORKFLOW_ID_CONFLICT",
    )
    assert await client.messages(h.workflow_id) == []
