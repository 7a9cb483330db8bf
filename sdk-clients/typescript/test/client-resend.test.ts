// The client makes calls that are safe to repeat again while the server answers UNAVAILABLE,
// and only those (no server: Connect's in-process router stands in for it).

import { test } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError, createRouterTransport } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { durationMs } from "@bufbuild/protobuf/wkt";
import { WorkflowService, type StartAndSendRequest, type UpdateWorkflowRequest } from "../src/gen/waymark/v1/workflow_pb.js";
import { WorkflowSchema, WorkflowStatus } from "../src/gen/waymark/v1/types_pb.js";
import { Client, RpcError } from "../src/index.js";
import { fromPayload, toPayload } from "../src/payload.js";

const down = () => new ConnectError("the database is restarting", Code.Unavailable);

/** A client on a fake WorkflowService that refuses the first `refusals` calls of each method. */
function clientWith(refusals: number, resendForMs = 60_000) {
  const calls = new Map<string, unknown[]>();
  const seen = (method: string, req: unknown) => {
    const list = calls.get(method) ?? [];
    list.push(req);
    calls.set(method, list);
    if (list.length <= refusals) throw down();
  };
  const started = new Set<string>();
  const transport = createRouterTransport(({ service }) => {
    service(WorkflowService, {
      getWorkflow(req) {
        seen("get", req);
        return { workflow: create(WorkflowSchema, { workflowId: req.workflowId, status: WorkflowStatus.PENDING }) };
      },
      startWorkflow(req) {
        // The write goes through before the answer is lost: the resend finds the workflow.
        const created = !started.has(req.workflowId);
        started.add(req.workflowId);
        seen("start", req);
        return { workflow: create(WorkflowSchema, { workflowId: req.workflowId, workflowName: req.workflowName }), created };
      },
      forkWorkflow(req) {
        seen("fork", req);
        return {
          workflow: create(WorkflowSchema, {
            workflowId: req.newWorkflowId,
            status: WorkflowStatus.ENQUEUED,
            appVersion: req.appVersion,
            queueName: req.queueName,
            forkedFromWorkflowId: req.workflowId,
            forkedFromStep: req.fromStep ?? 0,
          }),
        };
      },
      startAndSend(req) {
        // As a start: the write goes through before the answer is lost.
        const id = req.start?.workflowId ?? "";
        const created = !started.has(id);
        started.add(id);
        seen("startAndSend", req);
        return {
          workflow: create(WorkflowSchema, { workflowId: id, workflowName: req.start?.workflowName ?? "" }),
          created,
          messageId: "m-1",
          duplicate: !created,
        };
      },
      sendMessage(req) {
        seen("send", req);
        return { messageId: "m-1", duplicate: false };
      },
      updateWorkflow(req) {
        // The update is delivered before the answer is lost; the resend finds it answered.
        seen("update", req);
        return { updateId: req.updateId, result: toPayload({ total: 42 }) };
      },
      async *readStream(req) {
        seen("read", req);
        const from = Number(req.fromOffset);
        for (let offset = from; offset < 4; offset++) {
          yield { offset: BigInt(offset), value: toPayload(offset * 10) };
          // The stream is cut off once in the middle, as a restarting server would.
          if (offset === 1 && calls.get("read")!.length === 1) throw down();
        }
      },
    });
  });
  return { client: new Client({ transport, resendForMs }), calls };
}

test("a read answered UNAVAILABLE twice is made again and succeeds", async () => {
  const { client, calls } = clientWith(2);
  const w = await client.get("wf-1");
  assert.equal(w.workflowId, "wf-1");
  assert.equal(calls.get("get")!.length, 3);
});

