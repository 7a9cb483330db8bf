// The client against a real server: starts and their options, reads, lists, cancel/resume,
// messages, events, queues, schedules and the errors a program matches on.

import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import { Code, RpcError, type Client } from "../src/index.js";
import { startServer, type TestServer } from "./harness.js";

let server: TestServer;
let client: Client;

before(async () => {
  server = await startServer();
  client = server.client;
  // Starts need a worker that registered the name; this one takes nothing (its queue is idle).
  await server.worker({ queues: ["parked-lane"] }, (w) => w.workflow("noop", async () => null));
  await client.queues.create("idle");
});
after(() => server.stop());

function rejectsWith(reason: string) {
  return (e: unknown) => e instanceof RpcError && e.reason === reason;
}

test("start is idempotent by id and carries every option", async () => {
  const first = await client.start("noop", { a: 1 }, {
    workflowId: "opts-1",
    queue: "idle",
    appVersion: "v7",
    workflowTimeoutMs: 3_600_000,
    priority: 5,
    partitionKey: "tenant-a",
  });
  assert.equal(first.created, true);
  const w = first.workflow;
  assert.deepEqual(
    [w.workflowId, w.workflowName, w.status, w.queue, w.appVersion, w.priority, w.partitionKey],
    ["opts-1", "noop", "ENQUEUED", "idle", "v7", 5, "tenant-a"],
  );
  assert.deepEqual(w.input, { a: 1 });
  assert.ok(w.deadline && w.deadline.getTime() > Date.now() + 3_500_000);
  const again = await client.start("noop", { a: 2 }, { workflowId: "opts-1", queue: "idle" });
  assert.equal(again.created, false);
  assert.deepEqual(again.workflow.input, { a: 1 });
  assert.deepEqual((await client.get("opts-1")).input, { a: 1 });
});

test("dedup ids reject a second start, or return the holder on request", async () => {
  const holder = await client.start("noop", null, { queue: "idle", dedupId: "d-1" });
  await assert.rejects(client.start("noop", null, { queue: "idle", dedupId: "d-1" }), (e: unknown) => {
    assert.ok(e instanceof RpcError);
    assert.equal(e.reason, "DEDUP_ID_TAKEN");
    assert.equal(e.code, Code.AlreadyExists);
    assert.equal(e.metadata.holder_workflow_id, holder.workflow.workflowId);
    return true;
  });
  const existing = await client.start("noop", null, { queue: "idle", dedupId: "d-1", returnExisting: true });
  assert.equal(existing.created, false);
  assert.equal(existing.workflow.workflowId, holder.workflow.workflowId);
});

test("delayed starts wait as DELAYED and can be moved; debounce collapses starts", async () => {
  const { workflow } = await client.start("noop", null, { queue: "idle", delayMs: 3_600_000 });
  assert.equal(workflow.status, "DELAYED");
  assert.ok(workflow.wakeAt && workflow.wakeAt.getTime() > Date.now() + 3_000_000);
  const moved = await client.delay(workflow.workflowId, 7_200_000);
  assert.ok(moved.wakeAt && moved.wakeAt.getTime() > Date.now() + 7_000_000);
  const a = await client.start("noop", { n: 1 }, { queue: "idle", delayMs: 60_000, debounceKey: "k" });
  const b = await client.start("noop", { n: 2 }, { queue: "idle", delayMs: 60_000, debounceKey: "k", debounceMaxDelayMs: 600_000 });
  assert.equal(b.workflow.workflowId, a.workflow.workflowId);
  assert.deepEqual((await client.get(a.workflow.workflowId)).input, { n: 2 });
});

test("list filters and pages; listAll iterates every page", async () => {
  for (let i = 0; i < 5; i++) await client.start("noop", i, { queue: "idle", workflowId: `page-${i}` });
  const first = await client.list({ queue: "idle", pageSize: 2, statuses: ["ENQUEUED"] });
  assert.equal(first.workflows.length, 2);
  assert.ok(first.nextPageToken);
  const second = await client.list({ queue: "idle", pageSize: 2, statuses: ["ENQUEUED"], pageToken: first.nextPageToken });
  assert.equal(second.workflows.length, 2);
  assert.notEqual(second.workflows[0]!.workflowId, first.workflows[0]!.workflowId);
  const all: string[] = [];
  for await (const w of client.listAll({ queue: "idle", pageSize: 2, statuses: ["ENQUEUED"] })) all.push(w.workflowId);
  for (let i = 0; i < 5; i++) assert.ok(all.includes(`page-${i}`));
  const none = await client.list({ workflowName: "no-such-workflow" });
  assert.deepEqual(none.workflows, []);
  assert.equal(none.nextPageToken, undefined);
});

