// The offline Replayer: recorded calls are answered from the history, the first unrecorded one
// ends the replay (suspended), and nothing connects, sends, waits or runs a step function. No
// server: every replay goes through a fake connection that fails the test if asked anything,
// and every test checks afterwards that it was asked nothing and that no step function ran.

import { test, beforeEach, afterEach } from "node:test";
import assert from "node:assert/strict";
import {
  HistoryEndedError,
  Interruption,
  Replayer,
  SerializationError,
  StepFailedError,
  UnknownWorkflowError,
  Worker,
  WorkflowFailure,
  silentLogger,
  type RecordedStep,
  type WorkflowContext,
  type WorkflowFn,
} from "../src/index.js";
import { FakeConn } from "./fakes.js";

const ran: string[] = [];
let conns: FakeConn[] = [];

function never(): never {
  ran.push("a step function");
  throw new Error("a replayed step's function ran");
}

beforeEach(() => {
  ran.length = 0;
  conns = [];
});
afterEach(() => {
  assert.deepEqual(ran, [], "no step function runs in a replay");
  for (const c of conns) assert.deepEqual(c.kinds(), [], "a replay sends nothing");
});

/** A replayer over `workflows` whose connection fails the test if asked anything. */
function replayer(workflows: ConstructorParameters<typeof Replayer>[0]): Replayer {
  const conn = new FakeConn(() => assert.fail("a replay sent a request"));
  conns.push(conn);
  return new Replayer(workflows, conn);
}

const out = (step_id: number, name: string, output: unknown): RecordedStep => ({ step_id, name, output: output as RecordedStep["output"] });
const failed = (step_id: number, name: string, message: string): RecordedStep => ({ step_id, name, failure: { kind: "StepFailed", message } });
const history = (workflow_name: string, steps: RecordedStep[], input: unknown = null) => ({
  workflow_id: "wf",
  workflow_name,
  input: input as RecordedStep["output"],
  steps,
});

async function checkout(ctx: WorkflowContext, order: { id: number }) {
  const charged = await ctx.step("charge", never);
  await ctx.send("shipping", { order: order.id }, { topic: "ship" });
  const label = await ctx.callStep("print_label", order);
  return { charged, label };
}

function checkoutWorker(): Worker {
  return new Worker({ logger: silentLogger }).workflow("checkout", checkout).step("print_label", never);
}

const CHECKOUT = [out(0, "charge", "ch_1"), out(1, "waymark.send", { message_id: "m-1" }), out(2, "print_label", "label-7")];

test("a complete history returns what the code returns, from a Worker, a Map or an object", async () => {
  const h = history("checkout", CHECKOUT, { id: 7 });
  for (const workflows of [checkoutWorker(), new Map([["checkout", checkout as WorkflowFn]]), { checkout }]) {
    assert.deepEqual(await replayer(workflows).replay(h), { outcome: "returned", value: { charged: "ch_1", label: "label-7" } });
  }
});

test("another step at a recorded position is non-determinism, with the message a live run records", async () => {
  const steps = [out(0, "charge", "ch_1"), out(1, "waymark.set_event", { key: "k" })];
  const got = await replayer(checkoutWorker()).replay(history("checkout", steps, { id: 7 }));
  assert.equal(got.outcome, "failed");
  assert.ok(got.outcome === "failed");
  assert.equal(got.kind, "NonDeterminism");
  assert.equal(got.message, 'workflow "wf" called step "waymark.send" at position 1, where its history records "waymark.set_event"');
});

test("the first unrecorded call suspends the replay there: a live step, a request, a remote step", async () => {
  const r = replayer(checkoutWorker());
  for (const n of [0, 1, 2]) {
    assert.deepEqual(await r.replay(history("checkout", CHECKOUT.slice(0, n), { id: 7 })), { outcome: "suspended", stepId: n });
  }
});

test("a recorded failure left uncaught fails as the live run did; the workflow's own failure keeps its kind", async () => {
  const r = replayer({
    checkout,
    picky: async () => {
      throw new WorkflowFailure("PaymentDeclined", "card expired");
    },
    plain: async () => {
      throw new RangeError("out of range");
    },
  });
  const charge = await r.replay(history("checkout", [failed(0, "charge", "declined")]));
  assert.ok(charge.outcome === "failed" && charge.error instanceof StepFailedError);
  assert.deepEqual([charge.kind, charge.message], ["StepFailed", 'step "charge" failed: declined']);
  const picky = await r.replay(history("picky", []));
  assert.ok(picky.outcome === "failed");
  assert.deepEqual([picky.kind, picky.message], ["PaymentDeclined", "card expired"]);
  const plain = await r.replay(history("plain", []));
  assert.ok(plain.outcome === "failed");
  assert.deepEqual([plain.kind, plain.message], ["RangeError", "out of range"]);
});

