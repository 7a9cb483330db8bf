// ctx.patched(id) without a server (a fake connection, and the offline Replayer): live, the marker
// waymark.patch {"patch_id": id} is recorded at the next position, held back like a step's result
// and sent with the next request or the completion (no round trip of its own); over its own
// marker it answers true and records nothing; over a history made by code without the change it
// answers false and takes no position, so the old branch's step replays where it was recorded.

import { test } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { FailureSchema, StepSchema, type Step } from "../src/gen/waymark/v1/types_pb.js";
import type { CompleteWorkflow, RecordStep } from "../src/gen/waymark/v1/worker_pb.js";
import { CancelledError, HistoryEndedError, Replayer, type WorkflowContext, type WorkflowFn } from "../src/index.js";
import { fromPayload, toPayload } from "../src/payload.js";
import { Run } from "../src/worker/run.js";
import { deferred, dispatch, FakeConn, workerConfig } from "./fakes.js";

/** Step functions that ran, by name: a replayed step must not appear. */
let ran: string[] = [];

/** New code: the change "cents" charges in cents; code without it charged in dollars. */
async function checkout(ctx: WorkflowContext): Promise<unknown> {
  const cents = ctx.patched("cents");
  const charged = cents
    ? await ctx.step("charge-cents", () => (ran.push("charge-cents"), 100))
    : await ctx.step("charge", () => (ran.push("charge"), 1));
  return { cents, charged };
}

function step(stepId: number, name: string, output: unknown): Step {
  return create(StepSchema, { stepId, name, output: toPayload(output) });
}

const marker = (stepId: number, patchId: string) => step(stepId, "waymark.patch", { patch_id: patchId });

/** Runs `fn` as a dispatch over `history` on a fake connection; returns what it sent. */
async function run(fn: WorkflowFn, history: Step[] = [], conn = new FakeConn()): Promise<FakeConn> {
  ran = [];
  const d = dispatch("wf");
  d.steps = history;
  await new Run(d, conn, workerConfig({ wf: fn })).execute();
  return conn;
}

/** The completion the run sent, which must be its only request. */
function onlyCompletion(conn: FakeConn) {
  assert.deepEqual(conn.kinds(), ["completeWorkflow"], "patched sends nothing of its own");
  const done = conn.sent[0]!;
  assert.ok(done.case === "completeWorkflow");
  return done.value;
}

const recordsOf = (records: readonly RecordStep[]) =>
  records.map((r) => [r.stepId, r.name, r.outcome.case === "output" ? fromPayload(r.outcome.value) : r.outcome.case]);

/** What the completed workflow returned (it must not have failed). */
function returned(done: CompleteWorkflow): unknown {
  if (done.outcome.case !== "output") assert.fail(`the workflow did not return: ${JSON.stringify(done.outcome.value)}`);
  return fromPayload(done.outcome.value);
}

test("live, patched answers true and records the marker at its position, held back and carried by the completion", async () => {
  const conn = await run(async (ctx) => ctx.patched("cents"));
  const done = onlyCompletion(conn);
  assert.equal(returned(done), true);
  assert.deepEqual(recordsOf(done.steps), [[0, "waymark.patch", { patch_id: "cents" }]]);
});

test("live, the marker travels with the next step's flush, before the new branch's step runs, which takes the next position", async () => {
  let sentBeforeStep: string[] = [];
  const conn = new FakeConn();
  await run(
    async (ctx) => {
      const cents = ctx.patched("cents");
      await ctx.step("charge-cents", () => ((sentBeforeStep = conn.kinds()), 100));
      return cents;
    },
    [],
    conn,
  );
  assert.deepEqual(sentBeforeStep, ["recordStep:0"], "the marker is durable before the new branch runs");
  const record = conn.sent[0]!.value as RecordStep;
  assert.deepEqual(recordsOf([record]), [[0, "waymark.patch", { patch_id: "cents" }]]);
  assert.deepEqual(conn.kinds(), ["recordStep:0", "completeWorkflow"]);
  const done = conn.sent[1]!.value as CompleteWorkflow;
  assert.deepEqual(recordsOf(done.steps), [[1, "charge-cents", 100]]);
  assert.equal(returned(done), true);
});

test("over its own marker patched answers true, records nothing, and the new branch replays", async () => {
  const conn = await run(checkout, [marker(0, "cents"), step(1, "charge-cents", 100)]);
  const done = onlyCompletion(conn);
  assert.deepEqual(returned(done), { cents: true, charged: 100 });
  assert.deepEqual(done.steps, [], "nothing recorded again");
  assert.deepEqual(ran, [], "the recorded step's function did not run");
});

test("over an old history patched answers false, takes no position, and the old branch's step replays there", async () => {
  const conn = await run(checkout, [step(0, "charge", 1)]);
  const done = onlyCompletion(conn);
  assert.deepEqual(returned(done), { cents: false, charged: 1 });
  assert.deepEqual(done.steps, [], "no marker is recorded in an old run");
  assert.deepEqual(ran, []);
});

test("an old run that goes on live after the old branch records the old branch's steps at their next positions, and no marker", async () => {
  // The run began under code without the change and was recovered after its first step.
  const conn = await run(
    async (ctx) => {
      const first = await checkout(ctx);
      const shipped = await ctx.step("ship", () => (ran.push("ship"), "shipped"));
      return { first, shipped };
    },
    [step(0, "charge", 1)],
  );
  const done = onlyCompletion(conn);
  assert.deepEqual(returned(done), { first: { cents: false, charged: 1 }, shipped: "shipped" });
  assert.deepEqual(recordsOf(done.steps), [[1, "ship", "shipped"]]);
  assert.deepEqual(ran, ["ship"]);
});

