// Large values against a real server, at the sizes its Welcome gives by default (4 MiB
// payloads, 9 MiB messages). A run whose values are all under the payload limit finishes on its
// first dispatch without the stream ever breaking, even when its completion and the records it
// holds add up to more than one message; a workflow whose output is over the limit fails with
// PAYLOAD_TOO_LARGE instead of being dispatched again and again.

import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import { toBinary } from "@bufbuild/protobuf";
import type { Interceptor } from "@connectrpc/connect";
import { WorkerMessageSchema, type WorkerMessage } from "../src/gen/waymark/v1/worker_pb.js";
import type { Client } from "../src/index.js";
import { createTransport } from "../src/transport.js";
import { startServer, type TestServer } from "./harness.js";

const MiB = 1024 * 1024;
let server: TestServer;
let client: Client;
let connects = 0;
let disconnects = 0;
/** The size of every message the worker sent, encoded. */
const sent: number[] = [];
/** The 9 MiB the server's Welcome gives by default. */
const MAX_MESSAGE_BYTES = 9 * MiB;

/** Measures each message the worker puts on its stream, on the way out. */
const measure: Interceptor = (next) => async (req) => {
  if (!req.stream) return next(req);
  const source = req.message as AsyncIterable<WorkerMessage>;
  async function* measured() {
    for await (const m of source) {
      sent.push(toBinary(WorkerMessageSchema, m).length);
      yield m;
    }
  }
  return next({ ...req, message: measured() });
};

/** What the large workflow saw of its own dispatches: their recovery attempts, in order. */
const largeRuns: number[] = [];

before(async () => {
  server = await startServer();
  client = server.client;
  const w = await server.worker({ parkAfterMs: null, transport: createTransport({ server: server.address, interceptors: [measure] }) }, (w) => {
    w.workflow("large", async (ctx, input: string) => {
      largeRuns.push(ctx.recoveryAttempts);
      // Run together, so both records are still held when the workflow returns: with the
      // output that is over 9 MiB, more than the completion may carry.
      const [a, b] = await Promise.all([ctx.step("a", () => "a".repeat(3 * MiB)), ctx.step("b", () => "b".repeat(3 * MiB))]);
      return `${input.length}/${a.length}/${b.length}/`.padEnd(3 * MiB, "c");
    });
    // Reads the large workflow's outcome over the worker stream. The client cannot read it
    // back: the server's workflow API answers with at most its payload limit plus 1 MiB, and
    // this workflow holds 6 MiB (its input and its output).
    w.workflow("watch", async (ctx, id: string) => {
      const out = await ctx.awaitChild<string>(id);
      return { length: out.length, head: out.slice(0, 27) };
    });
    w.workflow("too-large", async () => "x".repeat(5 * MiB));
    w.on("connected", () => (connects += 1));
  });
  w.on("disconnected", () => (disconnects += 1));
});

after(async () => {
  await server.stop();
});

test("3 MiB in, two steps of 3 MiB, 3 MiB out: SUCCESS on the first dispatch, the stream never broken", async () => {
  await client.start("large", "i".repeat(3 * MiB), { workflowId: "large-1" });
  const { workflow } = await client.start("watch", "large-1");
  // awaitChild returns only when the awaited workflow ended SUCCESS (else it throws).
  const seen = await client.result(workflow.workflowId, { timeoutMs: 60_000 });
  assert.deepEqual(seen, { length: 3 * MiB, head: `${3 * MiB}/${3 * MiB}/${3 * MiB}/ccc` });
  assert.deepEqual(largeRuns, [0], "dispatched once, with no recovery");
  // Its two records and its output together are over the limit: the records went on their own.
  const largest = Math.max(...sent);
  assert.ok(largest > 3 * MiB && largest <= MAX_MESSAGE_BYTES, `the largest message sent was ${largest} bytes`);
  assert.deepEqual([connects, disconnects], [1, 0], "the worker connected once and never again");
});

test("a 5 MiB output ends the workflow ERROR with PAYLOAD_TOO_LARGE", async () => {
  const { workflow } = await client.start("too-large", null, { workflowId: "too-large-1" });
  const done = await client.await(workflow.workflowId, { timeoutMs: 60_000 });
  assert.equal(done.status, "ERROR");
  assert.equal(done.failure?.kind, "PAYLOAD_TOO_LARGE");
  assert.match(done.failure?.message ?? "", /5242882 bytes of JSON; the server takes at most 4194304/);
  assert.equal(done.recoveryAttempts, 0);
  assert.deepEqual([connects, disconnects], [1, 0], "the worker connected once and never again");
});
