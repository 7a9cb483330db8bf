"""UNAVAILABLE and a broken stream are never a workflow's failure: the request is sent again
with backoff, and past the worker's patience (or when the stream breaks under it) the run is
dropped — it ends without a completion or a failure, and nothing more is sent for it, whatever
its code catches. Against a fake server (tests/fake_server.py): no server process."""

from __future__ import annotations

import asyncio

from fake_server import FakeServer, accept, unavailable

from waymark import WorkflowContext
from waymark._payload import from_payload
from waymark._proto import worker_pb2


def refusing_records(times: int | None):
    """An answer that refuses the first `times` step records as UNAVAILABLE (all when None)."""
    left = times

    async def answer(m: worker_pb2.WorkerMessage) -> worker_pb2.Reply:
        nonlocal left
        if m.HasField("record_step") and (left is None or left > 0):
            if left is not None:
                left -= 1
            return unavailable()
        return await accept(m)

    return answer


def after_last_record(fake: FakeServer) -> list[str]:
    """The kinds of what the session sent after its last step record."""
    kinds = [m.WhichOneof("kind") for m in fake.sent]
    last = max(i for i, k in enumerate(kinds) if k == "record_step")
    return kinds[last + 1 :]


async def test_a_record_answered_unavailable_twice_is_resent_and_the_workflow_completes() -> None:
    fake = FakeServer(refusing_records(2))
    ran: list[str] = []

    @fake.workflow("two_steps")
    async def two_steps(ctx: WorkflowContext) -> int:
        one: int = await ctx.step("one", lambda: ran.append("one") or 1)
        two: int = await ctx.step("two", lambda: ran.append("two") or 2)
        return one + two

    try:
        run = fake.dispatch("wf-retry", "two_steps")
        await fake.ended(run)
        # Step "one"'s record went three times (two refused); "two" ran once it was durable.
        assert [r.step_id for r in fake.of_kind("record_step")] == [0, 0, 0]
        assert ran == ["one", "two"]
        [done] = fake.of_kind("complete_workflow")
        assert not done.HasField("failure")
        assert from_payload(done.output) == 3
        assert [s.name for s in done.steps] == ["two"]
        assert not run.dropped
        assert fake.of_kind("credit")[-1].workflows == 1
    finally:
        await fake.stop()


async def test_unavailable_past_patience_drops_the_run_and_sends_nothing_more() -> None:
    fake = FakeServer(refusing_records(None), patience=0.3)
    ran: list[str] = []

    @fake.workflow("two_steps")
    async def two_steps(ctx: WorkflowContext) -> str:
        await ctx.step("one", ran.append, "one")
        await ctx.step("two", ran.append, "two")
        return "finished"

    try:
        run = fake.dispatch("wf-dropped", "two_steps")
        await fake.ended(run)
        assert run.dropped
        # "two" never ran: "one" was never durable.
        assert ran == ["one"]
        assert len(fake.of_kind("record_step")) >= 2, "the record was resent before giving up"
        # Dropped: no completion, no failure; only its credit came back.
        assert fake.of_kind("complete_workflow") == []
        assert after_last_record(fake) == ["credit"]
        assert fake.of_kind("credit")[-1].workflows == 1
        # It left the worker's memory: heartbeats no longer list it, though they count it.
        beat = fake.session.heartbeat()
        assert (list(beat.held_workflow_ids), beat.dispatches_received) == ([], 1)
    finally:
        await fake.stop()


async def test_a_dropped_run_cannot_complete_even_when_its_code_catches_everything() -> None:
    fake = FakeServer(refusing_records(None), patience=0.2)
    caught: list[str] = []
    ran: list[str] = []

    @fake.workflow("stubborn")
    async def stubborn(ctx: WorkflowContext) -> str:
        await ctx.step("one", ran.append, "one")
        try:
            await ctx.step("two", ran.append, "two")
        except Exception:
            caught.append("Exception")  # not reached: Dropped is a BaseException
        except BaseException as e:
            caught.append(type(e).__name__)
        # Going on anyway: every later operation raises again, even one the history answers.
        for attempt in (lambda: ctx.step("three", ran.append, "three"), lambda: ctx.sleep(0)):
            try:
                await attempt()
            except BaseException as e:
                caught.append(type(e).__name__)
        return "finished anyway"

    try:
        run = fake.dispatch("wf-stubborn", "stubborn")
        await fake.ended(run)
        assert caught == ["Dropped", "Dropped", "Dropped"]
        assert ran == ["one"]
        assert fake.of_kind("complete_workflow") == []
        assert after_last_record(fake) == ["credit"]
    finally:
        await fake.stop()


async def test_code_catching_exception_around_a_step_does_not_stop_the_drop() -> None:
    fake = FakeServer(refusing_records(None), patience=0.2)
    caught: list[str] = []

    @fake.workflow("careless")
    async def careless(ctx: WorkflowContext) -> str:
        await ctx.step("one", lambda: 1)
        try:
            await ctx.step("two", lambda: 2)
        except Exception as e:  # the usual catch-all: it does not see the drop
            caught.append(repr(e))
            return "recovered"
        return "finished"

    try:
        run = fake.dispatch("wf-careless", "careless")
        await fake.ended(run)
        assert run.dropped and caught == []
        assert fake.of_kind("complete_workflow") == []
    finally:
        await fake.stop()


async def test_a_broken_stream_drops_runs_waiting_for_an_answer_without_a_failure() -> None:
    never = asyncio.Event()

    async def silent_on_records(m: worker_pb2.WorkerMessage) -> worker_pb2.Reply:
        if m.HasField("record_step"):
            await never.wait()  # the answer never comes: the stream breaks first
        return await accept(m)

    fake = FakeServer(silent_on_records)
    seen: list[str] = []

    @fake.workflow("cut_off")
    async def cut_off(ctx: WorkflowContext) -> str:
        await ctx.step("one", lambda: 1)
        try:
            await ctx.step("two", lambda: 2)
        except BaseException as e:
            seen.append(type(e).__name__)
        return "finished anyway"

    try:
        run = fake.dispatch("wf-cut-off", "cut_off")
        await fake.seen(lambda sent: any(m.HasField("record_step") for m in sent))
        # What the stream's end does first: requests still waiting fail, nothing more goes.
        fake.session.conn.close()
        await fake.ended(run)
        assert seen == ["Disconnected"]
        assert run.dropped
        assert fake.of_kind("complete_workflow") == []
    finally:
        await fake.stop()
