"""Child workflows, remote steps by name, and waiting for the first or all of several."""

from __future__ import annotations

from conftest import Workers

from waymark import (
    ChildWorkflowFailed,
    Client,
    RetryPolicy,
    StepFailed,
    WorkflowContext,
)

# Children are started on the test's queue explicitly: the server puts a child started with no
# queue on "default" (not its parent's queue, as worker.proto says), which these workers do
# not serve.


# conformance: child_workflows
async def test_child_workflows(client: Client, workers: Workers) -> None:
    w, q = workers.new(), workers.queue

    @w.workflow("child")
    async def double(ctx: WorkflowContext, n: int) -> int:
        if n < 0:
            raise ValueError("negative")
        return n * 2

    @w.workflow("parent")
    async def parent(ctx: WorkflowContext) -> object:
        doubled = await ctx.child("child", 21, queue=q)
        bad = await ctx.start_child("child", -1, workflow_id=f"{ctx.workflow_id}-bad", queue=q)
        try:
            await ctx.await_child(bad)
        except ChildWorkflowFailed as e:
            return {"doubled": doubled, "kind": e.kind, "bad": bad}
        return None

    await workers.start(w)
    h = await client.start("parent", queue=workers.queue)
    result = await h.result(timeout=30)
    assert result == {"doubled": 42, "kind": "ChildFailed", "bad": f"{h.workflow_id}-bad"}
    child = await client.get(result["bad"])
    assert child.parent_workflow_id == h.workflow_id


async def test_remote_steps_by_name(client: Client, workers: Workers) -> None:
    w = workers.new()
    attempts = 0

    @w.step("resize")
    async def resize(image: dict[str, int]) -> dict[str, int]:
        return {"w": image["w"] // 2, "h": image["h"] // 2}

    @w.step("flaky_remote")
    def flaky_remote(_: object) -> str:
        nonlocal attempts
        attempts += 1
        if attempts < 2:
            raise RuntimeError("try again")
        return "done"

    @w.step("always_fails")
    def always_fails(_: object) -> None:
        raise RuntimeError("broken for good")

    @w.workflow("caller")
    async def caller(ctx: WorkflowContext) -> object:
        fast = RetryPolicy(max_attempts=3, initial_interval=0.05, max_interval=0.1)
        small = await ctx.call_step("resize", {"w": 100, "h": 50})
        flaky = await ctx.call_step("flaky_remote", retry=fast, timeout=10)
        try:
            await ctx.call_step("always_fails", retry=RetryPolicy(max_attempts=1))
        except StepFailed as e:
            failed = e.message
        return {"small": small, "flaky": flaky, "failed": failed}

    await workers.start(w)
    h = await client.start("caller", queue=workers.queue)
    assert await h.result(timeout=60) == {
        "small": {"w": 50, "h": 25},
        "flaky": "done",
        "failed": "broken for good",
    }
    steps = await client.steps(h.workflow_id)
    assert [s.name for s in steps] == ["resize", "flaky_remote", "always_fails"]
    assert steps[1].attempts == 2


async def test_wait_first_and_all(client: Client, workers: Workers) -> None:
    w, q = workers.new(), workers.queue

    @w.workflow("napper")
    async def napper(ctx: WorkflowContext, seconds: float) -> float:
        await ctx.sleep(seconds)
        return seconds

    @w.step("quick")
    def quick(x: int) -> int:
        return x + 1

    @w.workflow("racer")
    async def racer(ctx: WorkflowContext) -> object:
        slow = await ctx.start_child("napper", 5.0, queue=q)
        fast = await ctx.start_child("napper", 0.1, queue=q)
        first = await ctx.wait_first(slow, fast)
        step = await ctx.start_step("quick", 1)
        await ctx.wait_all(fast, step)
        return {
            "first": first,
            "step": await ctx.step_result(step),
            "fast": await ctx.await_child(fast),
        }

    await workers.start(w)
    h = await client.start("racer", queue=workers.queue)
    assert await h.result(timeout=30) == {"first": 1, "step": 2, "fast": 0.1}
