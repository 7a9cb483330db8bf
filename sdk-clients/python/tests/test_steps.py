"""Local steps: retries, failures, failure kinds, and step numbering under asyncio.gather."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from conftest import Workers

from waymark import Client, RetryPolicy, WorkflowContext, WorkflowFailed, WorkflowStatus


async def test_step_is_retried_per_policy(client: Client, workers: Workers) -> None:
    w = workers.new()
    attempts = 0

    def flaky() -> str:
        nonlocal attempts
        attempts += 1
        if attempts < 3:
            raise ConnectionError(f"attempt {attempts} failed")
        return "ok"

    @w.workflow("retrying")
    async def retrying(ctx: WorkflowContext) -> str:
        policy = RetryPolicy(max_attempts=5, initial_interval=0.01, max_interval=0.05)
        result: str = await ctx.step("flaky", flaky, retry=policy)
        return result

    await workers.start(w)
    h = await client.start("retrying", queue=workers.queue)
    assert await h.result(timeout=30) == "ok"
    [step] = await client.steps(h.workflow_id)
    assert (step.name, step.output, step.attempts) == ("flaky", "ok", 3)


async def test_a_step_carries_its_start(client: Client, workers: Workers) -> None:
    w = workers.new()

    async def slow() -> str:
        await asyncio.sleep(0.2)
        return "done"

    @w.workflow("timed")
    async def timed(ctx: WorkflowContext) -> str:
        ctx.uuid()  # a built-in record: the worker ran no function, so it says no duration
        result: str = await ctx.step("slow", slow)
        return result

    await workers.start(w)
    h = await client.start("timed", queue=workers.queue)
    assert await h.result(timeout=30) == "done"
    drawn, step = await client.steps(h.workflow_id)
    assert drawn.name == "waymark.uuid" and drawn.started_at is None
    # The server dates the start from the duration the worker measured: at least the sleep.
    assert step.name == "slow"
    assert step.started_at is not None and step.recorded_at is not None
    took = step.recorded_at - step.started_at
    assert timedelta(milliseconds=200) <= took < timedelta(seconds=60), took


async def test_step_failing_for_good_fails_the_workflow(client: Client, workers: Workers) -> None:
    w = workers.new()

    def broken() -> None:
        raise ValueError("no such account")

    @w.workflow("failing")
    async def failing(ctx: WorkflowContext) -> None:
        await ctx.step("broken", broken, retry=RetryPolicy(max_attempts=2, initial_interval=0.01))

    await workers.start(w)
    h = await client.start("failing", queue=workers.queue)
    with pytest.raises(WorkflowFailed) as e:
        await h.result(timeout=30)
    assert e.value.kind == "StepFailed"
    assert "no such account" in e.value.message
    [step] = await client.steps(h.workflow_id)
    assert step.failure is not None and step.attempts == 2


async def test_exception_class_is_the_failure_kind(client: Client, workers: Workers) -> None:
    w = workers.new()

    class OutOfStock(Exception):
        pass

    @w.workflow("kinds")
    async def kinds(ctx: WorkflowContext, which: str) -> None:
        if which == "custom":
            raise OutOfStock("sku 42")
        raise WorkflowFailed("PaymentDeclined", "card expired")

    await workers.start(w)
    a = await client.start("kinds", "custom", queue=workers.queue)
    b = await client.start("kinds", "explicit", queue=workers.queue)
    wa, wb = await a.wait(timeout=30), await b.wait(timeout=30)
    assert wa.status is WorkflowStatus.ERROR and wa.failure is not None
    assert (wa.failure.kind, wa.failure.message) == ("OutOfStock", "sku 42")
    # The kind it names, and its message alone (not "PaymentDeclined: card expired").
    assert wb.failure is not None
    assert (wb.failure.kind, wb.failure.message) == ("PaymentDeclined", "card expired")


async def test_steps_started_together_number_in_call_order(
    client: Client, workers: Workers
) -> None:
    w = workers.new()

    async def slow(name: str, delay: float) -> str:
        await asyncio.sleep(delay)
        return name

    @w.workflow("gathered")
    async def gathered(ctx: WorkflowContext) -> list[str]:
        return list(
            await asyncio.gather(
                ctx.step("first", slow, "a", 0.2),
                ctx.step("second", slow, "b", 0.0),
            )
        )

    await workers.start(w)
    h = await client.start("gathered", queue=workers.queue)
    assert await h.result(timeout=30) == ["a", "b"]
    steps = await client.steps(h.workflow_id)
    assert [(s.step_id, s.name) for s in steps] == [(0, "first"), (1, "second")]


async def test_a_different_step_on_replay_is_non_determinism(
    client: Client, workers: Workers
) -> None:
    w = workers.new(park_after=0.05)

    @w.workflow("fickle")
    async def fickle(ctx: WorkflowContext) -> None:
        # The first run records "a"; the replay after the park calls "b" at that position.
        await ctx.step("a" if ctx.epoch == 1 else "b", lambda: 1)
        await ctx.sleep(0.3)

    await workers.start(w)
    h = await client.start("fickle", queue=workers.queue)
    wf = await h.wait(timeout=30)
    assert wf.status is WorkflowStatus.ERROR and wf.failure is not None
    assert wf.failure.kind == "NonDeterminism"
