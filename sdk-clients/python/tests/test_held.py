"""Heartbeats say what the worker holds: the workflows dispatched on this stream whose runs have
not ended, and how many dispatches it took off the stream. Against a fake server
(tests/fake_server.py); test_lost_run.py shows the server acting on it."""

from __future__ import annotations

import asyncio

from fake_server import FakeServer

from waymark import WorkflowContext


async def test_a_dispatch_is_counted_and_listed_until_its_run_ends() -> None:
    fake = FakeServer()
    go = asyncio.Event()

    @fake.workflow("waits")
    async def waits(ctx: WorkflowContext) -> str:
        await go.wait()
        return "done"

    @fake.workflow("quick")
    async def quick(ctx: WorkflowContext) -> str:
        return "done"

    try:
        assert fake.session.heartbeat().reports_held
        waiting = fake.dispatch("wf-waits", "waits")
        # Counted and listed at once, before the run has done anything.
        beat = fake.session.heartbeat()
        assert (list(beat.held_workflow_ids), beat.dispatches_received) == (["wf-waits"], 1)

        quick_run = fake.dispatch("wf-quick", "quick")
        beat = fake.session.heartbeat()
        assert sorted(beat.held_workflow_ids) == ["wf-quick", "wf-waits"]
        await fake.ended(quick_run)
        # Its completion was answered: no longer held, still counted.
        beat = fake.session.heartbeat()
        assert (list(beat.held_workflow_ids), beat.dispatches_received) == (["wf-waits"], 2)

        go.set()
        await fake.ended(waiting)
        beat = fake.session.heartbeat()
        assert (list(beat.held_workflow_ids), beat.dispatches_received) == ([], 2)
        assert len(fake.of_kind("complete_workflow")) == 2
    finally:
        go.set()
        await fake.stop()


async def test_a_lost_run_leaves_the_list_without_a_word_to_the_server() -> None:
    fake = FakeServer()
    started = asyncio.Event()

    @fake.workflow("forever")
    async def forever(ctx: WorkflowContext) -> None:
        await ctx.step("first", lambda: 1)
        started.set()
        await asyncio.Event().wait()

    try:
        run = fake.dispatch("wf-lost", "forever")
        await asyncio.wait_for(started.wait(), 10)
        assert fake.session.lose("wf-lost")
        await fake.ended(run)
        beat = fake.session.heartbeat()
        assert (list(beat.held_workflow_ids), beat.dispatches_received) == ([], 1)
        # Nothing about the workflow went out: no completion, not even its held-back record.
        assert fake.of_kind("complete_workflow") == fake.of_kind("record_step") == []
        assert not fake.session.lose("wf-lost")
    finally:
        await fake.stop()
