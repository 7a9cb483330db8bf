// conformance: queue_limits — a queue's concurrency limit of 1 holds on a TypeScript worker
// that has credits for ten.

import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import type { Client } from "../src/index.js";
import { startServer, type TestServer } from "./harness.js";

let server: TestServer;
let client: Client;
const state = { running: 0, most: 0 };

before(async () => {
  server = await startServer();
  client = server.client;
  await server.worker({ queues: ["one-at-a-time"], maxConcurrentWorkflows: 10 }, (w) => {
    w.workflow("one_at_a_time", async () => {
      state.running += 1;
      state.most = Math.max(state.most, state.running);
      try {
        await new Promise((resolve) => setTimeout(resolve, 50)); // holds its slot
      } finally {
        state.running -= 1;
      }
      return 1;
    });
  });
});
after(() => server.stop());

test("a queue's worker concurrency of 1 holds on this worker", async () => {
  await client.queues.update("one-at-a-time", { workerConcurrency: 1 });
  const ids: string[] = [];
  for (let i = 0; i < 6; i++) {
    const { workflow } = await client.start("one_at_a_time", null, { queue: "one-at-a-time" });
    ids.push(workflow.workflowId);
  }
  for (const id of ids) assert.equal(await client.result<number>(id), 1);
  assert.equal(state.most, 1, `${state.most} ran at once on a queue limited to one per worker`);
});
