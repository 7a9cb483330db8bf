// UNAVAILABLE and broken streams are never a workflow's failure (no server: a fake connection).
// The same request is sent again while the server is unavailable; past the bound, or when the
// stream breaks, the run is dropped: it sends nothing more, not even a completion.

import { test } from "node:test";
import assert from "node:assert/strict";
import { create, toBinary } from "@bufbuild/protobuf";
import { WorkerMessageSchema } from "../src/gen/waymark/v1/worker_pb.js";
import { DisconnectedError, RunDroppedError, type WorkflowContext } from "../src/index.js";
import { resendDelayMs } from "../src/internal/resend.js";
import type { Kind } from "../src/worker/conn.js";
import { deferred, drain, FakeConn, ordinary, runOf, unavailable } from "./fakes.js";

const wire = (k: Kind) => toBinary(WorkerMessageSchema, create(WorkerMessageSchema, { kind: k }));

test("resend pauses: 50 ms doubling to 2 s, jittered down to half", () => {
  for (let i = 0; i < 50; i++) {
    const first = resendDelayMs(1);
    assert.ok(first >= 25 && first <= 50, `first pause ${first}`);
    const late = resendDelayMs(30);
    assert.ok(late >= 1000 && late <= 2000, `late pause ${late}`);
  }
});

test("UNAVAILABLE twice, then the same record goes through and the workflow completes", async () => {
  const answered = new Map<string, number>();
  const conn = new FakeConn((kind) => {
    const key = `${kind.case}:${(kind.value as { stepId?: number }).stepId}`;
    const n = (answered.get(key) ?? 0) + 1;
    answered.set(key, n);
    // a's record and the event are turned away twice each, as while the database restarts.
    if ((key === "recordStep:0" || key === "setEvent:2") && n <= 2) return unavailable;
    return ordinary(kind);
  });
  let bRuns = 0;
  const run = runOf(async (ctx: WorkflowContext) => {
    const a = await ctx.step("a", () => 1);
    const b = await ctx.step("b", () => {
      bRuns += 1;
      return a + 1;
    });
    await ctx.setEvent("k", b);
    return b;
  }, conn);
  await run.execute();

  assert.equal(run.dropped, false);
  assert.equal(bRuns, 1);
  assert.deepEqual(conn.kinds(), [
    "recordStep:0",
    "recordStep:0",
    "recordStep:0",
    "recordStep:1",
    "setEvent:2",
    "setEvent:2",
    "setEvent:2",
    "completeWorkflow",
  ]);
  // Sent again means the same request, byte for byte.
  assert.deepEqual(wire(conn.sent[1]!), wire(conn.sent[0]!));
  assert.deepEqual(wire(conn.sent[2]!), wire(conn.sent[0]!));
  assert.deepEqual(wire(conn.sent[6]!), wire(conn.sent[4]!));
  const done = conn.sent.at(-1)!;
  assert.equal(done.case, "completeWorkflow");
  if (done.case === "completeWorkflow") {
    assert.equal(done.value.outcome.case, "output");
    assert.deepEqual(done.value.steps, []);
  }
});

test("UNAVAILABLE past the bound drops the run: no completion, nothing sent afterwards", async () => {
  const conn = new FakeConn((kind) => (kind.case === "recordStep" ? unavailable : ordinary(kind)));
  let bRan = false;
  const run = runOf(
    async (ctx: WorkflowContext) => {
      await ctx.step("a", () => 1);
      await ctx.step("b", () => (bRan = true));
      return "done";
    },
    conn,
    { resendForMs: 150 },
  );
  await run.execute();

  assert.equal(run.dropped, true);
  assert.ok(run.signal.reason instanceof RunDroppedError);
  assert.equal(bRan, false, "the step after an unacknowledged record must not run");
  const kinds = conn.kinds();
  assert.ok(kinds.length >= 2, `a's record was sent again: ${kinds}`);
  assert.ok(
    kinds.every((k) => k === "recordStep:0"),
    `only a's record was ever sent: ${kinds}`,
  );
  await drain();
  assert.equal(conn.sent.length, kinds.length, "nothing is sent once the run is dropped");
});

for (const ending of ["returns", "throws"] as const) {
  test(`a workflow that catches the drop and ${ending} still cannot complete or fail`, async () => {
    const conn = new FakeConn((kind) => (kind.case === "recordStep" ? unavailable : ordinary(kind)));
    const caught: unknown[] = [];
    let bRan = false;
    const finished = deferred<void>();
    const run = runOf(
      async (ctx: WorkflowContext) => {
        try {
          await ctx.step("a", () => 1);
          try {
            await ctx.step("b", () => (bRan = true));
          } catch (e) {
            caught.push(e);
          }
          try {
            await ctx.setEvent("after", "the drop");
          } catch (e) {
            caught.push(e);
          }
          try {
            await ctx.step("c", () => 3);
          } catch (e) {
            caught.push(e);
          }
          if (ending === "throws") throw new Error("the workflow's own error, after the drop");
          return "completed anyway";
        } finally {
          finished.resolve();
        }
      },
      conn,
      { resendForMs: 100 },
    );
    await run.execute();
    await finished.promise;
    await drain();

    assert.equal(run.dropped, true);
    assert.equal(bRan, false);
    assert.equal(caught.length, 3);
    // Every later operation throws the same way: the one drop error.
    for (const e of caught) assert.equal(e, caught[0]);
    assert.ok(caught[0] instanceof RunDroppedError);
    assert.ok(conn.kinds().every((k) => k === "recordStep:0"), `sent: ${conn.kinds()}`);
  });
}

test("a broken stream drops the run that waits for an answer, without a failure", async () => {
  const held = deferred<void>();
  const conn = new FakeConn((kind) => {
    if (kind.case === "recordStep") {
      held.resolve();
      return new Promise(() => {}); // never answered: the stream breaks first
    }
    return ordinary(kind);
  });
  const finished = deferred<unknown>();
  const run = runOf(async (ctx: WorkflowContext) => {
    await ctx.step("a", () => 1);
    try {
      await ctx.step("b", () => 2);
    } catch (e) {
      finished.resolve(e);
      // Turning the interruption into a failure of its own must not fail the workflow either.
      throw new Error("the workflow's own error");
    }
    finished.resolve(undefined);
    return "done";
  }, conn);
  const executed = run.execute();
  await held.promise;
  conn.break();
  await executed;
  const error = await finished.promise;
  await drain();

  assert.equal(run.dropped, true);
  assert.ok(error instanceof DisconnectedError && error instanceof RunDroppedError);
  assert.deepEqual(conn.kinds(), ["recordStep:0"]);
});

test("a run dropped while its function is busy leaves at once and sends nothing after", async () => {
  // What the session does to every run when its stream ends: drop it, whatever it is doing.
  const conn = new FakeConn();
  const started = deferred<void>();
  const release = deferred<void>();
  const after: unknown[] = [];
  const run = runOf(async (ctx: WorkflowContext) => {
    await ctx.step("slow", async () => {
      started.resolve();
      await release.promise; // a step that ignores its signal
      return 1;
    }).catch((e) => after.push(e));
    await ctx.setEvent("k", 1).catch((e) => after.push(e));
    return "done";
  }, conn);
  const executed = run.execute();
  await started.promise;
  run.drop(new DisconnectedError());
  await executed; // ends without waiting for the step
  release.resolve();
  await drain();

  assert.equal(after.length, 2);
  assert.ok(after.every((e) => e instanceof DisconnectedError));
  assert.deepEqual(conn.kinds(), []);
});
