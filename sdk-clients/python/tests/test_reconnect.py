"""A worker outlives its server: it keeps trying with backoff while the server is down and
carries on (recovering what it ran) when the server is back."""

from __future__ import annotations

import asyncio

from conftest import eventually
from server import Server

from waymark import Client, RpcError, UnavailableError, Worker, WorkflowContext


async def test_worker_reconnects_after_the_server_restarts() -> None:
    server = Server()  # not started yet: the worker's first attempts fail
    w = Worker(server=server.address, queues=["default"], app_version="reconnect", park_after=None)
    runs: list[str] = []

    @w.workflow("survivor")
    async def survivor(ctx: WorkflowContext) -> str:
        await ctx.step("before", runs.append, "before")
        message = await ctx.recv("go", timeout=120)
        await ctx.step("after", runs.append, "after")
        return str(message)

    task = asyncio.create_task(w.run())
    try:
        await asyncio.sleep(0.3)
        assert not task.done(), "the worker keeps retrying while the server is down"
        server.start()
        async with Client(server.address) as client:
            h = await eventually(lambda: _start(client), what="the worker to register")

            async def waiting() -> bool:
                return any(s.name == "waymark.recv.deadline" for s in await client.steps(h))

            await eventually(waiting, what="the workflow to wait for its message")

        server.kill()
        await asyncio.sleep(0.3)
        server.start()
        async with Client(server.address) as client:
            await client.send(h, "go", topic="go")
            assert await client.result(h, timeout=60) == "go"
        assert runs == ["before", "after"]
    finally:
        w.stop()
        await asyncio.wait_for(task, 10)
        server.stop()


async def _start(client: Client) -> str | None:
    try:
        return (await client.start("survivor", workflow_id="survivor-1")).workflow_id
    except (RpcError, UnavailableError):
        return None
