"""Workflow updates against the server: a client's update is answered in the same call by the
workflow's own code (a step run for it); sent again with its id it is answered again without
running anything twice; a rejection, arguments of the wrong shape, an update nobody takes and a
workflow that ends without answering each reach the caller as their own reason."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import golden_workflows as golden
import grpc
import pytest
from conftest import Workers

from waymark import Client, RpcError, Worker, WorkflowContext
from waymark.replay import Replayer, Returned, Suspended

# What the carts' "add-item" step function was called with, across this module's tests (each
# names its cart, so the tests do not see each other's).
added: list[tuple[str, str]] = []


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def register(w: Worker) -> Worker:
    @w.workflow("cart")
    async def cart(ctx: WorkflowContext, input: dict[str, Any]) -> dict[str, Any]:
        """Takes "add" updates ({"name": S, "qty": Q}) until it holds `items` lines, each
        answered with {"lines": L, "total": T}; Q < 1, and arguments of another shape, are
        rejected. Returns the lines."""
        lines: list[list[Any]] = []
        while len(lines) < input["items"]:
            u = await ctx.recv_update("add", timeout=600)
            if u is None:
                break
            name, qty = fit(u.args)
            if name is None or qty is None:
                # A client's mistake, not the workflow's: refused, and the cart goes on.
                await ctx.reject_update(u.id, f"its arguments do not fit: {u.args!r}")
                continue
            if qty < 1:
                await ctx.reject_update(u.id, "quantity must be at least 1")
                continue
            before = sum(q for _, q in lines)
            total = await ctx.step("add-item", add_item, ctx.workflow_id, name, before + qty)
            lines.append([name, qty])
            await ctx.answer_update(u.id, {"lines": len(lines), "total": total})
        return {"lines": lines}

    return w


def fit(args: Any) -> tuple[str | None, int | None]:
    """An item's name and quantity, or Nones when `args` is not {"name": str, "qty": int}."""
    if not isinstance(args, dict):
        return None, None
    name, qty = args.get("name"), args.get("qty")
    if not isinstance(name, str) or not isinstance(qty, int) or isinstance(qty, bool):
        return None, None
    return name, qty


def add_item(cart: str, name: str, total: int) -> int:
    added.append((cart, name))
    return total


async def test_an_update_is_answered_once_by_the_workflow(client: Client, workers: Workers) -> None:
    await workers.start(register(workers.new()))
    cart = uid("cart")
    await client.start("cart", {"items": 2}, workflow_id=cart, queue=workers.queue)

    tea = await client.update_workflow(cart, "add", {"name": "tea", "qty": 2}, update_id="u-tea")
    assert tea == {"lines": 1, "total": 2}
    # Sent again (a caller's retry), even with other arguments: the first answer, and nothing
    # done twice.
    again = await client.update_workflow(cart, "add", {"name": "tea", "qty": 9}, update_id="u-tea")
    assert again == tea
    assert added.count((cart, "tea")) == 1
    # Without an id (one is made): another update, through the workflow's handle.
    coffee = await client.handle(cart).update("add", {"name": "coffee", "qty": 3})
    assert coffee == {"lines": 2, "total": 5}

    assert await client.result(cart, timeout=60) == {"lines": [["tea", 2], ["coffee", 3]]}
    steps = await client.steps(cart)
    assert [s.output for s in steps if s.name == "add-item"] == [2, 5]
    assert added.count((cart, "tea")) == 1 and added.count((cart, "coffee")) == 1
    # Each update was one message, taken by one receive.
    assert [s.name for s in steps].count("waymark.recv") == 2
    assert len(await client.messages(cart)) == 2

    # Once it has ended, an answered update is still answered; a new one is refused.
    assert await client.update_workflow(cart, "add", {}, update_id="u-tea") == tea
    with pytest.raises(RpcError) as e:
        await client.update_workflow(cart, "add", {"name": "late", "qty": 1})
    assert (e.value.code, e.value.reason) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "WORKFLOW_NOT_RUNNING",
    )


