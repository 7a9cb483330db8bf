// ctx.continueAsNew(input) without a server (a fake connection, and the offline Replayer): the run
// ends with one CompleteWorkflow whose outcome is continue_as_new {input}, carrying the step
// records it held back exactly as a normal completion does; not a failure (code that catches
// errors and rethrows interruptions lets it through; a step's retry does not swallow it); an
// input over the server's limit fails the workflow instead; a replay reports `continued_as_new`.
// And the client's side: the status CONTINUED_AS_NEW is terminal, `run` and
// `continuedAsWorkflowId` are read from the wire.

import { test } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { StepSchema, WorkflowSchema, WorkflowStatus as WireStatus, type Step } from "../src/gen/waymark/v1/types_pb.js";
import type { CompleteWorkflow, RecordStep } from "../src/gen/waymark/v1/worker_pb.js";
import {
  ContinueAsNew,
  Interruption,
  Replayer,
  Worker,
  isTerminal,
  silentLogger,
  type RecordedStep,
  type WorkflowContext,
  type WorkflowFn,
} from "../src/index.js";
import { fromPayload, toPayload } from "../src/payload.js";
import { statusFromWire, statusToWire, workflowInfo } from "../src/types.js";
import { Run } from "../src/worker/run.js";
import { dispatch, FakeConn, workerConfig } from "./fakes.js";

interface Looper {
  n: number;
  until: number;
}

/** Step functions that ran, as "tick n": a replayed step must not appear. */
let ran: string[] = [];

/** One run per n: a step "tick" (which returns n), then continues as new with n + 1 until `until`. */
async function looper(ctx: WorkflowContext, input: Looper): Promise<number> {
  const n = input.n;
  const tick = await ctx.step("tick", () => (ran.push(`tick ${n}`), n));
  if (tick >= input.until) return tick;
  return ctx.continueAsNew({ ...input, n: n + 1 });
}

function step(stepId: number, name: string, output: unknown): Step {
  return create(StepSchema, { stepId, name, output: toPayload(output) });
}

/** Runs `fn` as a dispatch of `input` over `history` on `conn`; returns what it sent. */
async function run(fn: WorkflowFn, input: unknown, history: Step[] = [], conn = new FakeConn()): Promise<FakeConn> {
  ran = [];
  const d = dispatch("wf", input);
  d.steps = history;
  await new Run(d, conn, workerConfig({ wf: fn })).execute();
  return conn;
}

/** The completion the run sent, which must be its only request. */
function onlyCompletion(conn: FakeConn): CompleteWorkflow {
  assert.deepEqual(conn.kinds(), ["completeWorkflow"]);
  const done = conn.sent[0]!;
  assert.ok(done.case === "completeWorkflow");
  return done.value;
}

/** The next run's input the completion carries (it must continue as new). */
function continuedWith(done: CompleteWorkflow): unknown {
  if (done.outcome.case !== "continueAsNew") assert.fail(`the run did not continue as new: ${done.outcome.case} ${JSON.stringify(done.outcome.value)}`);
  return fromPayload(done.outcome.value.input);
}

const recordsOf = (records: readonly RecordStep[]) =>
  records.map((r) => [r.stepId, r.name, r.outcome.case === "output" ? fromPayload(r.outcome.value) : r.outcome.case]);

test("a run that continues as new sends one CompleteWorkflow {continue_as_new: {input}} with its held step records aboard", async () => {
  const done = onlyCompletion(await run(looper, { n: 0, until: 3 }));
  assert.deepEqual(continuedWith(done), { n: 1, until: 3 });
  assert.deepEqual(recordsOf(done.steps), [[0, "tick", 0]], "the tick's record went with the completion, as for a normal one");
  assert.equal(done.epoch, 1n);
  assert.deepEqual(ran, ["tick 0"]);
});

test("the last run returns: a normal completion", async () => {
  const done = onlyCompletion(await run(looper, { n: 3, until: 3 }));
  assert.ok(done.outcome.case === "output");
  assert.equal(fromPayload(done.outcome.value), 3);
  assert.deepEqual(recordsOf(done.steps), [[0, "tick", 3]]);
});

test("a run recovered over its recorded steps replays them and continues as new again, recording nothing", async () => {
  const done = onlyCompletion(await run(looper, { n: 2, until: 3 }, [step(0, "tick", 2)]));
  assert.deepEqual(continuedWith(done), { n: 3, until: 3 });
  assert.deepEqual(done.steps, []);
  assert.deepEqual(ran, [], "the recorded tick did not run again");
});

test("the input is taken as JSON when continueAsNew is called, and the call is typed never (it throws ContinueAsNew, an Interruption)", async () => {
  let thrown: unknown;
  const input = { at: new Date(0), skip: undefined, list: [1, "two"] };
  const done = onlyCompletion(
    await run(async (ctx) => {
      try {
        ctx.continueAsNew(input);
      } catch (e) {
        thrown = e;
        // Code that catches errors lets interruptions through.
        if (e instanceof Interruption) throw e;
      }
      return "not reached";
    }, null),
  );
  assert.ok(thrown instanceof ContinueAsNew && thrown instanceof Interruption);
  assert.deepEqual(thrown.input, { at: "1970-01-01T00:00:00.000Z", list: [1, "two"] });
  input.list.push(3);
  assert.deepEqual(continuedWith(done), { at: "1970-01-01T00:00:00.000Z", list: [1, "two"] }, "what it was when called");
});

