// Durable waits against a real server: sleep, send/recv, events, streams, child workflows,
// remote steps (called by name and served here), waiting for first/all, and parking.

import { randomUUID } from "node:crypto";
import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import { ChildWorkflowError, StepFailedError, type Client, type Worker } from "../src/index.js";
import { startServer, waitFor, type TestServer } from "./harness.js";

let server: TestServer;
let client: Client;
const stepAttempts = new Map<string, number>();
// The remote step "gated" returns once the parking test opens this.
let openStepGate = (): void => {};
const stepGate = new Promise<void>((resolve) => (openStepGate = resolve));

function register(w: Worker): void {
  w.workflow("nap", async (ctx, ms: number) => {
    await ctx.sleep(ms);
    return true;
  });
  w.workflow("inbox", async (ctx, o: { topic?: string; timeoutMs?: number }) => {
    const got = await ctx.recv(o.topic ?? "", { timeoutMs: o.timeoutMs });
    return { got: got === undefined ? "timed out" : got };
  });
  w.workflow("pinger", async (ctx, target: string) => {
    const id = await ctx.send(target, { ping: ctx.workflowId }, { topic: "ping" });
    return id.length > 0;
  });
  w.workflow("publisher", async (ctx) => {
    await ctx.setEvent("status", { stage: "started" });
    await ctx.recv("finish");
    await ctx.setEvent("status", { stage: "done" });
    return null;
  });
  w.workflow("watcher", async (ctx, target: string) => ctx.getEvent(target, "status", { timeoutMs: 30_000 }));
  w.workflow("streamer", async (ctx, n: number) => {
    await ctx.recv("start");
    const offsets: number[] = [];
    for (let i = 0; i < n; i++) offsets.push(await ctx.writeStream("progress", { i }));
    await ctx.closeStream("progress");
    return offsets;
  });
  w.workflow("child", async (ctx, x: number) => {
    if (x < 0) throw new Error("negative");
    return ctx.step("square", () => x * x);
  });
  w.workflow("parent", async (ctx, xs: number[]) => {
    const ids = await Promise.all(xs.map((x) => ctx.startChild("child", x)));
    const results: unknown[] = [];
    for (const id of ids) {
      try {
        results.push(await ctx.awaitChild<number>(id));
      } catch (e) {
        results.push(e instanceof ChildWorkflowError ? e.kind : "other");
      }
    }
    results.push(await ctx.runChild("child", 5, { workflowId: `${ctx.workflowId}-named` }));
    return results;
  });
  w.step("double", async (n: number) => n * 2);
  w.step("flaky-remote", async (n: number, call) => {
    stepAttempts.set(`flaky-${n}`, call.attempt);
    if (call.attempt < 2) throw new Error("try again");
    return `ok after ${call.attempt}`;
  });
  w.step("slow-once", async (_: null, call) => {
    // The first attempt outlives its timeout: the server fails it and runs a second.
    if (call.attempt === 1) await new Promise((r) => call.signal.addEventListener("abort", r));
    return `attempt ${call.attempt}`;
  });
  w.step("always-fails", async () => {
    throw new Error("nope");
  });
  w.workflow("caller", async (ctx) => {
    const doubled = await ctx.callStep<number>("double", 21);
    const flaky = await ctx.callStep("flaky-remote", 1, { retry: { maxAttempts: 3, initialIntervalMs: 10 }, timeoutMs: 10_000 });
    let failed = "";
    try {
      await ctx.callStep("always-fails", null, { retry: { maxAttempts: 2, initialIntervalMs: 10 } });
    } catch (e) {
      failed = e instanceof StepFailedError ? e.kind : "other";
    }
    const slow = await ctx.callStep("slow-once", null, { timeoutMs: 300, retry: { maxAttempts: 2, initialIntervalMs: 10 } });
    return { doubled, flaky, failed, slow };
  });
  // Parking certain, not a matter of timing: the child waits for a message and the remote step
  // for a gate, which the parking test sends and opens only once it has seen the workflow parked.
  w.workflow("held-child", async (ctx) => ctx.recv("release"));
  w.step("gated", async (n: number) => {
    await stepGate;
    return n + 1;
  });
  w.workflow("patient", async (ctx, childId: string) => {
    const got = await ctx.runChild("held-child", null, { workflowId: childId });
    return [got, await ctx.callStep<number>("gated", 41)];
  });
  w.workflow("fan", async (ctx) => {
    const a = await ctx.startStep("double", 1);
    const b = await ctx.startStep("double", 2);
    const child = await ctx.startChild("child", 3);
    await ctx.waitAll([a, b, child]);
    const first = await ctx.waitFirst([child, a]);
    return { sum: (await ctx.stepResult<number>(a)) + (await ctx.stepResult<number>(b)), child: await ctx.awaitChild(child), first: first >= 0 };
  });
}

