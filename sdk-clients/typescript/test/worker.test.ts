// The worker against a real server: steps with retries, failures and their kinds, replay on
// another worker, non-determinism, cancellation, workflow timeouts and reconnecting.

import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as delay } from "node:timers/promises";
import { CancelledError, WorkflowFailure, type Client, type Worker } from "../src/index.js";
import { startServer, waitFor, type TestServer } from "./harness.js";

let server: TestServer;
let client: Client;
/** How often each step function ran, by workflow and step. */
const runs = new Map<string, number>();
const ran = (key: string) => runs.set(key, (runs.get(key) ?? 0) + 1);
const observed = new Map<string, unknown>();

function register(w: Worker): void {
  w.workflow("retrying", async (ctx) => {
    const v = await ctx.step(
      "flaky",
      ({ attempt }) => {
        ran(`${ctx.workflowId}/flaky`);
        if (attempt < 3) throw new Error(`attempt ${attempt} failed`);
        return { attempt, at: new Date(0) };
      },
      { retry: { maxAttempts: 3, initialIntervalMs: 10 } },
    );
    return v;
  });
  w.workflow("failing", async (ctx, how: string) => {
    if (how === "step") await ctx.step("broken", () => Promise.reject(new Error("disk full")), { retry: { maxAttempts: 2, initialIntervalMs: 1 } });
    if (how === "kind") throw new WorkflowFailure("Declined", "card declined");
    if (how === "type") (null as unknown as { x: number }).x;
    return "unreachable";
  });
  w.workflow("timed", async (ctx) => {
    await ctx.uuid(); // a built-in record: the worker ran no function, so it says no duration
    return ctx.step("slow", async () => {
      // At least 200 ms by the clock the worker measures steps with (a timer may fire a
      // fraction of a millisecond early by it).
      const until = performance.now() + 200;
      while (performance.now() < until) await delay(until - performance.now() + 1);
      return "done";
    });
  });
  w.workflow("parallel", async (ctx) => {
    const values = await Promise.all([1, 2, 3].map((n) => ctx.step(`s${n}`, async () => n * 10)));
    return values;
  });
  w.workflow("waiter", async (ctx, variant: string) => {
    const first = await ctx.step(variant === "b" ? "other" : "before", () => {
      ran(`${ctx.workflowId}/before`);
      return 1;
    });
    const msg = await ctx.recv<string>("go");
    const after = await ctx.step("after", () => {
      ran(`${ctx.workflowId}/after`);
      return 2;
    });
    return { first, msg, after, recoveries: ctx.recoveryAttempts };
  });
  w.workflow("busy", async (ctx) => {
    await ctx.step("long", ({ signal }) => {
      observed.set(`${ctx.workflowId}/started`, true);
      return new Promise((_, reject) =>
        signal.addEventListener("abort", () => {
          observed.set(`${ctx.workflowId}/aborted`, signal.reason);
          reject(signal.reason);
        }),
      );
    });
    observed.set(`${ctx.workflowId}/after`, true);
  });
  w.workflow("sleeper", async (ctx) => {
    ctx.signal.addEventListener("abort", () => observed.set(ctx.workflowId, ctx.signal.reason));
    await ctx.sleep(3_600_000);
    observed.set(`${ctx.workflowId}/woke`, true);
    return "woke";
  });
}

before(async () => {
  server = await startServer();
  client = server.client;
});
after(() => server.stop());

test("a step is retried per its policy, its attempts recorded, its result read as JSON", async () => {
  const w = await server.worker({ parkAfterMs: null }, register);
  const { workflow } = await client.start("retrying", null);
  const out = await client.result(workflow.workflowId, { timeoutMs: 20_000 });
  assert.deepEqual(out, { attempt: 3, at: "1970-01-01T00:00:00.000Z" });
  assert.equal(runs.get(`${workflow.workflowId}/flaky`), 3);
  const [step] = await client.steps(workflow.workflowId);
  assert.deepEqual([step!.name, step!.attempts], ["flaky", 3]);
  assert.ok(w.workerId);
});

