// Values over the server's payload limit (no server: a fake connection with small limits). The
// SDK checks before sending: a workflow's output fails the workflow, a step's output fails the
// step (recorded, so a replay sees the same failure), and a value the workflow sends is refused
// with PayloadTooLargeError. Nothing oversized ever reaches the stream.

import { test } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { StepSchema } from "../src/gen/waymark/v1/types_pb.js";
import type { CompleteWorkflow } from "../src/gen/waymark/v1/worker_pb.js";
import { PayloadTooLargeError, StepFailedError, type WorkflowContext, type WorkflowFn } from "../src/index.js";
import { MAX_FAILURE_MESSAGE_BYTES, type Limits } from "../src/worker/limits.js";
import { Run } from "../src/worker/run.js";
import { dispatch, FakeConn, runOf, workerConfig } from "./fakes.js";

/** Small, so the tests move kilobytes; the message limit leaves room for one payload and more. */
const limits: Limits = { maxPayloadBytes: 1000, maxMessageBytes: 64 * 1024 };

/** Runs `fn` to its end on a fake with `limits`; returns the fake and the completion it sent. */
async function complete(fn: WorkflowFn, conn = new FakeConn(undefined, { ...limits })): Promise<{ conn: FakeConn; done: CompleteWorkflow }> {
  await runOf(fn, conn).execute();
  const last = conn.sent.at(-1);
  assert.ok(last?.case === "completeWorkflow", `the run completed: ${conn.kinds()}`);
  return { conn, done: last.value };
}