before(async () => {
  server = await startServer();
  client = server.client;
  await server.worker({ parkAfterMs: null }, register);
  // A second worker that parks every wait, on its own queue.
  await server.worker({ parkAfterMs: 0, queues: ["parking"] }, register);
});
after(() => server.stop());

async function steps(id: string, n: number) {
  return waitFor(async () => (await client.steps(id)).length >= n, `${id} to record ${n} steps`);
}

// conformance: sleep
test("sleep waits durably, recorded as waymark.sleep", async () => {
  const t0 = Date.now();
  const { workflow } = await client.start("nap", 200);
  assert.equal(await client.result(workflow.workflowId, { timeoutMs: 20_000 }), true);
  assert.ok(Date.now() - t0 >= 200);
  assert.deepEqual((await client.steps(workflow.workflowId)).map((s) => s.name), ["waymark.sleep"]);
});

// conformance: recv_timeout
test("recv takes a message sent by a client, exactly once, or times out", async () => {
  const { workflow } = await client.start("inbox", { topic: "orders" });
  await steps(workflow.workflowId, 1);
  await client.send(workflow.workflowId, { sku: 7 }, { topic: "orders" });
  assert.deepEqual(await client.result(workflow.workflowId, { timeoutMs: 20_000 }), { got: { sku: 7 } });
  const [m] = await client.messages(workflow.workflowId);
  assert.deepEqual([m!.consumed, m!.consumedByStep], [true, 1]);
  const quiet = await client.start("inbox", { timeoutMs: 200 });
  assert.deepEqual(await client.result(quiet.workflow.workflowId, { timeoutMs: 20_000 }), { got: "timed out" });
});

test("a workflow sends to another workflow", async () => {
  const inbox = await client.start("inbox", { topic: "ping" });
  const pinger = await client.start("pinger", inbox.workflow.workflowId);
  assert.equal(await client.result(pinger.workflow.workflowId, { timeoutMs: 20_000 }), true);
  assert.deepEqual(await client.result(inbox.workflow.workflowId, { timeoutMs: 20_000 }), { got: { ping: pinger.workflow.workflowId } });
});

// conformance: events
test("events: set by a workflow, read by a client and by another workflow", async () => {
  const { workflow } = await client.start("publisher", null);
  const id = workflow.workflowId;
  assert.deepEqual(await client.getEvent(id, "status", { waitMs: 20_000 }), { stage: "started" });
  const watcher = await client.start("watcher", id);
  assert.deepEqual(await client.result(watcher.workflow.workflowId, { timeoutMs: 20_000 }), { stage: "started" });
  await client.send(id, null, { topic: "finish" });
  await client.result(id, { timeoutMs: 20_000 });
  const [event] = await client.events(id);
  assert.deepEqual(event!.value, { stage: "done" });
  assert.deepEqual(event!.history.map((h) => h.value), [{ stage: "started" }, { stage: "done" }]);
});

// conformance: streams
test("streams are read with for await, live, until closed", async () => {
  const { workflow } = await client.start("streamer", 3);
  const id = workflow.workflowId;
  await steps(id, 1);
  const seen: unknown[] = [];
  const reading = (async () => {
    for await (const { offset, value } of client.readStream(id, "progress")) seen.push([offset, value]);
  })();
  await client.send(id, null, { topic: "start" });
  await reading;
  assert.deepEqual(seen, [[0, { i: 0 }], [1, { i: 1 }], [2, { i: 2 }]]);
  assert.deepEqual(await client.result(id, { timeoutMs: 20_000 }), [0, 1, 2]);
  const tail: unknown[] = [];
  for await (const item of client.readStream(id, "progress", { fromOffset: 2 })) tail.push(item.value);
  assert.deepEqual(tail, [{ i: 2 }]);
});

