// A workflow dispatched again while this worker still runs it (the server took it back, say after
// a database outage, and dispatched it here under a higher epoch). No server: an in-process fake
// of the worker stream.

import { test } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { DispatchWorkflowSchema, WorkflowCompletedSchema, type WorkerMessage } from "../src/gen/waymark/v1/worker_pb.js";
import { WorkflowStatus } from "../src/gen/waymark/v1/types_pb.js";
import { FencedError, silentLogger, Worker } from "../src/index.js";
import { toPayload } from "../src/payload.js";
import { deferred } from "./fakes.js";
import { FakeServer, type FakeStream } from "./fake-server.js";

const isCreditBack = (m: WorkerMessage) => m.kind.case === "credit" && m.kind.value.workflows === 1;
const creditsBack = (s: FakeStream) => s.received.filter(isCreditBack).length;

/** The first heartbeat sent after message `from`: held ids (sorted) and dispatches counted. */
async function heartbeatAfter(s: FakeStream, from: number): Promise<{ held: string[]; dispatches: number; at: number }> {
  const { m, at } = await s.next((m) => m.kind.case === "heartbeat", from, "heartbeat");
  assert.ok(m.kind.case === "heartbeat");
  assert.equal(m.kind.value.reportsHeld, true);
  return { held: [...m.kind.value.heldWorkflowIds].sort(), dispatches: Number(m.kind.value.dispatchesReceived), at };
}

/** The epoch a message for a workflow carries, if it carries one. */
function epochOf(m: WorkerMessage): bigint | undefined {
  const v = m.kind.value as { epoch?: unknown } | undefined;
  return typeof v?.epoch === "bigint" ? v.epoch : undefined;
}

// Each dispatch spent a credit, and each is granted back exactly once: the replaced run's at
// once, even while its step goes on, and nothing more when it ends. The replaced run's end does
// not take the new run out of the heartbeat's list, and the replaced run sends nothing more,
// even when its workflow goes on as if nothing had happened.
test("a workflow dispatched again grants each dispatch's credit back once", async () => {
  const server = new FakeServer();
  const started = [deferred<void>(), deferred<void>()];
  const release = [deferred<void>(), deferred<void>()];
  const stepsDone = [deferred<void>(), deferred<void>()];
  // What the replaced run's next step threw.
  const stale = deferred<unknown>();
  const w = new Worker({ transport: server.transport, logger: silentLogger, maxConcurrentWorkflows: 4, parkAfterMs: null });
  w.workflow("twice", async (ctx) => {
    const i = ctx.epoch - 1;
    // Ignores its signal: returns only when released.
    await ctx.step("block", async () => {
      started[i]!.resolve();
      await release[i]!.promise;
      return i;
    });
    if (i === 0) {
      // Going on regardless: a replaced run's further requests are not sent.
      stale.resolve(await ctx.step("more", () => 0).then(() => undefined, (e: unknown) => e));
      await ctx.send("elsewhere", "hi").catch(() => undefined);
    }
    stepsDone[i]!.resolve();
    return i;
  });
  const dispatch = (epoch: bigint) =>
    create(DispatchWorkflowSchema, { workflowId: "wf-r", workflowName: "twice", epoch, input: toPayload(null) });
  const stop = new AbortController();
  const running = w.run({ signal: stop.signal });
  try {
    const s = await server.stream(0);
    s.welcome(100);
    await s.next((m) => m.kind.case === "credit" && m.kind.value.workflows === 4, 0, "the worker's credits");

    s.send({ case: "dispatchWorkflow", value: dispatch(1n) });
    await started[0]!.promise;
    s.send({ case: "dispatchWorkflow", value: dispatch(2n) });
    await started[1]!.promise;
    // The replaced run's credit is back while its step still runs.
    await s.next(isCreditBack, 0, "credit back for the replaced run");

    release[0]!.resolve();
    const thrown = await stale.promise;
    assert.ok(thrown instanceof FencedError, `the replaced run's next step threw ${String(thrown)}, want FencedError`);
    await stepsDone[0]!.promise;
    // The old run has ended: the new one is still held, and listed.
    const oldGone = s.received.length;
    const hb = await heartbeatAfter(s, oldGone);
    assert.deepEqual([hb.held, hb.dispatches], [["wf-r"], 2]);
    assert.equal(creditsBack(s), 1, "credits granted back after the replaced run ended");
    assert.deepEqual(
      s.received.filter((m) => epochOf(m) !== undefined).map((m) => `${m.kind.case}@${epochOf(m)}`),
      [],
      "the replaced run sent nothing after it was replaced",
    );

    release[1]!.resolve();
    await stepsDone[1]!.promise;
    const done = await s.next((m) => m.kind.case === "completeWorkflow" && epochOf(m) === 2n, 0, "completion of the new run");
    s.reply(done.m.requestId, { case: "workflowCompleted", value: create(WorkflowCompletedSchema, { status: WorkflowStatus.SUCCESS }) });
    const second = await s.next(isCreditBack, done.at, "credit back for the new run");
    const after = await heartbeatAfter(s, second.at);
    assert.deepEqual([after.held, after.dispatches], [[], 2]);

    assert.equal(creditsBack(s), 2, "two dispatches, two credits granted back");
    const requests = s.received.filter((m) => m.requestId !== 0n);
    assert.deepEqual(
      requests.map((m) => `${m.kind.case}@${epochOf(m)}`),
      ["completeWorkflow@2"],
      "the replaced run sent nothing; the new one completed",
    );
    for (const m of s.received) {
      const e = epochOf(m);
      assert.ok(e === undefined || e === 2n, `the replaced run sent ${m.kind.case}`);
    }
  } finally {
    stop.abort();
    await running;
  }
});