test("a workflow's output over the payload limit fails it with PAYLOAD_TOO_LARGE, counted in UTF-8 bytes", async () => {
  // "é" is two bytes: 499 of them and the quotes are exactly the limit, one more is over it
  // (and still under it counted in characters).
  const fits = await complete(async () => "é".repeat(499));
  assert.equal(fits.done.outcome.case, "output");

  const over = await complete(async () => "é".repeat(500));
  assert.ok(over.done.outcome.case === "failure", "no output is sent");
  assert.equal(over.done.outcome.value.kind, "PAYLOAD_TOO_LARGE");
  assert.match(over.done.outcome.value.message, /the workflow's output is 1002 bytes of JSON; the server takes at most 1000/);
});

test("a step's output over the limit fails the step, recorded, and a replay sees the same failure", async () => {
  let calls = 0;
  const seen: unknown[] = [];
  const fn = async (ctx: WorkflowContext) => {
    try {
      await ctx.step(
        "big",
        () => {
          calls += 1;
          return "x".repeat(2000);
        },
        // Not retried: the same function would make the same output again.
        { retry: { maxAttempts: 3, initialIntervalMs: 1 } },
      );
      return "unreachable";
    } catch (e) {
      assert.ok(e instanceof StepFailedError);
      seen.push({ kind: e.kind, stepKind: e.stepKind, message: e.message });
      return "caught";
    }
  };
  const { done } = await complete(fn);
  assert.equal(calls, 1);
  assert.equal(done.outcome.case, "output");
  assert.equal(done.steps.length, 1);
  const rec = done.steps[0]!;
  assert.ok(rec.outcome.case === "failure", "the record is the step's failure, not its output");
  assert.equal(rec.outcome.value.kind, "PAYLOAD_TOO_LARGE");
  assert.match(rec.outcome.value.message, /the output of step "big" is 2002 bytes of JSON/);

  // Replayed from that record: the function is not called and the workflow sees the same error.
  const history = create(StepSchema, { stepId: rec.stepId, name: rec.name, failure: rec.outcome.value });
  const replay = new Run({ ...dispatch("wf"), steps: [history] }, new FakeConn(undefined, { ...limits }), workerConfig({ wf: fn }));
  await replay.execute();
  assert.equal(calls, 1);
  assert.equal(seen.length, 2);
  assert.deepEqual(seen[1], seen[0]);
  assert.deepEqual(seen[0], {
    kind: "StepFailed",
    stepKind: "PAYLOAD_TOO_LARGE",
    message: `step "big" failed: ${rec.outcome.value.message}`,
  });
});

const big = "y".repeat(1500);
const refusals: [string, (ctx: WorkflowContext) => Promise<unknown>, RegExp][] = [
  ["a message", (ctx) => ctx.send("other", big), /the message to workflow "other" is 1502 bytes/],
  ["an event value", (ctx) => ctx.setEvent("k", big), /the value of event "k" is 1502 bytes/],
  ["a stream value", (ctx) => ctx.writeStream("s", big), /the value written to stream "s" is 1502 bytes/],
  ["a child's input", (ctx) => ctx.startChild("child", big), /the input of child workflow "child" is 1502 bytes/],
  ["a remote step's input", (ctx) => ctx.startStep("remote", big), /the input of remote step "remote" is 1502 bytes/],
];

for (const [what, call, message] of refusals) {
  test(`${what} over the limit is refused before anything is sent`, async () => {
    let caught: unknown;
    const { conn, done } = await complete(async (ctx) => {
      await ctx.step("before", () => 1);
      try {
        await call(ctx);
      } catch (e) {
        caught = e;
      }
      // Uncaught, the same error fails the workflow with its kind.
      await call(ctx);
    });
    assert.ok(caught instanceof PayloadTooLargeError, `refused: ${String(caught)}`);
    assert.equal(caught.reason, "PAYLOAD_TOO_LARGE");
    assert.equal(caught.kind, "PAYLOAD_TOO_LARGE");
    assert.match(caught.message, message);
    assert.deepEqual(conn.kinds(), ["completeWorkflow"], "nothing but the completion went out");
    assert.ok(done.outcome.case === "failure");
    assert.equal(done.outcome.value.kind, "PAYLOAD_TOO_LARGE");
  });
}

test("a payload within the JSON limit whose encoding would outgrow a message is refused too", async () => {
  // Each 0 in an array is two bytes of JSON and eleven encoded (a google.protobuf.Value holds
  // a number as eight bytes and is framed in its list): 30 000 bytes of JSON, 165 000 encoded.
  const wide: Limits = { maxPayloadBytes: 64 * 1024, maxMessageBytes: 128 * 1024 };
  const zeros = new Array<number>(15_000).fill(0);
  let caught: unknown;
  const { conn } = await complete(async (ctx) => {
    try {
      await ctx.setEvent("k", zeros);
    } catch (e) {
      caught = e;
    }
    // The same count as one string is far smaller encoded, and goes.
    await ctx.setEvent("k", "0".repeat(30_000));
    return "done";
  }, new FakeConn(undefined, wide));
  assert.ok(caught instanceof PayloadTooLargeError);
  assert.match(caught.message, /is 30001 bytes of JSON but \d+ bytes encoded; a worker message may carry at most/);
  assert.deepEqual(conn.kinds(), ["setEvent:1", "completeWorkflow"]);
});

test("a failure's message is bounded, and the step's error says what its record says", async () => {
  const huge = "z".repeat(3 * MAX_FAILURE_MESSAGE_BYTES);
  let seen = "";
  // Room for both bounded messages in the completion.
  const roomy = new FakeConn(undefined, { maxPayloadBytes: 1000, maxMessageBytes: 1024 * 1024 });
  const { done } = await complete(async (ctx) => {
    await ctx.step("noisy", () => Promise.reject(new Error(huge))).catch((e: StepFailedError) => (seen = e.stepMessage));
    throw new Error(huge);
  }, roomy);
  const rec = done.steps[0]!;
  assert.ok(rec.outcome.case === "failure");
  assert.equal(seen, rec.outcome.value.message);
  assert.ok(Buffer.byteLength(seen) <= MAX_FAILURE_MESSAGE_BYTES);
  assert.match(seen, /^z+ … \(cut: 196608 bytes in all\)$/);
  assert.ok(done.outcome.case === "failure");
  assert.equal(done.outcome.value.message, seen);
});
