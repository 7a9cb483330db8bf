// The quickstart's client: starts an order, approves it and prints the result. It exits
// non-zero, saying why, when the workflow does not succeed.
import { randomUUID } from "node:crypto";
import { Client, WorkflowFailedError } from "waymark-sdk";

const client = new Client(); // WAYMARK_SERVER or 127.0.0.1:7450
const order = { id: randomUUID().slice(0, 8), items: [{ sku: "tea", priceCents: 450, qty: 3 }] };
// A workflow id names one workflow: starting it again returns the first one.
const { workflow } = await client.start("checkout", order, { workflowId: `order-${order.id}` });
console.log("started", workflow.workflowId);
console.log("status:", await client.getEvent(workflow.workflowId, "status", { waitMs: 30_000 }));
await client.send(workflow.workflowId, { ok: true }, { topic: "approval" });
try {
  console.log("result:", await client.result(workflow.workflowId, { timeoutMs: 60_000 }));
} catch (e) {
  if (!(e instanceof WorkflowFailedError)) throw e;
  console.error(`workflow ${e.workflowId} ended ${e.status}: ${e.message}`);
  process.exitCode = 1;
}