test("failures carry their kinds: StepFailed, the application's, the error's name", async () => {
  const kinds: Record<string, string> = { step: "StepFailed", kind: "Declined", type: "TypeError" };
  for (const [how, kind] of Object.entries(kinds)) {
    const { workflow } = await client.start("failing", how);
    const done = await client.await(workflow.workflowId, { timeoutMs: 20_000 });
    assert.equal(done.status, "ERROR");
    assert.equal(done.failure?.kind, kind, how);
  }
  const { workflow } = await client.start("failing", "step");
  await assert.rejects(client.result(workflow.workflowId, { timeoutMs: 20_000 }), { name: "WorkflowFailedError", kind: "StepFailed" });
  const steps = await client.steps(workflow.workflowId);
  assert.deepEqual([steps[0]!.failure?.kind, steps[0]!.failure?.message, steps[0]!.attempts], ["StepFailed", "disk full", 2]);
});

test("a step carries its start: the server dates it from the duration the worker measured", async () => {
  const { workflow } = await client.start("timed", null);
  assert.equal(await client.result(workflow.workflowId, { timeoutMs: 20_000 }), "done");
  const [drawn, step] = await client.steps(workflow.workflowId);
  assert.equal(drawn!.name, "waymark.uuid");
  assert.equal(drawn!.startedAt, undefined);
  assert.equal(step!.name, "slow");
  assert.ok(step!.startedAt && step!.recordedAt, "a start and a record time");
  // At least the step's 200 ms: the start is the record's time less what the worker measured.
  const tookMs = step!.recordedAt.getTime() - step!.startedAt.getTime();
  assert.ok(tookMs >= 200 && tookMs < 60_000, `${tookMs} ms from start to record`);
});

test("steps started together number in call order", async () => {
  const { workflow } = await client.start("parallel", null);
  assert.deepEqual(await client.result(workflow.workflowId, { timeoutMs: 20_000 }), [10, 20, 30]);
  assert.deepEqual((await client.steps(workflow.workflowId)).map((s) => `${s.stepId}:${s.name}`), ["0:s1", "1:s2", "2:s3"]);
});

// conformance: cancel
test("cancel aborts ctx.signal and stops the run at its wait", async () => {
  const { workflow } = await client.start("sleeper", null);
  const id = workflow.workflowId;
  await waitFor(async () => (await client.steps(id)).length === 1, "the sleep to be recorded");
  await client.cancel(id);
  await waitFor(() => observed.has(id), "the run to see the cancel");
  assert.ok(observed.get(id) instanceof CancelledError);
  assert.equal((await client.get(id)).status, "CANCELLED");
  assert.equal(observed.has(`${id}/woke`), false);
});

test("cancel aborts the signal a running step was given", async () => {
  const { workflow } = await client.start("busy", null);
  const id = workflow.workflowId;
  await waitFor(() => observed.has(`${id}/started`), "the step to start");
  await client.cancel(id);
  assert.equal((await client.await(id, { timeoutMs: 20_000 })).status, "CANCELLED");
  await waitFor(() => observed.has(`${id}/aborted`), "the step's signal to abort");
  assert.ok(observed.get(`${id}/aborted`) instanceof CancelledError);
  assert.equal(observed.has(`${id}/after`), false);
  assert.deepEqual(await client.steps(id), []);
});

test("a workflow past its timeout is cancelled", async () => {
  const { workflow } = await client.start("sleeper", null, { workflowTimeoutMs: 300 });
  const done = await client.await(workflow.workflowId, { timeoutMs: 20_000 });
  assert.equal(done.status, "CANCELLED");
});

test("the worker reconnects after the server restarts, and waiting workflows go on", async () => {
  const { workflow } = await client.start("waiter", "a", { workflowId: "reconnect-1" });
  await waitFor(async () => (await client.steps("reconnect-1")).length >= 2, "the recv to be waiting");
  await server.kill();
  await server.restart();
  await client.send("reconnect-1", "hello again", { topic: "go" });
  const out = (await client.result(workflow.workflowId, { timeoutMs: 30_000 })) as Record<string, unknown>;
  assert.deepEqual([out.first, out.msg, out.after], [1, "hello again", 2]);
  assert.equal(runs.get("reconnect-1/before"), 1);
  assert.equal(runs.get("reconnect-1/after"), 1);
});