test("cancel and resume", async () => {
  await client.start("noop", null, { queue: "idle", workflowId: "cr-1" });
  const cancelled = await client.cancel("cr-1", { cascade: true });
  assert.equal(cancelled.status, "CANCELLED");
  assert.equal((await client.await("cr-1", { timeoutMs: 5000 })).status, "CANCELLED");
  await assert.rejects(client.result("cr-1", { timeoutMs: 5000 }), { name: "WorkflowFailedError", status: "CANCELLED" });
  const resumed = await client.resume("cr-1");
  assert.equal(resumed.status, "ENQUEUED");
});

test("messages are listed with idempotent sends; events read as undefined when not set", async () => {
  await client.start("noop", null, { queue: "idle", workflowId: "msg-1" });
  const a = await client.send("msg-1", { hi: 1 }, { topic: "t", idempotencyKey: "k1" });
  const b = await client.send("msg-1", { hi: 1 }, { topic: "t", idempotencyKey: "k1" });
  assert.equal(a.duplicate, false);
  assert.equal(b.duplicate, true);
  assert.equal(b.messageId, a.messageId);
  const messages = await client.messages("msg-1");
  assert.equal(messages.length, 1);
  assert.deepEqual([messages[0]!.topic, messages[0]!.payload, messages[0]!.consumed], ["t", { hi: 1 }, false]);
  assert.equal(await client.getEvent("msg-1", "nope"), undefined);
  assert.equal(await client.getEvent("msg-1", "nope", { waitMs: 100 }), undefined);
  assert.deepEqual(await client.events("msg-1"), []);
});

test("errors carry the server's stable reason", async () => {
  await assert.rejects(client.get("does-not-exist"), rejectsWith("WORKFLOW_NOT_FOUND"));
  await assert.rejects(client.send("does-not-exist", 1), (e: unknown) => e instanceof RpcError && e.code === Code.NotFound);
  await assert.rejects(client.start("noop", null, { queue: "no-such-queue" }), rejectsWith("QUEUE_NOT_FOUND"));
  await assert.rejects(client.await("msg-1", { timeoutMs: 200 }), (e: unknown) => e instanceof RpcError && e.code === Code.DeadlineExceeded);
});

test("queues: create, update, get, list, delete", async () => {
  const q = await client.queues.create("limited", { workerConcurrency: 2, rateLimit: { maxStarts: 10, periodMs: 60_000 } });
  assert.deepEqual(q.limits, { workerConcurrency: 2, rateLimit: { maxStarts: 10, periodMs: 60_000 } });
  await assert.rejects(client.queues.create("limited"), rejectsWith("QUEUE_EXISTS"));
  const updated = await client.queues.update("limited", { workerConcurrency: null, globalConcurrency: 4, partitionConcurrency: 1 });
  assert.deepEqual(updated.limits, { globalConcurrency: 4, rateLimit: { maxStarts: 10, periodMs: 60_000 }, partitionConcurrency: 1 });
  assert.deepEqual((await client.queues.get("limited")).limits, updated.limits);
  const names = (await client.queues.list()).map((x) => x.name);
  assert.ok(names.includes("default") && names.includes("limited"));
  await client.queues.delete("limited");
  await assert.rejects(client.queues.get("limited"), rejectsWith("QUEUE_NOT_FOUND"));
  await assert.rejects(client.queues.delete("default"), rejectsWith("QUEUE_PROTECTED"));
});

test("schedules: create, pause, trigger, update, delete", async () => {
  const s = await client.schedules.create({ name: "nightly", cron: "0 0 3 * * *", timezone: "Europe/Berlin", workflowName: "noop", input: { x: 1 }, queue: "idle" });
  assert.equal(s.timezone, "Europe/Berlin");
  assert.ok(s.nextFireTime);
  assert.equal((await client.schedules.pause("nightly")).paused, true);
  const t = await client.schedules.trigger("nightly", { requestId: "r1" });
  assert.equal(t.created, true);
  assert.deepEqual(t.workflow.input, { x: 1 });
  assert.equal((await client.schedules.trigger("nightly", { requestId: "r1" })).created, false);
  assert.equal((await client.schedules.update("nightly", { cron: "0 0 4 * * *" })).cron, "0 0 4 * * *");
  assert.equal((await client.schedules.resume("nightly")).paused, false);
  assert.deepEqual((await client.schedules.list()).map((x) => x.name), ["nightly"]);
  await client.schedules.delete("nightly");
  await assert.rejects(client.schedules.get("nightly"), rejectsWith("SCHEDULE_NOT_FOUND"));
});
