// Recovery onto another worker in this process: the replay returns recorded steps without
// running them, and a replay that calls another step is non-determinism.

import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import { Worker, silentLogger, type Client } from "../src/index.js";
import { startServer, waitFor, type TestServer } from "./harness.js";

let server: TestServer;
let client: Client;
const runs = new Map<string, number>();
const ran = (key: string) => runs.set(key, (runs.get(key) ?? 0) + 1);

function waiter(firstStep: string) {
  return (w: Worker) =>
    w.workflow("waiter", async (ctx) => {
      await ctx.step(firstStep, () => ran(`${ctx.workflowId}/${firstStep}`) && 1);
      const msg = await ctx.recv<string>("go");
      await ctx.step("after", () => ran(`${ctx.workflowId}/after`) && 2);
      return { msg, recoveries: ctx.recoveryAttempts };
    });
}

/** Runs a worker until the returned function stops it (its stream closes, as in a crash). */
async function worker(register: (w: Worker) => void): Promise<() => Promise<void>> {
  const w = new Worker({ server: server.address, logger: silentLogger, parkAfterMs: null });
  register(w);
  const ac = new AbortController();
  const connected = new Promise((r) => w.once("connected", r));
  const running = w.run({ signal: ac.signal });
  await connected;
  return async () => {
    ac.abort();
    await running;
  };
}

before(async () => {
  server = await startServer();
  client = server.client;
});
after(() => server.stop());

// conformance: durable_steps
test("another worker replays recorded steps and finishes the workflow", async () => {
  const stopA = await worker(waiter("before"));
  await client.start("waiter", null, { workflowId: "rec-1" });
  await waitFor(async () => (await client.steps("rec-1")).length >= 2, "the recv to be waiting");
  await stopA();
  const stopB = await worker(waiter("before"));
  await client.send("rec-1", "go on", { topic: "go" });
  const out = await client.result("rec-1", { timeoutMs: 30_000 });
  assert.deepEqual(out, { msg: "go on", recoveries: 1 });
  assert.equal(runs.get("rec-1/before"), 1);
  assert.equal(runs.get("rec-1/after"), 1);
  await stopB();
});

test("a replay calling another step than recorded fails with NonDeterminism", async () => {
  const stopA = await worker(waiter("before"));
  await client.start("waiter", null, { workflowId: "nd-1" });
  await waitFor(async () => (await client.steps("nd-1")).length >= 2, "the recv to be waiting");
  await stopA();
  const stopB = await worker(waiter("changed"));
  const done = await client.await("nd-1", { timeoutMs: 30_000 });
  assert.equal(done.status, "ERROR");
  assert.equal(done.failure?.kind, "NonDeterminism");
  assert.equal(runs.get("nd-1/changed"), undefined);
  await stopB();
});
