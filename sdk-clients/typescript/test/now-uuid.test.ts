// ctx.now() and ctx.uuid() run live (no server: a fake connection). The value is recorded as
// worker.proto's built-in step, held back like a step's result and sent with the next request or
// the completion (no round trip of its own); a run replaying those records returns the same
// values; a cancelled run draws nothing, as a step's function does not run.

import { test } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { StepSchema, type Step } from "../src/gen/waymark/v1/types_pb.js";
import type { RecordStep } from "../src/gen/waymark/v1/worker_pb.js";
import { CancelledError, type WorkflowContext } from "../src/index.js";
import { fromPayload, toPayload } from "../src/payload.js";
import { nowRecord } from "../src/worker/history.js";
import { Run } from "../src/worker/run.js";
import { deferred, dispatch, FakeConn, runOf, workerConfig } from "./fakes.js";

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** Reads the time and draws a UUID, twice each, and returns what it got. */
async function clockAndDice(ctx: WorkflowContext) {
  const t0 = await ctx.now();
  const [u0, u1] = await Promise.all([ctx.uuid(), ctx.uuid()]);
  const t1 = await ctx.now();
  return { t: [t0.getTime(), t1.getTime()], u: [u0, u1] };
}

/** A record as the next dispatch carries it: the history a replay reads. */
function asStep(r: RecordStep): Step {
  assert.equal(r.outcome.case, "output");
  return create(StepSchema, { stepId: r.stepId, name: r.name, output: r.outcome.value });
}

/** The completion the run sent; it must be its only request. */
function onlyCompletion(conn: FakeConn) {
  assert.deepEqual(conn.kinds(), ["completeWorkflow"], "now() and uuid() send nothing of their own");
  const done = conn.sent[0]!;
  assert.ok(done.case === "completeWorkflow");
  return done.value;
}

test("live now() and uuid() are held back, recorded in worker.proto's shapes, and replay the same", async () => {
  const before = Date.now();
  const conn = new FakeConn();
  await runOf(clockAndDice, conn).execute();
  const after = Date.now();
  const done = onlyCompletion(conn);
  assert.equal(done.outcome.case, "output");
  const out = fromPayload(done.outcome.value) as { t: number[]; u: string[] };

  assert.deepEqual(
    done.steps.map((s) => [s.stepId, s.name, s.outcome.case === "output" ? fromPayload(s.outcome.value) : s.outcome.case]),
    [
      [0, "waymark.now", { now_ms: out.t[0] }],
      [1, "waymark.uuid", { uuid: out.u[0] }],
      [2, "waymark.uuid", { uuid: out.u[1] }],
      [3, "waymark.now", { now_ms: out.t[1] }],
    ],
  );
  for (const t of out.t) assert.ok(Number.isInteger(t) && t >= before && t <= after, `${t} is this worker's clock`);
  for (const u of out.u) assert.match(u, UUID_V4);
  assert.notEqual(out.u[0], out.u[1]);

  // Replayed from those records, later: the same time and UUIDs, and no record of its own.
  const d = dispatch("wf");
  d.steps = done.steps.map(asStep);
  const replay = new FakeConn();
  await new Run(d, replay, workerConfig({ wf: clockAndDice })).execute();
  const again = onlyCompletion(replay);
  assert.deepEqual(again.steps, []);
  assert.ok(again.outcome.case === "output");
  assert.deepEqual(fromPayload(again.outcome.value), out);
});

test("a step after now() runs once the time's record is durable: it travels with the step's flush", async () => {
  const conn = new FakeConn();
  let sentBeforeStep: string[] = [];
  await runOf(async (ctx) => {
    await ctx.now();
    await ctx.step("s", () => (sentBeforeStep = conn.kinds()));
  }, conn).execute();
  assert.deepEqual(sentBeforeStep, ["recordStep:0"]);
  assert.deepEqual(conn.kinds(), ["recordStep:0", "completeWorkflow"]);
});

test("a cancelled run draws no time nor UUID, as a step's function does not run; a recorded one still replays", async () => {
  const cancelled = deferred<void>();
  const got: unknown[] = [];
  const d = dispatch("wf");
  d.steps = [create(StepSchema, { stepId: 0, name: "waymark.now", output: toPayload(nowRecord(42)) })];
  const conn = new FakeConn();
  const run = new Run(
    d,
    conn,
    workerConfig({
      wf: async (ctx) => {
        await cancelled.promise;
        got.push((await ctx.now()).getTime());
        for (const draw of [() => ctx.now(), () => ctx.uuid()]) got.push(await draw().catch((e: unknown) => e));
        throw got[2];
      },
    }),
  );
  const executed = run.execute();
  run.interrupt(new CancelledError());
  cancelled.resolve();
  await executed;
  assert.equal(got[0], 42);
  assert.ok(got[1] instanceof CancelledError && got[2] instanceof CancelledError, `got ${String(got)}`);
  // Stopped by the cancel: no completion, and nothing was drawn, so nothing is recorded.
  assert.deepEqual(conn.kinds(), []);
});
