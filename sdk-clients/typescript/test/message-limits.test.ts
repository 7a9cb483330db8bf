// No message over the server's message limit (no server: a fake connection, and an in-process
// fake of the worker stream). A completion that would be too large with the step records it
// holds sends them first, each on its own, and completes once they are durable; a heartbeat
// whose list would be too long lists nothing; the sizes come from the Welcome, or the server's
// defaults when it sends 0.

import { test } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { DispatchStepSchema, ReplyErrorSchema, WelcomeSchema, type WorkerMessage } from "../src/gen/waymark/v1/worker_pb.js";
import { silentLogger, Worker, type WorkflowContext } from "../src/index.js";
import type { ReplyResult } from "../src/worker/conn.js";
import { HeldRuns } from "../src/worker/held.js";
import { DEFAULT_LIMITS, limitsFrom, messageBytes } from "../src/worker/limits.js";
import { Run } from "../src/worker/run.js";
import { deferred, dispatch, drain, FakeConn, ordinary, recorded, runOf, workerConfig } from "./fakes.js";
import { FakeServer } from "./fake-server.js";

const MiB = 1024 * 1024;

/** Two steps run together (both records still held at the end) and an output, `size` bytes each. */
const twoStepsAndOutput = (size: number) => async (ctx: WorkflowContext) => {
  const [a, b] = await Promise.all([ctx.step("a", () => "a".repeat(size)), ctx.step("b", () => "b".repeat(size))]);
  return a.length + b.length > 0 ? "c".repeat(size) : "";
};

test("held records that would make the completion too large go first, on their own, and are durable before it", async () => {
  const ack = deferred<void>();
  const bothSent = deferred<void>();
  const conn = new FakeConn(async (kind) => {
    if (kind.case !== "recordStep") return ordinary(kind);
    if (kind.value.stepId === 1) bothSent.resolve();
    await ack.promise;
    return recorded;
  });
  const executed = runOf(twoStepsAndOutput(3 * MiB), conn).execute();
  // Three values of 3 MiB are over the 9 MiB a message may be; two are not.
  await bothSent.promise;
  await drain(10);
  assert.deepEqual(conn.kinds(), ["recordStep:0", "recordStep:1"], "no completion before the records are acknowledged");

  ack.resolve();
  await executed;
  assert.deepEqual(conn.kinds(), ["recordStep:0", "recordStep:1", "completeWorkflow"]);
  const done = conn.sent[2]!;
  assert.ok(done.case === "completeWorkflow");
  assert.deepEqual(done.value.steps, [], "the records are not sent twice");
  assert.equal(done.value.outcome.case, "output");
  for (const k of conn.sent) assert.ok(messageBytes(k) <= DEFAULT_LIMITS.maxMessageBytes, `${k.case} is ${messageBytes(k)} bytes`);
});

test("held records that fit go with the completion", async () => {
  const conn = new FakeConn();
  await runOf(twoStepsAndOutput(2 * MiB), conn).execute();
  assert.deepEqual(conn.kinds(), ["completeWorkflow"]);
  const done = conn.sent[0]!;
  assert.ok(done.case === "completeWorkflow");
  assert.deepEqual(
    done.value.steps.map((s) => s.name),
    ["a", "b"],
  );
});

test("held records sent ahead and refused: the workflow is not completed", async () => {
  const fenced: ReplyResult = {
    case: "error",
    value: create(ReplyErrorSchema, { code: 9, reason: "STALE_EPOCH", message: "another dispatch owns the workflow" }),
  };
  const conn = new FakeConn((kind) => (kind.case === "recordStep" ? fenced : ordinary(kind)));
  await runOf(twoStepsAndOutput(3 * MiB), conn).execute();
  // Carried with the completion they would have had it refused as a whole; nothing to send.
  assert.deepEqual(conn.kinds(), ["recordStep:0", "recordStep:1"]);
});

test("a heartbeat whose list would be over the message limit lists nothing", () => {
  const held = new HeldRuns();
  const conn = new FakeConn();
  const take = (n: number) => {
    for (let i = held.heartbeat(Infinity).heldWorkflowIds.length; n > 0; i++, n--) {
      const id = `${String(i).padStart(4, "0")}${"w".repeat(252)}`;
      held.take(new Run(dispatch("wf", null, id), conn, workerConfig({})));
    }
  };
  take(10);
  const ten = held.heartbeat(4096);
  assert.equal(ten.reportsHeld, true);
  assert.equal(ten.heldWorkflowIds.length, 10);
  take(10);
  // Twenty ids of 256 characters are over 4 KiB: a part of the list would have the server take
  // back the runs left out, so the heartbeat says nothing about them at all.
  const twenty = held.heartbeat(4096);
  assert.equal(twenty.reportsHeld, false);
  assert.deepEqual(twenty.heldWorkflowIds, []);
  assert.equal(held.heartbeat(DEFAULT_LIMITS.maxMessageBytes).heldWorkflowIds.length, 20);
});

test("sizes come from the Welcome; a server that sends 0 gets its defaults", () => {
  assert.deepEqual(limitsFrom(create(WelcomeSchema, {})), { maxPayloadBytes: 4 * MiB, maxMessageBytes: 9 * MiB });
  assert.deepEqual(limitsFrom(create(WelcomeSchema, { maxPayloadBytes: 100n, maxMessageBytes: 2000n })), {
    maxPayloadBytes: 100,
    maxMessageBytes: 2000,
  });
});

/** The output (or failure kind) of the completion and the step result the worker sent. */
async function outcomesUnder(sizes: { maxPayloadBytes?: number; maxMessageBytes?: number }) {
  const server = new FakeServer();
  const w = new Worker({ transport: server.transport, logger: silentLogger });
  w.workflow("wide", async () => "x".repeat(200));
  w.step("wide-step", () => "x".repeat(200));
  const stop = new AbortController();
  const running = w.run({ signal: stop.signal });
  try {
    const s = await server.stream(0);
    s.welcome(60_000, sizes);
    s.send({ case: "dispatchWorkflow", value: dispatch("wide") });
    s.send({
      case: "dispatchStep",
      value: create(DispatchStepSchema, { workflowId: "caller", stepId: 3, stepName: "wide-step", attempt: 1 }),
    });
    const outcome = async (kind: WorkerMessage["kind"]["case"]) => {
      const { m } = await s.next((m) => m.kind.case === kind, 0, kind);
      const o = (m.kind.value as { outcome: { case: string; value: { kind?: string } } }).outcome;
      return o.case === "failure" ? o.value.kind : o.case;
    };
    return { workflow: await outcome("completeWorkflow"), step: await outcome("stepResult") };
  } finally {
    stop.abort();
    await running;
  }
}

test("the worker holds its runs and served steps to the sizes its Welcome gave", async () => {
  assert.deepEqual(await outcomesUnder({ maxPayloadBytes: 100, maxMessageBytes: 64 * 1024 }), {
    workflow: "PAYLOAD_TOO_LARGE",
    step: "PAYLOAD_TOO_LARGE",
  });
  // Not told (an older server): the defaults, which take 200 bytes.
  assert.deepEqual(await outcomesUnder({}), { workflow: "output", step: "output" });
});