test("the end of the history is an interruption: code that catches it cannot change the outcome", async () => {
  const seen: unknown[] = [];
  const r = replayer({
    // Swallows every error and returns.
    careless: async (ctx) => {
      try {
        await ctx.step("a", never);
      } catch (e) {
        seen.push(e);
      }
      return "swallowed";
    },
    // Swallows it and goes on calling ctx: each later call throws the same end again.
    stubborn: async (ctx) => {
      const ended = await ctx.step("a", never).catch((e: unknown) => e);
      seen.push(ended, await ctx.now().catch((e: unknown) => e));
      throw new WorkflowFailure("Unexpected", "went on");
    },
    // Swallows it and waits on something of its own that never settles: a replay never waits.
    hanging: async (ctx) => {
      await ctx.uuid().catch(() => undefined);
      await new Promise(() => undefined);
    },
  });
  assert.deepEqual(await r.replay(history("careless", [])), { outcome: "suspended", stepId: 0 });
  assert.deepEqual(await r.replay(history("stubborn", [])), { outcome: "suspended", stepId: 0 });
  assert.deepEqual(await r.replay(history("hanging", [])), { outcome: "suspended", stepId: 0 });
  const [first, ended, later] = seen;
  assert.ok(first instanceof HistoryEndedError && first instanceof Interruption);
  // Not a step's failure, nor a workflow failure a catch of those would take for one.
  assert.ok(!(first instanceof StepFailedError) && !(first instanceof WorkflowFailure));
  assert.equal(first.stepId, 0);
  // The now() at position 1 is not where the history ended: it throws the first end again.
  assert.ok(ended instanceof HistoryEndedError);
  assert.equal(later, ended);
});

test("calls started together end the replay at the first unrecorded one in call order", async () => {
  const r = replayer({
    together: async (ctx) => {
      await ctx.step("a", never);
      // The send asks the server (after an await inside the SDK); the step would run at once.
      return Promise.all([ctx.send("x", 1), ctx.step("b", never), ctx.sleep(1)]);
    },
  });
  assert.deepEqual(await r.replay(history("together", [out(0, "a", 1)])), { outcome: "suspended", stepId: 1 });
  const sent = [out(0, "a", 1), out(1, "waymark.send", { message_id: "m" })];
  assert.deepEqual(await r.replay(history("together", sent)), { outcome: "suspended", stepId: 2 });
});

test("the time and a UUID are read from the history, else the replay suspends there", async () => {
  const r = replayer({ drawn: async (ctx) => [(await ctx.now()).getTime(), await ctx.uuid()] });
  const uuid = "d277cd57-b29b-49a3-bb39-3013ded2ea53";
  const steps = [out(0, "waymark.now", { now_ms: 5 }), out(1, "waymark.uuid", { uuid })];
  assert.deepEqual(await r.replay(history("drawn", steps)), { outcome: "returned", value: [5, uuid] });
  assert.deepEqual(await r.replay(history("drawn", steps.slice(0, 1))), { outcome: "suspended", stepId: 1 });
  assert.deepEqual(await r.replay(history("drawn", [])), { outcome: "suspended", stepId: 0 });
});

test("recorded waits return at once; a sleep whose wake time is still ahead suspends", async () => {
  const r = replayer({
    waits: async (ctx) => {
      await ctx.sleep(3_600_000);
      return (await ctx.recv("t", { timeoutMs: 3_600_000 })) ?? null;
    },
  });
  const later = Date.now() + 3_600_000;
  const past = Date.now() - 1;
  const done = [
    out(0, "waymark.sleep", { wake_at_ms: past }),
    out(1, "waymark.recv.deadline", { deadline_ms: later }),
    out(2, "waymark.recv", { message: "hi" }),
  ];
  const started = Date.now();
  assert.deepEqual(await r.replay(history("waits", done)), { outcome: "returned", value: "hi" });
  // A recv's deadline recorded, its outcome not: the recovery would ask the server.
  assert.deepEqual(await r.replay(history("waits", done.slice(0, 2))), { outcome: "suspended", stepId: 2 });
  assert.deepEqual(await r.replay(history("waits", done.slice(0, 1))), { outcome: "suspended", stepId: 1 });
  // A recv that timed out is a recorded null.
  const timedOut = [...done.slice(0, 2), out(2, "waymark.recv", null)];
  assert.deepEqual(await r.replay(history("waits", timedOut)), { outcome: "returned", value: null });
  // A sleep not over: the live run would be sleeping there.
  const asleep = [out(0, "waymark.sleep", { wake_at_ms: later })];
  assert.deepEqual(await r.replay(history("waits", asleep)), { outcome: "suspended", stepId: 0 });
  assert.deepEqual(await r.replay(history("waits", [])), { outcome: "suspended", stepId: 0 });
  assert.ok(Date.now() - started < 1000, "a replay waited");
});

