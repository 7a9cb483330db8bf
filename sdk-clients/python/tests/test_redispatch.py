"""A workflow dispatched again to the worker that is still running it: the server took it back
(its lease looked expired, say while its database restarted) and handed it out again, to this
worker, under a higher epoch. The new run replaces the old one, which sends nothing more; every
dispatch's credit comes back exactly once, so re-dispatches do not shrink the worker's room.
Against a fake server (tests/fake_server.py): no server process."""

from __future__ import annotations

import asyncio

from fake_server import FakeServer, accept, unavailable

from waymark import WorkflowContext
from waymark._payload import from_payload
from waymark._proto import worker_pb2


def workflow_credits(fake: FakeServer) -> int:
    """The workflow credits granted back so far: all but the first grant (the welcome's)."""
    first, *back = fake.of_kind("credit")
    assert first.workflows == fake.config.max_concurrent_workflows
    return sum(c.workflows for c in back)


def epochs_after(fake: FakeServer, mark: int) -> list[int]:
    """The epochs of the writes the session sent after its first `mark` messages."""
    epochs = []
    for m in fake.sent[mark:]:
        inner = getattr(m, m.WhichOneof("kind"))
        if "epoch" in inner.DESCRIPTOR.fields_by_name:
            epochs.append(inner.epoch)
    return epochs


async def test_a_replaced_run_returns_its_credit_once_and_sends_nothing_more() -> None:
    fake = FakeServer()
    # One gate per run, by the order the runs reach the blocking step.
    gates = [asyncio.Event(), asyncio.Event()]
    reached = [asyncio.Event(), asyncio.Event()]

    async def blocks() -> int:
        i = sum(e.is_set() for e in reached)
        reached[i].set()
        # The first run's step outlives its cancellation (as a step stuck in code that ignores
        # it would): the old run ends only after the new one was dispatched.
        while not gates[i].is_set():
            try:
                await gates[i].wait()
            except asyncio.CancelledError:
                continue
        return i

    @fake.workflow("redispatched")
    async def redispatched(ctx: WorkflowContext) -> int:
        await ctx.step("first", lambda: 1)
        return await ctx.step("blocks", blocks)

    try:
        old = fake.dispatch("wf-again", "redispatched", epoch=1)
        await asyncio.wait_for(reached[0].wait(), 10)
        # The first run got as far as its blocking step: its first record went out at epoch 1.
        assert [(r.step_id, r.epoch) for r in fake.of_kind("record_step")] == [(0, 1)]
        mark = len(fake.sent)

        new = fake.dispatch("wf-again", "redispatched", epoch=2)
        assert new is not old and old.dropped
        await asyncio.wait_for(reached[1].wait(), 10)
        # The replaced run's credit came back at once.
        await fake.seen(lambda _: workflow_credits(fake) == 1)

        # The old run's step returns now; the run ends without sending anything, and leaves
        # the new run where it is.
        gates[0].set()
        await fake.ended(old)
        assert fake.session.running.get("wf-again") is new
        beat = fake.session.heartbeat()
        assert (list(beat.held_workflow_ids), beat.dispatches_received) == (["wf-again"], 2)
        assert workflow_credits(fake) == 1

        gates[1].set()
        await fake.ended(new)
        await fake.seen(lambda _: workflow_credits(fake) == 2)
        [done] = fake.of_kind("complete_workflow")
        assert (done.epoch, from_payload(done.output)) == (2, 1)
        assert "wf-again" not in fake.session.running
        # One credit back per dispatch: no more arrives.
        await asyncio.sleep(0.1)
        assert workflow_credits(fake) == 2
        # Every write after the replacement was the new run's.
        assert set(epochs_after(fake, mark)) == {2}
    finally:
        for g in gates:
            g.set()
        await fake.stop()


async def test_a_replaced_run_does_not_resend_a_record_the_server_answered_unavailable() -> None:
    # The server answers the epoch-1 run's records UNAVAILABLE (its database is down); it
    # takes the workflow back and dispatches it again at epoch 2.
    async def answer(m: worker_pb2.WorkerMessage) -> worker_pb2.Reply:
        if m.HasField("record_step") and m.record_step.epoch == 1:
            return unavailable()
        return await accept(m)

    fake = FakeServer(answer)

    @fake.workflow("steps")
    async def steps(ctx: WorkflowContext) -> int:
        one: int = await ctx.step("one", lambda: 1)
        two: int = await ctx.step("two", lambda: 2)
        return one + two

    try:
        old = fake.dispatch("wf-resent", "steps", epoch=1)
        # The first record was refused and sent again at least once.
        await fake.seen(lambda _: len(fake.of_kind("record_step")) >= 2)
        mark = len(fake.sent)
        new = fake.dispatch("wf-resent", "steps", epoch=2)
        await fake.ended(new)
        await fake.ended(old)
        [done] = fake.of_kind("complete_workflow")
        assert done.epoch == 2
        # Longer than the resends' backoff so far: the old run would have sent again by now.
        await asyncio.sleep(1.0)
        assert set(epochs_after(fake, mark)) == {2}
        assert workflow_credits(fake) == 2
    finally:
        await fake.stop()
