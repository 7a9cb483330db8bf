// The quickstart's workflow and remote step, registered on a Worker that this module only
// builds: worker.ts runs it, and a replay test imports it without connecting anywhere.
import { Worker, WorkflowFailure } from "waymark-sdk";

export type Order = { id: string; items: { sku: string; priceCents: number; qty: number }[] };

export const worker = new Worker({ appName: "shop", appVersion: "1" }); // WAYMARK_SERVER or 127.0.0.1:7450

worker.workflow("checkout", async (ctx, order: Order) => {
  // Runs once; on replay the recorded result comes back without calling the function.
  const totalCents = await ctx.step(
    "total",
    async () => order.items.reduce((sum, item) => sum + item.priceCents * item.qty, 0),
    { retry: { maxAttempts: 3, initialIntervalMs: 200 } },
  );
  await ctx.setEvent("status", "awaiting approval");
  // Durable: a worker that dies here is replaced, and the wait keeps its original deadline.
  const approval = await ctx.recv<{ ok: boolean }>("approval", { timeoutMs: 3_600_000 });
  if (approval === undefined) throw new WorkflowFailure("Timeout", "nobody approved the order");
  if (!approval.ok) throw new WorkflowFailure("NotApproved", `order ${order.id} was turned down`);
  await ctx.sleep(1_000); // a durable timer
  const label = await ctx.callStep<string>("print-label", order); // run by any worker, any language
  return { order: order.id, totalCents, label };
});

// A remote step other workflows call by name.
worker.step("print-label", async (order: Order) => `LABEL-${order.id}`);