test("an update is a recorded recv; a message on its topic that is no update is passed over", async () => {
  const r = replayer({
    cart: async (ctx) => {
      const u = await ctx.recvUpdate("add", { timeoutMs: 3_600_000 });
      if (u === undefined) return null;
      await ctx.answerUpdate(u.id, { total: 1 });
      return { id: u.id, args: u.args };
    },
  });
  const later = Date.now() + 3_600_000;
  const update = { message: { update_id: "u-1", args: { qty: 1 } } };
  const answered = out(2, "waymark.set_event", { key: "waymark.update/u-1" });
  const taken = [out(0, "waymark.recv.deadline", { deadline_ms: later }), out(1, "waymark.recv", update), answered];
  assert.deepEqual(await r.replay(history("cart", taken)), { outcome: "returned", value: { id: "u-1", args: { qty: 1 } } });
  // An older server let a plain send onto the topic: it has no id to answer, and the wait goes on.
  const passedOver = [
    out(0, "waymark.recv.deadline", { deadline_ms: later }),
    out(1, "waymark.recv", { message: 5 }),
    out(2, "waymark.recv.deadline", { deadline_ms: later }),
    out(3, "waymark.recv", update),
    { ...answered, step_id: 4 },
  ];
  assert.deepEqual(await r.replay(history("cart", passedOver)), { outcome: "returned", value: { id: "u-1", args: { qty: 1 } } });
  // None came in time.
  const none = [out(0, "waymark.recv.deadline", { deadline_ms: later }), out(1, "waymark.recv", null)];
  assert.deepEqual(await r.replay(history("cart", none)), { outcome: "returned", value: null });
});

test("children, remote steps and several waits replay without the server", async () => {
  const r = replayer({
    parent: async (ctx) => {
      const child = await ctx.startChild("kid", { n: 1 });
      const h = await ctx.startStep("slow");
      const first = await ctx.waitFirst([h, child]);
      return [await ctx.awaitChild(child), first, await ctx.stepResult(h)];
    },
  });
  const steps = [
    out(0, "waymark.start_child", { workflow_id: "wf/child-0" }),
    out(1, "slow", "s"),
    out(2, "waymark.select", { index: 1 }),
    out(3, "waymark.await_child", { status: "SUCCESS", output: 2 }),
  ];
  assert.deepEqual(await r.replay(history("parent", steps)), { outcome: "returned", value: [2, 1, "s"] });
  for (let n = 0; n < steps.length; n++) {
    assert.deepEqual(await r.replay(history("parent", steps.slice(0, n))), { outcome: "suspended", stepId: n }, `cut at ${n}`);
  }
});

test("the output is what a live run records", async () => {
  const r = replayer({
    shaped: async () => ({ at: new Date(0), gone: undefined, list: [1, undefined] }),
    nothing: async () => undefined,
    opaque: async () => 1n,
  });
  assert.deepEqual(await r.replay(history("shaped", [])), { outcome: "returned", value: { at: "1970-01-01T00:00:00.000Z", list: [1, null] } });
  assert.deepEqual(await r.replay(history("nothing", [])), { outcome: "returned", value: null });
  const opaque = await r.replay(history("opaque", []));
  assert.ok(opaque.outcome === "failed" && opaque.error instanceof SerializationError);
  assert.equal(opaque.kind, "Serialization");
});

test("an unknown workflow or a malformed history is an error, not an outcome", async () => {
  const r = replayer(checkoutWorker());
  await assert.rejects(r.replay(history("nope", [])), (e: unknown) => e instanceof UnknownWorkflowError && e.workflowName === "nope");
  const bad = [{}, { workflow_name: 1 }, { workflow_name: "checkout", steps: {} }, { workflow_name: "checkout", steps: [{ step_id: -1, name: "a" }] }];
  for (const h of bad) {
    await assert.rejects(r.replay(h as never), SerializationError, JSON.stringify(h));
  }
});

test("a history from elsewhere needs only its name and steps", async () => {
  const r = replayer({
    echo: async (ctx, input: unknown) => {
      const a = await ctx.step("a", never);
      return [ctx.workflowId, input, a];
    },
  });
  // The defaults: id "replay", input null, and a step recorded without an output is null.
  const minimal = { workflow_name: "echo", steps: [{ step_id: 0, name: "a" }] };
  assert.deepEqual(await r.replay(minimal), { outcome: "returned", value: ["replay", null, null] });
});

test("replays run side by side", async () => {
  const r = replayer(checkoutWorker());
  const full = history("checkout", CHECKOUT, { id: 7 });
  const cut = history("checkout", CHECKOUT.slice(0, 1), { id: 7 });
  const got = await Promise.all([r.replay(full), r.replay(cut), r.replay(full)]);
  const returned = { outcome: "returned", value: { charged: "ch_1", label: "label-7" } };
  assert.deepEqual(got, [returned, { outcome: "suspended", stepId: 1 }, returned]);
});
