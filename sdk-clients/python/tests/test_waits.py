"""Durable waits: sleep, messages, events, streams, and parking."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable

from conftest import Workers, eventually

from waymark import Client, WorkflowContext, WorkflowStatus


# conformance: sleep
async def test_sleep_waits_and_is_recorded(client: Client, workers: Workers) -> None:
    w = workers.new()

    @w.workflow("sleeper")
    async def sleeper(ctx: WorkflowContext) -> float:
        start = time.monotonic()
        await ctx.sleep(0.5)
        return time.monotonic() - start

    await workers.start(w)
    h = await client.start("sleeper", queue=workers.queue)
    assert await h.result(timeout=30) >= 0.45
    [step] = await client.steps(h.workflow_id)
    assert step.name == "waymark.sleep" and "wake_at_ms" in step.output


# conformance: recv_timeout
async def test_send_and_recv(client: Client, workers: Workers) -> None:
    w = workers.new()

    @w.workflow("inbox")
    async def inbox(ctx: WorkflowContext) -> list[object]:
        first = await ctx.recv("orders", timeout=30)
        second = await ctx.recv("orders", timeout=30)
        nothing = await ctx.recv("other", timeout=0.2)
        return [first, second, nothing]

    await workers.start(w)
    h = await client.start("inbox", queue=workers.queue)
    await h.send({"n": 1}, topic="orders", idempotency_key="k1")
    _, duplicate = await client.send(h.workflow_id, {"n": 1}, topic="orders", idempotency_key="k1")
    assert duplicate
    await h.send({"n": 2}, topic="orders")
    assert await h.result(timeout=30) == [{"n": 1}, {"n": 2}, None]
    messages = await client.messages(h.workflow_id)
    assert [m.payload for m in messages] == [{"n": 1}, {"n": 2}]
    assert all(m.consumed for m in messages)


async def test_workflow_to_workflow_messages(client: Client, workers: Workers) -> None:
    w = workers.new()

    @w.workflow("ping")
    async def ping(ctx: WorkflowContext, target: str) -> str:
        return await ctx.send(target, "hello", topic="greetings")

    @w.workflow("pong")
    async def pong(ctx: WorkflowContext) -> object:
        return await ctx.recv("greetings", timeout=30)

    await workers.start(w)
    receiver = await client.start("pong", queue=workers.queue)
    sender = await client.start("ping", receiver.workflow_id, queue=workers.queue)
    assert await sender.result(timeout=30)
    assert await receiver.result(timeout=30) == "hello"


# conformance: events
async def test_events(client: Client, workers: Workers) -> None:
    w = workers.new()

    @w.workflow("publisher")
    async def publisher(ctx: WorkflowContext) -> None:
        await ctx.set_event("status", "packing")
        await ctx.set_event("status", "shipped")

    @w.workflow("watcher")
    async def watcher(ctx: WorkflowContext, target: str) -> object:
        return [
            await ctx.get_event(target, "status", timeout=30),
            await ctx.get_event(target, "never", timeout=0.2),
        ]

    await workers.start(w)
    pub = await client.start("publisher", queue=workers.queue)
    await pub.result(timeout=30)
    assert await pub.get_event("status") == "shipped"
    assert await client.get_event(pub.workflow_id, "missing", default="none") == "none"
    [event] = await client.events(pub.workflow_id)
    assert [v.value for v in event.history] == ["packing", "shipped"]
    watch = await client.start("watcher", pub.workflow_id, queue=workers.queue)
    assert await watch.result(timeout=30) == ["shipped", None]


async def test_client_waits_for_an_event(client: Client, workers: Workers) -> None:
    w = workers.new()

    @w.workflow("late_event")
    async def late_event(ctx: WorkflowContext) -> None:
        await ctx.recv("go", timeout=30)
        await ctx.set_event("ready", {"ok": True})

    await workers.start(w)
    h = await client.start("late_event", queue=workers.queue)
    await h.send(None, topic="go")
    assert await h.get_event("ready", timeout=30) == {"ok": True}


# conformance: streams
async def test_stream_reads_as_async_iterator(client: Client, workers: Workers) -> None:
    w = workers.new()

    @w.workflow("streamer")
    async def streamer(ctx: WorkflowContext) -> int:
        for i in range(3):
            await ctx.write_stream("progress", {"pct": (i + 1) * 33})
            await ctx.sleep(0.05)
        await ctx.close_stream("progress")
        return 3

    await workers.start(w)
    h = await client.start("streamer", queue=workers.queue)
    got = [(e.offset, e.value) async for e in h.read_stream("progress")]
    assert got == [(0, {"pct": 33}), (1, {"pct": 66}), (2, {"pct": 99})]
    later = [e.value async for e in client.read_stream(h.workflow_id, "progress", from_offset=2)]
    assert later == [{"pct": 99}]
    assert await h.result(timeout=30) == 3


# conformance: durable_steps
async def test_long_waits_park_and_replay(client: Client, workers: Workers) -> None:
    w = workers.new(park_after=0.1)
    runs: list[str] = []

    @w.workflow("parker")
    async def parker(ctx: WorkflowContext) -> object:
        await ctx.step("before", runs.append, "before")
        await ctx.sleep(0.6)
        message = await ctx.recv("wake", timeout=60)
        return {"message": message, "epoch": ctx.epoch}

    await workers.start(w)
    h = await client.start("parker", queue=workers.queue)

    async def waiting_for_message() -> bool:
        # Steps first: once the recv's deadline is recorded, the sleep's park is over, so a
        # DELAYED read after that is the recv's park (read the other way round, a stale
        # DELAYED from the sleep could pass with the recv still waiting in memory).
        steps = await client.steps(h.workflow_id)
        wf = await h.get()
        return wf.status is WorkflowStatus.DELAYED and any(
            s.name == "waymark.recv.deadline" for s in steps
        )

    await eventually(waiting_for_message, what="the workflow parked on its recv")
    await h.send("go", topic="wake")
    result = await h.result(timeout=30)
    assert result["message"] == "go"
    assert result["epoch"] >= 3, "parked twice (sleep, recv), so dispatched at least three times"
    # The step before the waits ran once, though the workflow replayed after each park.
    assert runs == ["before"]


async def test_awaiting_a_child_and_a_remote_step_parks_and_their_results_wake_it(
    client: Client, workers: Workers
) -> None:
    # Parking is certain, not a matter of timing: the child waits for a message and the remote
    # step for a gate, and the test sends the one and opens the other only once it has seen the
    # workflow parked on it.
    w = workers.new(park_after=0)
    release = asyncio.Event()

    @w.step("gated")
    async def gated(n: int) -> int:
        await release.wait()
        return n + 1

    @w.workflow("held_child")
    async def held_child(ctx: WorkflowContext) -> object:
        return await ctx.recv("release")

    @w.workflow("patient")
    async def patient(ctx: WorkflowContext, child_id: str) -> list[object]:
        got = await ctx.child("held_child", workflow_id=child_id)
        return [got, await ctx.call_step("gated", 41)]

    await workers.start(w)
    child_id = f"held-{uuid.uuid4().hex[:12]}"
    h = await client.start("patient", child_id, queue=workers.queue)

    def parked_after(steps: int) -> Callable[[], Awaitable[bool]]:
        async def parked() -> bool:
            # Steps first: once `steps` are recorded the earlier wait is over, so a DELAYED read
            # after that is the park on the wait that follows them.
            recorded = await client.steps(h.workflow_id)
            wf = await h.get()
            return len(recorded) == steps and wf.status is WorkflowStatus.DELAYED

        return parked

    await eventually(parked_after(1), what="the workflow to park awaiting its child")
    # A wait with no deadline: no wake time (the worker asked for never).
    assert (await h.get()).wake_at is None
    await client.send(child_id, "hi", topic="release")
    await eventually(parked_after(2), what="the workflow to park on its remote step")
    release.set()
    assert await h.result(timeout=30) == ["hi", 42]
    wf = await h.get()
    assert wf.epoch >= 3, "parked twice (child, remote step), so dispatched at least three times"
