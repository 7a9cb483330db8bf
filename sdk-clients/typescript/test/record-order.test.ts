// Step records are durable in call order, also for operations started together (no server: a
// fake connection that holds the acknowledgement of the first record until the test lets go).
// With `a = await step(a); await Promise.all([step(c), step(d)])`, c's flush sends a's record;
// d finds nothing held any more, and must still wait until a's record is acknowledged.

import { test } from "node:test";
import assert from "node:assert/strict";
import type { WorkflowContext } from "../src/index.js";
import type { ReplyResult } from "../src/worker/conn.js";
import { deferred, drain, FakeConn, ordinary, recorded, runOf } from "./fakes.js";

/** A fake that holds the answer to a's record (step 0) until `release`. */
function holdingFirstRecord() {
  const seen = deferred<void>();
  const ack = deferred<ReplyResult>();
  const conn = new FakeConn((kind) => {
    if (kind.case === "recordStep" && kind.value.stepId === 0) {
      seen.resolve();
      return ack.promise;
    }
    return ordinary(kind);
  });
  return { conn, seen: seen.promise, release: () => ack.resolve(recorded) };
}

test("steps started together both wait for the record taken before them", async () => {
  const { conn, seen, release } = holdingFirstRecord();
  const ran: string[] = [];
  const run = runOf(async (ctx: WorkflowContext) => {
    const a = await ctx.step("a", () => 1);
    const [c, d] = await Promise.all([
      ctx.step("c", () => {
        ran.push("c");
        return a + 1;
      }),
      ctx.step("d", () => {
        ran.push("d");
        return a + 2;
      }),
    ]);
    return c + d;
  }, conn);
  const executed = run.execute();

  await seen;
  await drain(10);
  assert.deepEqual(ran, [], "neither c nor d may run while a's record is not acknowledged");
  assert.deepEqual(conn.kinds(), ["recordStep:0"]);

  release();
  await executed;
  assert.deepEqual(ran.sort(), ["c", "d"]);
  // c and d are still held back and travel with the completion: the batching is kept.
  assert.deepEqual(conn.kinds(), ["recordStep:0", "completeWorkflow"]);
  const done = conn.sent[1]!;
  assert.ok(done.case === "completeWorkflow");
  assert.deepEqual(
    done.value.steps.map((s) => s.name),
    ["c", "d"],
  );
  assert.equal(done.value.outcome.case, "output");
});

test("a request started beside a step waits for the record before them too", async () => {
  const { conn, seen, release } = holdingFirstRecord();
  const ran: string[] = [];
  const run = runOf(async (ctx: WorkflowContext) => {
    await ctx.step("a", () => 1);
    await Promise.all([ctx.step("c", () => ran.push("c")), ctx.setEvent("k", "v")]);
    return "ok";
  }, conn);
  const executed = run.execute();

  await seen;
  await drain(10);
  assert.deepEqual(ran, []);
  assert.deepEqual(conn.kinds(), ["recordStep:0"], "the event must not be sent before a's record is durable");

  release();
  await executed;
  assert.deepEqual(ran, ["c"]);
  assert.deepEqual(conn.kinds(), ["recordStep:0", "setEvent:2", "completeWorkflow"]);
});