async def test_a_rejection_reaches_the_caller_with_its_reason(
    client: Client, workers: Workers
) -> None:
    await workers.start(register(workers.new()))
    cart = uid("cart")
    await client.start("cart", {"items": 1}, workflow_id=cart, queue=workers.queue)

    with pytest.raises(RpcError) as e:
        await client.update_workflow(cart, "add", {"name": "air", "qty": 0}, update_id="u-air")
    assert (e.value.code, e.value.reason) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "UPDATE_REJECTED",
    )
    assert "quantity must be at least 1" in e.value.message
    assert e.value.metadata.get("update_id") == "u-air"
    # Arguments of another shape: the workflow's own check refuses them, and it does not fail.
    with pytest.raises(RpcError) as e:
        await client.update_workflow(cart, "add", {"name": 5})
    assert e.value.reason == "UPDATE_REJECTED"
    assert "do not fit" in e.value.message
    # A rejection is an answer too: asked again, the same.
    with pytest.raises(RpcError) as e:
        await client.update_workflow(cart, "add", {"name": "air", "qty": 1}, update_id="u-air")
    assert e.value.reason == "UPDATE_REJECTED"

    assert await client.update_workflow(cart, "add", {"name": "tea", "qty": 1}) == {
        "lines": 1,
        "total": 1,
    }
    assert await client.result(cart, timeout=60) == {"lines": [["tea", 1]]}
    # The rejected updates ran nothing.
    assert added.count((cart, "air")) == 0
    assert [s.name for s in await client.steps(cart)].count("add-item") == 1


async def test_a_caller_learns_when_no_answer_comes(client: Client, workers: Workers) -> None:
    await workers.start(register(workers.new()))
    cart = uid("cart")
    await client.start("cart", {"items": 1}, workflow_id=cart, queue=workers.queue)

    # Nobody takes "remove": not answered within the (short) timeout, and the error names the
    # update to wait on again.
    with pytest.raises(RpcError) as e:
        await client.update_workflow(cart, "remove", {"name": "tea"}, update_id="u-1", timeout=0.3)
    assert (e.value.code, e.value.reason) == (
        grpc.StatusCode.DEADLINE_EXCEEDED,
        "UPDATE_PENDING",
    )
    assert e.value.metadata.get("update_id") == "u-1"

    # A caller still waiting when the workflow ends without answering is told so, whether it is
    # woken by the end or finds it ended (a cancelled workflow still takes the update's message,
    # so the order of the two does not matter).
    waiting = asyncio.create_task(
        client.update_workflow(cart, "remove", {"name": "tea"}, update_id="u-1", timeout=60)
    )
    try:
        await client.cancel(cart)
        with pytest.raises(RpcError) as e:
            await asyncio.wait_for(waiting, 60)
    finally:
        waiting.cancel()
    assert (e.value.code, e.value.reason) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "UPDATE_NOT_ANSWERED",
    )
    # The update was sent once, and never taken.
    [m] = await client.messages(cart)
    assert (m.topic, m.consumed) == ("waymark.update/remove", False)
    assert m.payload == {"update_id": "u-1", "args": {"name": "tea"}}


async def test_what_the_server_refuses_before_sending(client: Client) -> None:
    with pytest.raises(RpcError) as e:
        await client.update_workflow(uid("nobody"), "add", {"qty": 1})
    assert (e.value.code, e.value.reason) == (grpc.StatusCode.NOT_FOUND, "WORKFLOW_NOT_FOUND")
    with pytest.raises(RpcError) as e:
        await client.update_workflow(uid("nobody"), "add", {"qty": 1}, timeout=0)
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT


# Offline: the history of golden.update (contract/histories/update.json), changed, replayed
# against the golden workflow.
def golden_update() -> dict[str, Any]:
    history: dict[str, Any] = golden.read(golden.HISTORIES / "update.json")["history"]
    return history


async def test_no_update_in_time_is_none() -> None:
    history = golden_update()
    deadline, received = history["steps"][:2]
    # As the server records a receive that timed out.
    timed_out = {**history, "steps": [deadline, {**received, "output": None}]}
    replayer = Replayer(golden.register(Worker()))
    assert await replayer.replay(timed_out) == Returned({"update": None})


async def test_a_message_on_an_update_topic_that_is_not_an_update_is_passed_over() -> None:
    # Sent there by hand through a server that did not refuse it: it has no update id to
    # answer, so the workflow receives again and takes the update after it.
    history = golden_update()
    deadline, received = history["steps"][:2]
    not_an_update = [
        {**deadline},
        {**received, "output": {"message": {"n": 41}}},
    ]
    steps = [*not_an_update, *history["steps"]]
    steps = [{**s, "step_id": i} for i, s in enumerate(steps)]
    replayer = Replayer(golden.register(Worker()))
    got = await replayer.replay({**history, "steps": steps})
    assert got == Returned({"update": "golden-update-1", "total": 42})
    # And without the receive after it recorded, a live run would be receiving there.
    assert await replayer.replay({**history, "steps": steps[:2]}) == Suspended(2)
