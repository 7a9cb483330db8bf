import { test, after } from "node:test";
import assert from "node:assert/strict";
import { startServer } from "./harness.js";

const server = await startServer();
after(() => server.stop());

test("a workflow with steps runs to completion", async () => {
  await server.worker({}, (w) =>
    w.workflow("greet", async (ctx, input: { name: string }) => {
      const a = await ctx.step("compose", () => `Hello, ${input.name}!`);
      const b = await ctx.step("shout", async () => a.toUpperCase());
      return { a, b };
    }),
  );
  const { workflow } = await server.client.start("greet", { name: "Ada" });
  const out = await server.client.result(workflow.workflowId, { timeoutMs: 20_000 });
  assert.deepEqual(out, { a: "Hello, Ada!", b: "HELLO, ADA!" });
  const steps = await server.client.steps(workflow.workflowId);
  assert.deepEqual(steps.map((s) => s.name), ["compose", "shout"]);
});
