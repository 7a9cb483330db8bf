"""A first end-to-end: a workflow with steps runs on a worker and the client reads it."""

from __future__ import annotations

from conftest import Workers

from waymark import Client, WorkflowContext, WorkflowStatus


async def test_workflow_with_steps_succeeds(client: Client, workers: Workers) -> None:
    w = workers.new()
    calls: list[str] = []

    def add(a: int, b: int) -> int:
        calls.append("add")
        return a + b

    async def shout(s: str) -> str:
        calls.append("shout")
        return s.upper()

    @w.workflow("basics")
    async def basics(ctx: WorkflowContext, inp: dict[str, object]) -> dict[str, object]:
        total = await ctx.step("add", add, 2, 3)
        loud = await ctx.step("shout", shout, str(inp["name"]))
        return {"total": total, "loud": loud, "id": ctx.workflow_id}

    await workers.start(w)
    h = await client.start("basics", {"name": "ada"}, queue=workers.queue, workflow_id="basics-1")
    assert h.created
    assert await h.result(timeout=30) == {"total": 5, "loud": "ADA", "id": "basics-1"}
    wf = await client.get("basics-1")
    assert wf.status is WorkflowStatus.SUCCESS
    assert [(s.step_id, s.name, s.output) for s in await client.steps("basics-1")] == [
        (0, "add", 5),
        (1, "shout", "ADA"),
    ]
    assert calls == ["add", "shout"]
