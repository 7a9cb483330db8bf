// ctx.patched on the real server, with real workers: a workflow begun under old code (worker A)
// and finished under new code (worker B, which asks patched("demo-fix")) replays the old branch;
// one begun under the new code takes the new branch and records the marker at position 0.

import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import { Worker, silentLogger, type Client, type WorkflowContext } from "../src/index.js";
import { startServer, waitFor, type TestServer } from "./harness.js";

let server: TestServer;
let client: Client;
/** The step functions that ran, as "workflow id/step name". */
const ran: string[] = [];

/** The code before the change: step "old", then wait for "go". */
async function oldCode(ctx: WorkflowContext) {
  const branch = await ctx.step("old", () => (ran.push(`${ctx.workflowId}/old`), "old"));
  await ctx.recv("go");
  return { branch };
}

/** The code after the change: the new branch for runs that get here under it. */
async function newCode(ctx: WorkflowContext) {
  const branch = ctx.patched("demo-fix")
    ? await ctx.step("new", () => (ran.push(`${ctx.workflowId}/new`), "new"))
    : await ctx.step("old", () => (ran.push(`${ctx.workflowId}/old`), "old"));
  await ctx.recv("go");
  return { branch };
}

/** Runs a worker serving `patch-demo` with `code` until the returned function stops it. */
async function worker(code: (ctx: WorkflowContext) => Promise<unknown>): Promise<() => Promise<void>> {
  const w = new Worker({ server: server.address, logger: silentLogger, parkAfterMs: null }).workflow("patch-demo", code);
  const ac = new AbortController();
  const connected = new Promise((r) => w.once("connected", r));
  const running = w.run({ signal: ac.signal });
  await Promise.race([connected, running.then(() => Promise.reject(new Error("the worker stopped before it connected")))]);
  return async () => {
    ac.abort();
    await running;
  };
}

before(async () => {
  server = await startServer();
  client = server.client;
});
after(() => server?.stop());

test("a run begun under old code replays the old branch under new code; a new run takes the new branch and records the marker", async () => {
  const stopA = await worker(oldCode);
  let stopB: (() => Promise<void>) | undefined;
  // Each worker is stopped even when an assertion fails: one left running keeps the process alive.
  try {
    await client.start("patch-demo", null, { workflowId: "p1" });
    // Step "old" went out with the recv's first request (its deadline): p1 has recorded it and waits.
    await waitFor(async () => (await client.steps("p1")).length >= 2, "p1 to record step old and wait on go");
    await stopA();
    assert.deepEqual(ran, ["p1/old"]);

    stopB = await worker(newCode);
    await client.send("p1", "go", { topic: "go" });
    assert.deepEqual(await client.result("p1", { timeoutMs: 30_000 }), { branch: "old" }, "p1 began under the old code");
    const p1 = await client.history("p1");
    assert.equal(p1.steps[0]?.name, "old");
    assert.deepEqual(p1.steps.filter((s) => s.name === "waymark.patch"), [], "no marker in a run of the old code");
    assert.deepEqual(ran, ["p1/old"], "worker B replayed p1's step old, without running it");

    await client.start("patch-demo", null, { workflowId: "p2" });
    await client.send("p2", "go", { topic: "go" });
    assert.deepEqual(await client.result("p2", { timeoutMs: 30_000 }), { branch: "new" }, "p2 began under the new code");
    const p2 = await client.history("p2");
    assert.deepEqual(p2.steps[0], { step_id: 0, name: "waymark.patch", output: { patch_id: "demo-fix" } });
    assert.deepEqual(p2.steps[1], { step_id: 1, name: "new", output: "new" });
    assert.deepEqual(ran, ["p1/old", "p2/new"]);
  } finally {
    await stopA();
    await stopB?.();
  }
});
