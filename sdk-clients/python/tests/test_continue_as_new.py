"""Continue-as-new without a server: `ctx.continue_as_new(input)` ends the run with a
`CompleteWorkflow` whose outcome is `continue_as_new {input}`, carrying the step records the run
held back as any completion does; it is no failure (not even for `except Exception` in the
workflow, nor for its span); the offline `Replayer` reports it as its own outcome. Against a
fake server (tests/fake_server.py); test_continue_as_new_live.py runs it on a real one."""

from __future__ import annotations

from typing import Any

import pytest
from fake_server import FakeServer
from opentelemetry.trace import StatusCode
from tracing_helpers import exporter, named, of_workflow

from waymark import ContinueAsNew, Worker, WorkflowContext, WorkflowStatus
from waymark._payload import from_payload, to_payload
from waymark._proto import types_pb2, worker_pb2
from waymark.replay import ContinuedAsNew, Failed, Replayer, Returned, Suspended
from waymark.types import Workflow


async def looper(ctx: WorkflowContext, input: dict[str, int]) -> int:
    """One run per `n`: a step "tick" returning `n`, then on with `n + 1` until `until`."""
    n = input["n"]
    tick: int = await ctx.step("tick", lambda: n)
    if tick >= input["until"]:
        return tick
    try:
        ctx.continue_as_new({"n": n + 1, "until": input["until"]})
    except Exception as e:  # it is not an Exception: this must not catch it
        raise AssertionError("continue_as_new was caught as an error") from e


def tick(step_id: int, n: int) -> types_pb2.Step:
    return types_pb2.Step(step_id=step_id, name="tick", output=to_payload(n))


async def test_the_completion_carries_the_next_input_and_the_held_step_records() -> None:
    exporter().clear()
    fake = FakeServer()
    fake.workflow("looper")(looper)
    try:
        await fake.ended(fake.dispatch("wf-can", "looper", {"n": 0, "until": 3}))
        [done] = fake.of_kind("complete_workflow")
        assert done.WhichOneof("outcome") == "continue_as_new"
        assert from_payload(done.continue_as_new.input) == {"n": 1, "until": 3}
        # The step's record was held back and rides on the completion, as on any other.
        assert [(s.step_id, s.name, from_payload(s.output)) for s in done.steps] == [(0, "tick", 0)]
        assert fake.of_kind("record_step") == []
    finally:
        await fake.stop()
    # Not a failure: the run's span ends UNSET.
    span = named(of_workflow("wf-can"), "workflow looper")
    assert span.status.status_code == StatusCode.UNSET


async def test_a_replayed_run_continues_as_new_again_without_records() -> None:
    fake = FakeServer()
    fake.workflow("looper")(looper)
    try:
        run = fake.dispatch("wf-again", "looper", {"n": 1, "until": 3}, steps=[tick(0, 1)])
        await fake.ended(run)
        [done] = fake.of_kind("complete_workflow")
        assert from_payload(done.continue_as_new.input) == {"n": 2, "until": 3}
        assert list(done.steps) == []
        # The last run returns instead.
        await fake.ended(fake.dispatch("wf-last", "looper", {"n": 3, "until": 3}))
        last = fake.of_kind("complete_workflow")[1]
        assert (last.WhichOneof("outcome"), from_payload(last.output)) == ("output", 3)
    finally:
        await fake.stop()


async def test_a_next_input_over_the_payload_limit_fails_the_workflow() -> None:
    fake = FakeServer(welcome=worker_pb2.Welcome(max_payload_bytes=1000))

    @fake.workflow("big")
    async def big(ctx: WorkflowContext) -> None:
        await ctx.step("tick", lambda: 0)
        ctx.continue_as_new("x" * 2000)

    try:
        await fake.ended(fake.dispatch("wf-big", "big"))
        [done] = fake.of_kind("complete_workflow")
        assert done.WhichOneof("outcome") == "failure"
        assert done.failure.kind == "PAYLOAD_TOO_LARGE"
        assert "the next run's input" in done.failure.message
        assert [s.name for s in done.steps] == ["tick"]
    finally:
        await fake.stop()


async def test_an_input_that_is_not_json_raises_where_it_is_called() -> None:
    fake = FakeServer()

    @fake.workflow("odd")
    async def odd(ctx: WorkflowContext) -> str:
        try:
            ctx.continue_as_new(object())
        except TypeError:
            return "caught"

    try:
        await fake.ended(fake.dispatch("wf-odd", "odd"))
        [done] = fake.of_kind("complete_workflow")
        assert from_payload(done.output) == "caught"
    finally:
        await fake.stop()


def replay_history(input: Any, *steps: tuple[str, Any]) -> dict[str, Any]:
    return {
        "workflow_id": "loop",
        "workflow_name": "looper",
        "input": input,
        "steps": [
            {"step_id": i, "name": name, "output": out} for i, (name, out) in enumerate(steps)
        ],
    }


async def test_a_run_that_continued_as_new_replays_to_the_same_next_input() -> None:
    worker = Worker()
    worker.workflow("looper")(looper)
    replayer = Replayer(worker)
    first = await replayer.replay(replay_history({"n": 0, "until": 2}, ("tick", 0)))
    assert first == ContinuedAsNew({"n": 1, "until": 2})
    last = await replayer.replay(replay_history({"n": 2, "until": 2}, ("tick", 2)))
    assert last == Returned(2)
    # Each run's history is its own: another step at its first position is non-determinism.
    other = await replayer.replay(replay_history({"n": 0, "until": 2}, ("tock", 0)))
    assert isinstance(other, Failed) and other.kind == "NonDeterminism", other
    # Before the tick is recorded, the replay stops there.
    assert await replayer.replay(replay_history({"n": 0, "until": 2})) == Suspended(0)


async def test_raising_continue_as_new_directly_is_the_same() -> None:
    async def direct(ctx: WorkflowContext, n: int) -> None:
        raise ContinueAsNew(n + 1)

    replayer = Replayer({"direct": direct})
    history = {"workflow_name": "direct", "input": 4, "steps": []}
    assert await replayer.replay(history) == ContinuedAsNew(5)


@pytest.mark.parametrize("status", list(WorkflowStatus))
def test_continued_as_new_is_a_terminal_status(status: WorkflowStatus) -> None:
    ended = {"SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED", "CONTINUED_AS_NEW"}
    assert status.is_terminal == (status.name in ended)
    assert WorkflowStatus(types_pb2.WORKFLOW_STATUS_CONTINUED_AS_NEW).name == "CONTINUED_AS_NEW"


def test_an_ended_run_names_its_number_and_the_workflow_that_went_on() -> None:
    w = Workflow.from_proto(
        types_pb2.Workflow(
            workflow_id="loop/run-1",
            status=types_pb2.WORKFLOW_STATUS_CONTINUED_AS_NEW,
            run=1,
            continued_as_workflow_id="loop",
        )
    )
    assert (w.status, w.run, w.continued_as_workflow_id) == (
        WorkflowStatus.CONTINUED_AS_NEW,
        1,
        "loop",
    )
    fresh = Workflow.from_proto(types_pb2.Workflow(workflow_id="w"))
    assert (fresh.run, fresh.continued_as_workflow_id) == (0, "")
