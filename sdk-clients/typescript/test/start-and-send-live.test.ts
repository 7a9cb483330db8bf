// client.startAndSend against a real server, with a real worker: the first call starts the
// workflow with the message already in its inbox, a retry with the same id and key neither
// starts nor delivers again, the workflow reads the message on its first run, and what the
// server refuses (a debounced start, another name under the id, a finished workflow) starts and
// sends nothing.

import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import { Code, RpcError, type Client } from "../src/index.js";
import { startServer, type TestServer } from "./harness.js";

let server: TestServer;
let client: Client;

const PATIENCE = { timeoutMs: 30_000 };

before(async () => {
  server = await startServer();
  client = server.client;
  // The worker serves the default queue; a workflow started on "idle" (no worker serves it)
  // stays ENQUEUED with its message unread.
  await server.worker({ parkAfterMs: null }, (w) =>
    w
      .workflow("inbox", async (ctx, o: { topic: string; timeoutMs: number }) => ctx.recv(o.topic, { timeoutMs: o.timeoutMs }))
      .workflow("other", async () => null),
  );
  await client.queues.create("idle");
});
after(() => server?.stop());

/** Whether `e` is the server's refusal with this code (and reason, when given), for assert.rejects. */
function refused(code: Code, reason?: string) {
  return (e: unknown) => {
    assert.ok(e instanceof RpcError, `an RpcError, not ${String(e)}`);
    assert.equal(Code[e.code], Code[code]);
    if (reason !== undefined) assert.equal(e.reason, reason);
    return true;
  };
}

test("the first call starts the workflow with the message in its inbox", async () => {
  const r = await client.startAndSend("inbox", { topic: "orders", timeoutMs: 0 }, {
    workflowId: "cust-1",
    queue: "idle",
    tags: { tenant: "a" },
    topic: "orders",
    message: { sku: "a-1" },
    idempotencyKey: "evt-1",
  });
  assert.deepEqual([r.started.created, r.started.nameRegistered, r.duplicate], [true, true, false]);
  assert.ok(r.messageId);
  const w = r.started.workflow;
  assert.deepEqual([w.workflowId, w.workflowName, w.status, w.queue, w.tags], ["cust-1", "inbox", "ENQUEUED", "idle", { tenant: "a" }]);
  assert.deepEqual(w.input, { topic: "orders", timeoutMs: 0 });
  const messages = await client.messages("cust-1");
  assert.deepEqual(
    messages.map((m) => [m.messageId, m.topic, m.payload, m.idempotencyKey, m.consumed]),
    [[r.messageId, "orders", { sku: "a-1" }, "evt-1", false]],
  );
});

test("a retry with the same id and key neither starts nor delivers again; another key is delivered", async () => {
  const options = { workflowId: "cust-2", queue: "idle", topic: "orders", message: { sku: "b-1" }, idempotencyKey: "evt-1" };
  const first = await client.startAndSend("inbox", { topic: "orders", timeoutMs: 0 }, options);
  const retry = await client.startAndSend("inbox", { topic: "orders", timeoutMs: 0 }, options);
  assert.deepEqual([first.started.created, first.duplicate], [true, false]);
  assert.deepEqual([retry.started.created, retry.duplicate], [false, true]);
  assert.equal(retry.messageId, first.messageId);
  assert.equal(retry.started.workflow.workflowId, "cust-2");
  assert.deepEqual((await client.messages("cust-2")).map((m) => m.messageId), [first.messageId]);

  // The next event for the same workflow: no second start, a second message.
  const next = await client.startAndSend("inbox", null, { ...options, message: { sku: "b-2" }, idempotencyKey: "evt-2" });
  assert.deepEqual([next.started.created, next.duplicate], [false, false]);
  assert.notEqual(next.messageId, first.messageId);
  assert.deepEqual((await client.messages("cust-2")).map((m) => m.payload), [{ sku: "b-1" }, { sku: "b-2" }]);
  // The workflow kept the first call's input.
  assert.deepEqual((await client.get("cust-2")).input, { topic: "orders", timeoutMs: 0 });
});

test("the workflow finds the message on its first run; once it has ended it takes no more", async () => {
  // recv with no time to wait: it gets the message only if the message was in before it ran.
  const r = await client.startAndSend("inbox", { topic: "orders", timeoutMs: 0 }, {
    workflowId: "cust-3",
    topic: "orders",
    message: { sku: "c-1" },
    idempotencyKey: "evt-1",
  });
  assert.equal(r.started.created, true);
  assert.deepEqual(await client.result("cust-3", PATIENCE), { sku: "c-1" });
  const [m, ...rest] = await client.messages("cust-3");
  assert.deepEqual([m?.messageId, m?.consumed, rest.length], [r.messageId, true, 0]);

  await assert.rejects(
    client.startAndSend("inbox", null, { workflowId: "cust-3", topic: "orders", message: { sku: "c-2" }, idempotencyKey: "evt-2" }),
    refused(Code.FailedPrecondition, "WORKFLOW_NOT_RUNNING"),
  );
  assert.equal((await client.messages("cust-3")).length, 1);
});

test("what the server refuses starts nothing and sends nothing", async () => {
  // A debounced start could be collapsed onto another and never run as itself.
  await assert.rejects(
    client.startAndSend("inbox", null, { workflowId: "debounced", queue: "idle", delayMs: 60_000, debounceKey: "d", message: 1 }),
    refused(Code.InvalidArgument),
  );
  await assert.rejects(client.get("debounced"), refused(Code.NotFound, "WORKFLOW_NOT_FOUND"));

  // Another workflow name under an id already taken.
  await client.startAndSend("inbox", null, { workflowId: "cust-4", queue: "idle", message: 1, idempotencyKey: "evt-1" });
  await assert.rejects(
    client.startAndSend("other", null, { workflowId: "cust-4", queue: "idle", message: 2, idempotencyKey: "evt-2" }),
    refused(Code.AlreadyExists, "WORKFLOW_ID_CONFLICT"),
  );
  assert.deepEqual((await client.messages("cust-4")).map((m) => m.payload), [1]);
});
