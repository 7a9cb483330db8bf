// Heartbeats say what the worker holds (no server: an in-process fake of the worker stream).
// A run is held from its dispatch until its completion is answered, it is dropped or lost; the
// count of dispatches taken is per stream and starts again at zero after a reconnect.

import { test } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { WorkflowCompletedSchema, type WorkerMessage } from "../src/gen/waymark/v1/worker_pb.js";
import { WorkflowStatus } from "../src/gen/waymark/v1/types_pb.js";
import { DisconnectedError, silentLogger, Worker } from "../src/index.js";
import { deferred, dispatch } from "./fakes.js";
import { FakeServer, type FakeStream } from "./fake-server.js";

const isHeartbeat = (m: WorkerMessage) => m.kind.case === "heartbeat";

/** The first heartbeat sent after message `from`: held ids (sorted) and dispatches counted. */
async function heartbeatAfter(s: FakeStream, from: number): Promise<{ held: string[]; dispatches: number; at: number }> {
  const { m, at } = await s.next(isHeartbeat, from, "heartbeat");
  assert.ok(m.kind.case === "heartbeat");
  assert.equal(m.kind.value.reportsHeld, true);
  return { held: [...m.kind.value.heldWorkflowIds].sort(), dispatches: Number(m.kind.value.dispatchesReceived), at };
}

test("heartbeats list the runs held and count the dispatches taken off the stream", async () => {
  const server = new FakeServer();
  const gate = deferred<void>();
  const signals = new Map<string, AbortSignal>();
  const w = new Worker({ transport: server.transport, logger: silentLogger });
  w.workflow("blocked", async (ctx) => {
    signals.set(ctx.workflowId, ctx.signal);
    await gate.promise;
    return await ctx.step("after-gate", () => 1);
  });
  w.workflow("quick", async () => "done");
  const stop = new AbortController();
  const running = w.run({ signal: stop.signal });
  try {
    const s = await server.stream(0);
    s.welcome(100);
    const first = await heartbeatAfter(s, 0);
    assert.deepEqual([first.held, first.dispatches], [[], 0]);

    s.send({ case: "dispatchWorkflow", value: dispatch("blocked", null, "wf-blocked") });
    s.send({ case: "dispatchWorkflow", value: dispatch("quick", null, "wf-quick") });
    const done = await s.next((m) => m.kind.case === "completeWorkflow", 0, "completion");
    // Still held while its completion waits for an answer.
    const both = await heartbeatAfter(s, done.at);
    assert.deepEqual([both.held, both.dispatches], [["wf-blocked", "wf-quick"], 2]);

    s.reply(done.m.requestId, { case: "workflowCompleted", value: create(WorkflowCompletedSchema, { status: WorkflowStatus.SUCCESS }) });
    const credit = await s.next((m) => m.kind.case === "credit" && m.kind.value.workflows === 1, done.at, "credit back");
    const one = await heartbeatAfter(s, credit.at);
    assert.deepEqual([one.held, one.dispatches], [["wf-blocked"], 2]);

    // Lost on purpose: nothing is sent for it, not even its credit; only the held list tells.
    assert.equal(w.loseRunSilently("wf-blocked"), true);
    assert.equal(w.loseRunSilently("wf-blocked"), false);
    const lostAt = s.received.length;
    const none = await heartbeatAfter(s, lostAt);
    assert.deepEqual([none.held, none.dispatches], [[], 2]);
    assert.ok(signals.get("wf-blocked")?.aborted, "the lost run was stopped");
    gate.resolve();
    await heartbeatAfter(s, none.at + 1);
    assert.deepEqual(
      s.received.slice(lostAt).map((m) => m.kind.case).filter((k) => k !== "heartbeat"),
      [],
      "nothing but heartbeats after the run was lost",
    );

    // A new stream counts from zero.
    s.end();
    const s2 = await server.stream(1);
    s2.welcome(100);
    const fresh = await heartbeatAfter(s2, 0);
    assert.deepEqual([fresh.held, fresh.dispatches], [[], 0]);
  } finally {
    stop.abort();
    await running;
  }
});

test("a broken stream drops every run it held", async () => {
  const server = new FakeServer();
  const started = deferred<AbortSignal>();
  const w = new Worker({ transport: server.transport, logger: silentLogger });
  w.workflow("busy", async (ctx) => {
    // A step that goes on whatever happens: the drop must not wait for it.
    await ctx.step("long", () => {
      started.resolve(ctx.signal);
      return new Promise(() => {});
    });
  });
  const stop = new AbortController();
  const running = w.run({ signal: stop.signal });
  try {
    const s = await server.stream(0);
    s.welcome(100);
    s.send({ case: "dispatchWorkflow", value: dispatch("busy", null, "wf-busy") });
    const signal = await started.promise;
    s.end();
    const s2 = await server.stream(1);
    assert.ok(signal.aborted && signal.reason instanceof DisconnectedError);
    s2.welcome(100);
    const hb = await heartbeatAfter(s2, 0);
    assert.deepEqual([hb.held, hb.dispatches], [[], 0]);
  } finally {
    stop.abort();
    await running;
  }
});