test("continueAsNew thrown inside a step's function is not the step's failure: no retry, nothing recorded, the run continues as new", async () => {
  let attempts = 0;
  const conn = await run(
    async (ctx) => {
      await ctx.step("first", () => 1);
      await ctx.step("inner", () => (attempts++, ctx.continueAsNew("next")), { retry: { maxAttempts: 3, initialIntervalMs: 1 } });
      return "not reached";
    },
    null,
  );
  // The step before was made durable before "inner" ran, as for any step; "inner" records nothing.
  assert.deepEqual(conn.kinds(), ["recordStep:0", "completeWorkflow"]);
  assert.equal(attempts, 1);
  const done = conn.sent[1]!.value as CompleteWorkflow;
  assert.deepEqual(continuedWith(done), "next");
  assert.deepEqual(done.steps, []);
});

test("a next input over the server's payload limit fails the workflow with PAYLOAD_TOO_LARGE, its held steps still aboard", async () => {
  const conn = new FakeConn(undefined, { maxPayloadBytes: 1000, maxMessageBytes: 64 * 1024 });
  const done = onlyCompletion(
    await run(
      async (ctx) => {
        await ctx.step("tick", () => 0);
        return ctx.continueAsNew("x".repeat(2000));
      },
      null,
      [],
      conn,
    ),
  );
  assert.ok(done.outcome.case === "failure", done.outcome.case);
  assert.equal(done.outcome.value.kind, "PAYLOAD_TOO_LARGE");
  assert.match(done.outcome.value.message, /next run's input/);
  assert.deepEqual(recordsOf(done.steps), [[0, "tick", 0]]);
});

// The Replayer.

const out = (step_id: number, name: string, output: unknown): RecordedStep => ({ step_id, name, output: output as RecordedStep["output"] });
const history = (input: Looper, steps: RecordedStep[]) => ({ workflow_id: "loop", workflow_name: "looper", input: { ...input }, steps });

test("a Replayer reports continued_as_new with the next input; the last run returned; another step is non-determinism", async () => {
  ran = [];
  const conn = new FakeConn(() => assert.fail("a replay sent a request"));
  const replayer = new Replayer(new Worker({ logger: silentLogger }).workflow("looper", looper), conn);
  assert.deepEqual(await replayer.replay(history({ n: 0, until: 3 }, [out(0, "tick", 0)])), {
    outcome: "continued_as_new",
    input: { n: 1, until: 3 },
  });
  assert.deepEqual(await replayer.replay(history({ n: 2, until: 2 }, [out(0, "tick", 2)])), { outcome: "returned", value: 2 });
  // Each run's history is its own: another step at its first position is non-determinism.
  const other = await replayer.replay(history({ n: 0, until: 3 }, [out(0, "tock", 0)]));
  assert.ok(other.outcome === "failed");
  assert.equal(other.kind, "NonDeterminism");
  // A run that has not ticked yet suspends there.
  assert.deepEqual(await replayer.replay(history({ n: 0, until: 3 }, [])), { outcome: "suspended", stepId: 0 });
  assert.deepEqual(ran, []);
  assert.deepEqual(conn.kinds(), []);
});

test("a Replayer fails a replay that continues as new with an input over the limit, as a live run fails", async () => {
  const replayer = new Replayer(
    { big: async (ctx: WorkflowContext) => ctx.continueAsNew("x".repeat(5 * 1024 * 1024)) },
    new FakeConn(() => assert.fail("a replay sent a request")),
  );
  const got = await replayer.replay({ workflow_name: "big", input: null, steps: [] });
  assert.ok(got.outcome === "failed");
  assert.equal(got.kind, "PAYLOAD_TOO_LARGE");
});

// The client's side.

test("CONTINUED_AS_NEW is a terminal status, read and written on the wire, and an ended run's run and continuedAsWorkflowId are read", () => {
  assert.equal(isTerminal("CONTINUED_AS_NEW"), true);
  assert.equal(statusToWire("CONTINUED_AS_NEW"), WireStatus.CONTINUED_AS_NEW);
  assert.equal(statusFromWire(WireStatus.CONTINUED_AS_NEW), "CONTINUED_AS_NEW");
  const ended = workflowInfo(
    create(WorkflowSchema, {
      workflowId: "loop/run-1",
      workflowName: "looper",
      status: WireStatus.CONTINUED_AS_NEW,
      run: 1,
      continuedAsWorkflowId: "loop",
    }),
  );
  assert.deepEqual([ended.status, ended.run, ended.continuedAsWorkflowId], ["CONTINUED_AS_NEW", 1, "loop"]);
  const current = workflowInfo(create(WorkflowSchema, { workflowId: "loop", status: WireStatus.ENQUEUED, run: 2 }));
  assert.deepEqual([current.status, current.run, current.continuedAsWorkflowId], ["ENQUEUED", 2, ""]);
  assert.equal(isTerminal(current.status), false);
});