test("a start without an id gets one here, so the resend is the same start and reports it created", async () => {
  const { client, calls } = clientWith(1);
  const { workflow, created } = await client.start("checkout", { n: 1 });
  const ids = calls.get("start")!.map((r) => (r as { workflowId: string }).workflowId);
  assert.equal(ids.length, 2);
  assert.ok(ids[0] && ids[0] === ids[1], `both attempts carry one id: ${ids}`);
  assert.match(ids[0]!, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.equal(workflow.workflowId, ids[0]);
  assert.equal(created, true);
});

test("a fork carries its options, and an id made here that stays the same when it is sent again", async () => {
  const { client, calls } = clientWith(1);
  const fork = await client.fork("wf-src", { fromStep: 1, appVersion: "v2", queue: "fixes" });
  const reqs = calls.get("fork")! as { workflowId: string; fromStep?: number; newWorkflowId: string; appVersion: string; queueName: string }[];
  assert.equal(reqs.length, 2);
  for (const r of reqs) {
    assert.equal(r.workflowId, "wf-src");
    assert.equal(r.fromStep, 1);
    assert.equal(r.appVersion, "v2");
    assert.equal(r.queueName, "fixes");
  }
  assert.ok(reqs[0]!.newWorkflowId && reqs[0]!.newWorkflowId === reqs[1]!.newWorkflowId, "both attempts carry one id");
  assert.match(reqs[0]!.newWorkflowId, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.equal(fork.workflowId, reqs[0]!.newWorkflowId);
  assert.equal(fork.status, "ENQUEUED");
  assert.equal(fork.forkedFromWorkflowId, "wf-src");
  assert.equal(fork.forkedFromStep, 1);

  // A chosen id is sent as given; no from step means all of the source's steps.
  const chosen = clientWith(0);
  const f2 = await chosen.client.fork("wf-src", { workflowId: "wf-fork" });
  const r2 = chosen.calls.get("fork")![0] as { fromStep?: number; newWorkflowId: string; appVersion: string; queueName: string };
  assert.equal(r2.newWorkflowId, "wf-fork");
  assert.equal(r2.fromStep, undefined);
  assert.equal(r2.appVersion, "");
  assert.equal(r2.queueName, "");
  assert.equal(f2.workflowId, "wf-fork");
});

test("a send is made again only when the caller gave an idempotency key", async () => {
  const plain = clientWith(1);
  await assert.rejects(plain.client.send("wf-1", "hi"), (e) => e instanceof RpcError && e.code === Code.Unavailable);
  assert.equal(plain.calls.get("send")!.length, 1);

  const keyed = clientWith(1);
  assert.equal((await keyed.client.send("wf-1", "hi", { idempotencyKey: "k-1" })).messageId, "m-1");
  assert.equal(keyed.calls.get("send")!.length, 2);
});

test("a start-and-send is made again only with an idempotency key, as one start under an id made here", async () => {
  const plain = clientWith(1);
  await assert.rejects(plain.client.startAndSend("checkout", null, { message: "hi" }), (e) => e instanceof RpcError && e.code === Code.Unavailable);
  assert.equal(plain.calls.get("startAndSend")!.length, 1);

  const keyed = clientWith(1);
  const r = await keyed.client.startAndSend("checkout", { n: 1 }, { queue: "orders", topic: "t", message: "hi", idempotencyKey: "k-1" });
  const reqs = keyed.calls.get("startAndSend")! as StartAndSendRequest[];
  assert.equal(reqs.length, 2);
  const ids = reqs.map((q) => q.start?.workflowId);
  assert.ok(ids[0] && ids[0] === ids[1], `both attempts carry one id: ${ids}`);
  assert.match(ids[0]!, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  for (const q of reqs) {
    assert.deepEqual([q.start?.workflowName, q.start?.queueName, q.topic, q.idempotencyKey], ["checkout", "orders", "t", "k-1"]);
    assert.deepEqual([fromPayload(q.start?.input), fromPayload(q.message)], [{ n: 1 }, "hi"]);
  }
  // The resend found the workflow and the message its first attempt left: this call started
  // it, and the message it reports as a duplicate is its own.
  assert.equal(r.started.workflow.workflowId, ids[0]);
  assert.deepEqual([r.started.created, r.messageId, r.duplicate], [true, "m-1", true]);
});

test("an update without an id gets one here, so the resend is the same update", async () => {
  const { client, calls } = clientWith(2);
  const answer = await client.updateWorkflow("wf-1", "add", { n: 41 }, { waitMs: 30_000 });
  assert.deepEqual(answer, { total: 42 });
  const reqs = calls.get("update")! as UpdateWorkflowRequest[];
  assert.equal(reqs.length, 3);
  const ids = reqs.map((q) => q.updateId);
  assert.ok(ids.every((id) => id === ids[0]), `every attempt carries one id: ${ids}`);
  assert.match(ids[0]!, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  for (const q of reqs) {
    assert.deepEqual([q.workflowId, q.name, fromPayload(q.args)], ["wf-1", "add", { n: 41 }]);
  }
  // The first attempt asks for the caller's wait; a resend for what is left of it.
  const waits = reqs.map((q) => (q.timeout ? durationMs(q.timeout) : undefined));
  assert.equal(waits[0], 30_000);
  for (const w of waits.slice(1)) assert.ok(w !== undefined && w > 0 && w < 30_000, `a resend waits what is left: ${waits}`);

  // A chosen id is sent as given; no wait leaves it to the server's default.
  const chosen = clientWith(0);
  await chosen.client.updateWorkflow("wf-1", "add", null, { updateId: "u-1" });
  const r = chosen.calls.get("update")![0] as UpdateWorkflowRequest;
  assert.deepEqual([r.updateId, r.timeout, fromPayload(r.args)], ["u-1", undefined, null]);
});

test("past the bound the UNAVAILABLE error comes out", async () => {
  const { client, calls } = clientWith(Infinity, 120);
  await assert.rejects(client.get("wf-1"), (e) => e instanceof RpcError && e.reason === "UNAVAILABLE");
  assert.ok(calls.get("get")!.length >= 2, "made again at least once within the bound");
});

test("the caller's signal ends the resends", async () => {
  const { client, calls } = clientWith(Infinity);
  const ac = new AbortController();
  const pending = client.get("wf-1", { signal: ac.signal });
  // Abort once the first refusal has been answered, whenever that is.
  while (!calls.get("get")) await new Promise((r) => setImmediate(r));
  ac.abort();
  await assert.rejects(pending, (e) => e instanceof RpcError && e.code === Code.Canceled);
});

test("a stream read cut off by UNAVAILABLE opens again after the last value it gave", async () => {
  const { client, calls } = clientWith(0);
  const got: number[] = [];
  for await (const { offset, value } of client.readStream("wf-1", "progress")) {
    assert.equal(value, offset * 10);
    got.push(offset);
  }
  assert.deepEqual(got, [0, 1, 2, 3]);
  assert.deepEqual(
    calls.get("read")!.map((r) => Number((r as { fromOffset: bigint }).fromOffset)),
    [0, 2],
  );
});
