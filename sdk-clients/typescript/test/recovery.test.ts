// Recovery onto another worker in this process: the replay returns recorded steps without
// running them (the time and UUIDs the workflow drew included), and a replay that calls another
// step is non-determinism.

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

/** Reads the time and draws a UUID, waits for a message, and returns what it read and drew. */
function clock(seen: Map<string, unknown[]>) {
  return (w: Worker) =>
    w.workflow("clock", async (ctx) => {
      const t = (await ctx.now()).getTime();
      const u = await ctx.uuid();
      seen.set(ctx.workflowId, [...(seen.get(ctx.workflowId) ?? []), { t, u }]);
      await ctx.recv("go");
      return { t, u, recoveries: ctx.recoveryAttempts };
    });
}

test("another worker replays the recorded time and UUID: the workflow reads the same both times", async () => {
  const seen = new Map<string, unknown[]>();
  const stopA = await worker(clock(seen));
  await client.start("clock", null, { workflowId: "clock-1" });
  // The now and uuid records went out with the recv's first request (its deadline).
  await waitFor(async () => (await client.steps("clock-1")).length >= 3, "the recv to be waiting");
  await stopA();
  const [first] = seen.get("clock-1")!;
  const { t, u } = first as { t: number; u: string };
  assert.deepEqual(
    (await client.steps("clock-1")).slice(0, 2).map((s) => [s.name, s.output]),
    [
      ["waymark.now", { now_ms: t }],
      ["waymark.uuid", { uuid: u }],
    ],
  );

  const stopB = await worker(clock(seen));
  // Stopped even when an assertion fails: a worker left running keeps the test process alive.
  try {
    await client.send("clock-1", "go", { topic: "go" });
    assert.deepEqual(await client.result("clock-1", { timeoutMs: 30_000 }), { t, u, recoveries: 1 });
    assert.deepEqual(seen.get("clock-1"), [first, first], "the replay read the time and UUID the first run drew");
  } finally {
    await stopB();
  }
});
