"""The quickstart's worker: serves the workflow `checkout` and the remote step `print_label`."""

import asyncio
import logging

from waymark import RetryPolicy, Worker, WorkflowContext, WorkflowFailed

worker = Worker(app_name="shop", app_version="1")  # server: WAYMARK_SERVER or 127.0.0.1:7450


def order_total(order: dict) -> int:
    return sum(item["price_cents"] * item["qty"] for item in order["items"])


@worker.workflow("checkout")
async def checkout(ctx: WorkflowContext, order: dict) -> dict:
    # Runs once; a replay after a crash returns the recorded result instead.
    total = await ctx.step("total", order_total, order, retry=RetryPolicy(max_attempts=3))
    await ctx.set_event("status", "awaiting approval")
    approval = await ctx.recv("approval", timeout=3600)  # durable: survives restarts
    if approval is None:
        raise TimeoutError("nobody approved the order")  # fails it, kind "TimeoutError"
    if not approval["ok"]:
        raise WorkflowFailed("NotApproved", f"order {order['id']} was turned down")
    await ctx.sleep(1)  # a durable timer
    label = await ctx.call_step("print_label", order)  # run by any worker, any language
    return {"order": order["id"], "total_cents": total, "label": label}


@worker.step("print_label")  # a remote step other workflows can call by name
async def print_label(order: dict) -> str:
    return f"LABEL-{order['id']}"


if __name__ == "__main__":  # importing this module (as a replay test does) starts nothing
    logging.basicConfig(level=logging.INFO)
    asyncio.run(worker.run())  # serves until stopped; reconnects on its own