test("over another patch's marker patched answers false; that patch's own call then takes the position", async () => {
  const conn = await run(
    async (ctx) => {
      const newer = ctx.patched("newer");
      const older = ctx.patched("older");
      const after = await ctx.step("b", () => (ran.push("b"), -1));
      return { newer, older, after };
    },
    [marker(0, "older"), step(1, "b", 2)],
  );
  const done = onlyCompletion(conn);
  assert.deepEqual(returned(done), { newer: false, older: true, after: 2 });
  assert.deepEqual(done.steps, []);
  assert.deepEqual(ran, []);
});

test("patched takes its position in call order among calls started together", async () => {
  // Step a takes position 0 when called, before it resolves: patched looks at 1.
  const fn: WorkflowFn = async (ctx) => {
    const a = ctx.step("a", () => (ran.push("a"), "A"));
    const cents = ctx.patched("cents");
    const b = ctx.step("b", () => (ran.push("b"), "B"));
    return [await a, cents, await b];
  };
  const live = await run(fn);
  const completion = live.sent.at(-1)!.value as CompleteWorkflow;
  const all = [...live.sent.slice(0, -1).map((k) => k.value as RecordStep), ...completion.steps];
  assert.deepEqual(
    recordsOf(all).sort((x, y) => Number(x[0]) - Number(y[0])),
    [
      [0, "a", "A"],
      [1, "waymark.patch", { patch_id: "cents" }],
      [2, "b", "B"],
    ],
  );
  // Old code recorded b right after a: patched leaves position 1 to b.
  const old = await run(fn, [step(0, "a", "A"), step(1, "b", "B")]);
  assert.deepEqual(returned(onlyCompletion(old)), ["A", false, "B"]);
  assert.deepEqual(ran, []);
});

test("a malformed marker fails the run as a malformed history (kind Serialization), recording nothing", async () => {
  for (const output of [{}, { patch_id: 7 }, "cents"]) {
    const conn = await run(checkout, [step(0, "waymark.patch", output)]);
    const done = onlyCompletion(conn);
    assert.equal(done.outcome.case, "failure", JSON.stringify(output));
    assert.ok(done.outcome.case === "failure");
    assert.equal(done.outcome.value.kind, "Serialization");
    assert.match(done.outcome.value.message, /malformed waymark\.patch record at position 0/);
    assert.deepEqual(done.steps, []);
    assert.deepEqual(ran, []);
  }
  const failedMarker = create(StepSchema, { stepId: 0, name: "waymark.patch", failure: create(FailureSchema, { kind: "", message: "x" }) });
  const done = onlyCompletion(await run(checkout, [failedMarker]));
  assert.ok(done.outcome.case === "failure");
  assert.equal(done.outcome.value.kind, "Serialization");
});

test("a cancelled run records no marker live (patched throws the cancel); its own marker still replays", async () => {
  const cancelled = deferred<void>();
  const got: unknown[] = [];
  const d = dispatch("wf");
  d.steps = [marker(0, "replayed")];
  const conn = new FakeConn();
  const r = new Run(
    d,
    conn,
    workerConfig({
      wf: async (ctx) => {
        await cancelled.promise;
        got.push(ctx.patched("replayed"));
        try {
          got.push(ctx.patched("live"));
        } catch (e) {
          got.push(e);
        }
        throw got[1];
      },
    }),
  );
  const executed = r.execute();
  r.interrupt(new CancelledError());
  cancelled.resolve();
  await executed;
  assert.equal(got[0], true);
  assert.ok(got[1] instanceof CancelledError, `got ${String(got[1])}`);
  // Stopped by the cancel: no completion, and no marker was held, so nothing is recorded.
  assert.deepEqual(conn.kinds(), []);
});

test("offline, a history that ends where patched would record ends the replay there, sending nothing", async () => {
  const conn = new FakeConn(() => assert.fail("a replay sent a request"));
  const replayer = new Replayer({ checkout }, conn);
  ran = [];
  // Nothing recorded at all: the marker's position is where a live run would go on.
  assert.deepEqual(await replayer.replay({ workflow_name: "checkout", steps: [] }), { outcome: "suspended", stepId: 0 });
  // An old run's step, then a patch asked where the history ends.
  const later = new Replayer(
    {
      later: async (ctx: WorkflowContext) => {
        const old = ctx.patched("x");
        await ctx.step("a", () => (ran.push("a"), 0));
        try {
          ctx.patched("y");
        } catch (e) {
          assert.ok(e instanceof HistoryEndedError);
          // Swallowed: the replay still ends where the history did.
        }
        return old;
      },
    },
    conn,
  );
  const got = await later.replay({ workflow_name: "later", steps: [{ step_id: 0, name: "a", output: 0 }] });
  assert.deepEqual(got, { outcome: "suspended", stepId: 1 });
  // The whole history replays to what the code returns.
  const marked = { workflow_name: "checkout", steps: [{ step_id: 0, name: "waymark.patch", output: { patch_id: "cents" } }, { step_id: 1, name: "charge-cents", output: 100 }] };
  assert.deepEqual(await replayer.replay(marked), { outcome: "returned", value: { cents: true, charged: 100 } });
  assert.deepEqual(ran, []);
  assert.deepEqual(conn.kinds(), []);
});
