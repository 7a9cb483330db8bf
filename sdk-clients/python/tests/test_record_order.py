"""Step records are durable in call order, also for steps started together: nothing a workflow
does — a step's function, a request — begins before every record taken before it is
acknowledged, including a record another branch is flushing at that moment. Against a fake
server (tests/fake_server.py) that holds the acknowledgement back until the test releases it."""

from __future__ import annotations

import asyncio

from fake_server import FakeServer, accept

from waymark import WorkflowContext
from waymark._payload import from_payload
from waymark._proto import worker_pb2

# Enough loop turns for every task that can run to run: each branch needs a handful to reach
# its step function (gather's tasks, the flush task, the shield).
TURNS = 50


def holding_record(name: str, release: asyncio.Event):
    """An answer that acknowledges step `name`'s record only once `release` is set."""

    async def answer(m: worker_pb2.WorkerMessage) -> worker_pb2.Reply:
        if m.HasField("record_step") and m.record_step.name == name:
            await release.wait()
        return await accept(m)

    return answer


def record_sent(name: str):
    def sent(msgs: list[worker_pb2.WorkerMessage]) -> bool:
        return any(m.HasField("record_step") and m.record_step.name == name for m in msgs)

    return sent


async def turns(n: int = TURNS) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def test_steps_started_together_wait_for_the_record_before_them() -> None:
    release = asyncio.Event()
    fake = FakeServer(holding_record("a", release))
    ran: list[str] = []

    def effect(name: str) -> str:
        ran.append(name)
        return name

    @fake.workflow("fan_out")
    async def fan_out(ctx: WorkflowContext) -> list[str]:
        a: str = await ctx.step("a", effect, "a")
        c, d = await asyncio.gather(ctx.step("c", effect, "c"), ctx.step("d", effect, "d"))
        return [a, c, d]

    try:
        run = fake.dispatch("wf-order", "fan_out")
        # "c" sends a's record (held back until then); "d" finds that flush under way.
        await fake.seen(record_sent("a"))
        await turns()
        assert ran == ["a"], "a step ran before the record of the one before it was durable"
        assert not run.task.done()

        release.set()
        await fake.ended(run)
        assert sorted(ran) == ["a", "c", "d"]
        [done] = fake.of_kind("complete_workflow")
        assert from_payload(done.output) == ["a", "c", "d"]
        # c's and d's records ride on the completion.
        assert sorted(s.name for s in done.steps) == ["c", "d"]
    finally:
        release.set()
        await fake.stop()


async def test_a_request_started_together_with_a_step_waits_for_the_record_before_them() -> None:
    release = asyncio.Event()
    fake = FakeServer(holding_record("a", release))
    ran: list[str] = []

    @fake.workflow("step_and_event")
    async def step_and_event(ctx: WorkflowContext) -> str:
        await ctx.step("a", ran.append, "a")
        await asyncio.gather(ctx.step("c", ran.append, "c"), ctx.set_event("status", "a done"))
        return "ok"

    try:
        run = fake.dispatch("wf-order-request", "step_and_event")
        await fake.seen(record_sent("a"))
        await turns()
        assert ran == ["a"]
        assert fake.of_kind("set_event") == [], "a request went out before a's record was durable"

        release.set()
        await fake.ended(run)
        assert ran == ["a", "c"]
        assert [e.key for e in fake.of_kind("set_event")] == ["status"]
        [done] = fake.of_kind("complete_workflow")
        assert from_payload(done.output) == "ok"
    finally:
        release.set()
        await fake.stop()
