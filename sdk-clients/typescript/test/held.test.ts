// A run the worker loses without telling the server (its task died, a reply went missing) is
// not left PENDING on a healthy worker: the next heartbeat's held list no longer names it, and
// the server dispatches it again. Against a real server.

import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import type { Client } from "../src/index.js";
import { startServer, type TestServer } from "./harness.js";

let server: TestServer;
let client: Client;

before(async () => {
  server = await startServer();
  client = server.client;
});

after(async () => {
  await server.stop();
});

test("a run the worker lost silently is dispatched again and finishes", async () => {
  const epochs: number[] = [];
  const lost: boolean[] = [];
  let disconnects = 0;
  const w = await server.worker({ parkAfterMs: null }, (w) => {
    w.workflow("lost-once", async (ctx) => {
      epochs.push(ctx.epoch);
      const a = await ctx.step("a", () => 1);
      // Only on its first dispatch: the worker forgets the run and tells nobody. Its next
      // step throws (the run is dropped) and nothing is sent for it.
      if (ctx.epoch === 1) lost.push(w.loseRunSilently(ctx.workflowId));
      return a + (await ctx.step("b", () => 1));
    });
  });
  w.on("disconnected", () => (disconnects += 1));

  const { workflow } = await client.start("lost-once", null, { workflowId: "lost-once-1" });
  // The worker stays connected and heartbeating, so its lease never runs out: only the held
  // list can bring the workflow back. Generous: heartbeats come every 500 ms here.
  const done = await client.await(workflow.workflowId, { timeoutMs: 60_000 });

  assert.deepEqual(lost, [true], "the first run was lost on purpose, once");
  assert.equal(done.status, "SUCCESS");
  assert.equal(done.output, 2);
  assert.equal(epochs[0], 1);
  assert.ok(epochs.length >= 2 && epochs.at(-1)! > 1, `dispatched again: epochs ${epochs}`);
  assert.equal(done.recoveryAttempts, 1, "taking it back counts as a recovery");
  assert.equal(disconnects, 0, "not brought back by a reconnect");
});
