"""The quickstart's client: starts an order, approves it and prints the result. It exits
non-zero, saying why, when the workflow does not succeed."""

import asyncio
import sys
import uuid

from waymark import Client, WorkflowFailed


async def main() -> int:
    order = {"id": uuid.uuid4().hex[:8], "items": [{"sku": "tea", "price_cents": 450, "qty": 3}]}
    async with Client() as client:  # server: WAYMARK_SERVER or 127.0.0.1:7450
        # A workflow id names one workflow: starting it again returns the first one.
        handle = await client.start("checkout", order, workflow_id=f"order-{order['id']}")
        print("started", handle.workflow_id)
        print("status:", await handle.get_event("status", timeout=30))
        await handle.send({"ok": True}, topic="approval")
        try:
            print("result:", await handle.result(timeout=60))
        except WorkflowFailed as e:
            print(f"workflow {handle.workflow_id} ended {e.status}: {e}", file=sys.stderr)
            return 1
    return 0


sys.exit(asyncio.run(main()))