// conformance: child_workflows
test("child workflows: started as steps, awaited, failures as ChildWorkflowError", async () => {
  const { workflow } = await client.start("parent", [2, -1]);
  const out = await client.result(workflow.workflowId, { timeoutMs: 30_000 });
  assert.deepEqual(out, [4, "ChildFailed", 25]);
  const named = await client.get(`${workflow.workflowId}-named`);
  assert.equal(named.parentWorkflowId, workflow.workflowId);
});

test("remote steps: called by name, served here, retried by the server", async () => {
  const { workflow } = await client.start("caller", null);
  assert.deepEqual(await client.result(workflow.workflowId, { timeoutMs: 30_000 }), {
    doubled: 42,
    flaky: "ok after 2",
    failed: "StepFailed",
    slow: "attempt 2",
  });
  assert.equal(stepAttempts.get("flaky-1"), 2);
});

test("wait for all and for the first of remote steps and children", async () => {
  const { workflow } = await client.start("fan", null);
  assert.deepEqual(await client.result(workflow.workflowId, { timeoutMs: 30_000 }), { sum: 6, child: 9, first: true });
  const names = (await client.steps(workflow.workflowId)).map((s) => s.name);
  assert.ok(names.includes("waymark.wait_all") && names.includes("waymark.select"));
});

test("long waits park the workflow and it comes back when the wait resolves", async () => {
  const { workflow } = await client.start("inbox", { topic: "later" }, { queue: "parking" });
  const id = workflow.workflowId;
  await waitFor(async () => (await client.get(id)).status === "DELAYED", "the recv to park");
  await client.send(id, "back", { topic: "later" });
  assert.deepEqual(await client.result(id, { timeoutMs: 30_000 }), { got: "back" });
  // Parked, the sleep ends in a second dispatch (a higher epoch), still after its wake time.
  const t0 = Date.now();
  const nap = await client.start("nap", 300, { queue: "parking" });
  assert.equal(await client.result(nap.workflow.workflowId, { timeoutMs: 30_000 }), true);
  assert.ok(Date.now() - t0 >= 300);
  assert.ok((await client.get(nap.workflow.workflowId)).epoch >= 2);
});

test("awaiting children and remote steps parks too, and the results wake the parent", async () => {
  const childId = `held-${randomUUID()}`;
  const { workflow } = await client.start("patient", childId, { queue: "parking" });
  const id = workflow.workflowId;
  // Steps first: once `n` are recorded the earlier wait is over, so a DELAYED read after that
  // is the park on the wait that follows them.
  const parkedAfter = (n: number) => async () =>
    (await client.steps(id)).length === n && (await client.get(id)).status === "DELAYED";
  await waitFor(parkedAfter(1), "the workflow to park awaiting its child");
  // A wait with no deadline: no wake time (the worker asked for never).
  assert.equal((await client.get(id)).wakeAt, undefined);
  await client.send(childId, "hi", { topic: "release" });
  await waitFor(parkedAfter(2), "the workflow to park on its remote step");
  openStepGate();
  assert.deepEqual(await client.result(id, { timeoutMs: 30_000 }), ["hi", 42]);
  // Parked twice (child, remote step): dispatched at least three times.
  assert.ok((await client.get(id)).epoch >= 3);
});

test("children and remote steps give the same results on a worker that parks every wait", async () => {
  // Whether each wait parks depends on whether its result came first: the results may not.
  const parent = await client.start("parent", [3], { queue: "parking" });
  const caller = await client.start("caller", null, { queue: "parking" });
  assert.deepEqual(await client.result(parent.workflow.workflowId, { timeoutMs: 30_000 }), [9, 25]);
  assert.deepEqual(await client.result(caller.workflow.workflowId, { timeoutMs: 30_000 }), {
    doubled: 42,
    flaky: "ok after 2",
    failed: "StepFailed",
    slow: "attempt 2",
  });
});
