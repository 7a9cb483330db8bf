// The end and the start of a workflow's life against a real server, with real workers (the
// TypeScript counterpart of integration-tests/tests/lifecycle.rs): client.delete removes finished
// workflows (one, or a tree with `cascade`) with what was recorded for them, and refuses what
// has not finished; a start with `allowUnregistered` enqueues a name no worker has registered
// yet, which runs once a worker that registers it connects.

import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import { Code, RpcError, type Client } from "../src/index.js";
import { startServer, waitFor, type TestServer } from "./harness.js";

let server: TestServer;
let client: Client;

const PATIENCE = { timeoutMs: 30_000 };

before(async () => {
  server = await startServer();
  client = server.client;
  await server.worker({ parkAfterMs: null }, (w) =>
    w
      .workflow("echo", async (ctx, x: unknown) => ctx.step("echo", () => x))
      // Starts an echo child per input, awaits them all, then (with `hold`) waits for "go";
      // returns the children's ids.
      .workflow("family", async (ctx, o: { children: number[]; hold?: boolean }) => {
        const ids = await Promise.all(o.children.map((x) => ctx.startChild("echo", x)));
        for (const id of ids) await ctx.awaitChild(id);
        if (o.hold) await ctx.recv("go");
        return ids;
      })
      .workflow("inbox", async (ctx, o: { topic: string; timeoutMs: number }) => ctx.recv(o.topic, { timeoutMs: o.timeoutMs })),
  );
});
after(() => server?.stop());

/** Whether `e` is the server's refusal with this code and reason (for assert.rejects). */
function refused(code: Code, reason: string) {
  return (e: unknown) => {
    assert.ok(e instanceof RpcError, `an RpcError, not ${String(e)}`);
    assert.deepEqual([Code[e.code], e.reason], [Code[code], reason]);
    return true;
  };
}

test("finished workflows are deleted with their records, a tree with cascade, the asked-for id first", async () => {
  await client.start("family", { children: [1, 2] }, { workflowId: "fam" });
  const children = await client.result<string[]>("fam", PATIENCE);
  assert.equal(children.length, 2);
  const listed = (await client.list({ workflowName: "echo" })).workflows.filter((w) => w.parentWorkflowId === "fam");
  assert.deepEqual(listed.map((w) => w.workflowId).sort(), [...children].sort());
  const [first, second] = children as [string, string];

  // A child alone; then the parent with what is left of its tree.
  assert.deepEqual(await client.delete(first), [first]);
  assert.deepEqual(await client.delete("fam", { cascade: true }), ["fam", second]);
  for (const id of ["fam", first, second]) {
    await assert.rejects(client.get(id), refused(Code.NotFound, "WORKFLOW_NOT_FOUND"), id);
    await assert.rejects(client.steps(id), refused(Code.NotFound, "WORKFLOW_NOT_FOUND"), id);
  }
  // Deleting it again (or anything that never was) finds nothing.
  await assert.rejects(client.delete("fam"), refused(Code.NotFound, "WORKFLOW_NOT_FOUND"));
  await assert.rejects(client.delete("never-was", { cascade: true }), refused(Code.NotFound, "WORKFLOW_NOT_FOUND"));
});

test("a workflow that has not finished is refused, and so is a finished child of one; once finished they delete", async () => {
  await client.start("family", { children: [3], hold: true }, { workflowId: "holder" });
  // Its child finishes while the parent waits for "go".
  const [child] = await waitFor(async () => {
    const ws = (await client.list({ workflowName: "echo" })).workflows.filter((w) => w.parentWorkflowId === "holder");
    return ws.length === 1 && ws[0]!.status === "SUCCESS" ? (ws.map((w) => w.workflowId) as [string]) : undefined;
  }, "holder's child to finish");
  await assert.rejects(client.delete("holder", { cascade: true }), refused(Code.FailedPrecondition, "WORKFLOW_NOT_FINISHED"));
  await assert.rejects(client.delete(child), refused(Code.FailedPrecondition, "PARENT_NOT_FINISHED"));
  assert.equal((await client.get(child)).status, "SUCCESS", "a refused delete touches nothing");
  await client.send("holder", null, { topic: "go" });
  assert.deepEqual(await client.result("holder", PATIENCE), [child]);
  assert.deepEqual(await client.delete("holder", { cascade: true }), ["holder", child]);
});

test("a workflow waiting on a recv is refused until it is cancelled, then deleted with its inbox", async () => {
  await client.start("inbox", { topic: "t", timeoutMs: 600_000 }, { workflowId: "waiting" });
  await client.send("waiting", "unread", { topic: "other" });
  await assert.rejects(client.delete("waiting"), refused(Code.FailedPrecondition, "WORKFLOW_NOT_FINISHED"));
  assert.equal((await client.messages("waiting")).length, 1, "a refused delete touches nothing");
  await client.cancel("waiting");
  assert.deepEqual(await client.delete("waiting"), ["waiting"]);
  await assert.rejects(client.get("waiting"), refused(Code.NotFound, "WORKFLOW_NOT_FOUND"));
  await assert.rejects(client.messages("waiting"), refused(Code.NotFound, "WORKFLOW_NOT_FOUND"));
});

test("a workflow enqueued before any worker registers its name runs once one does", async () => {
  // The worker serving this server has not registered "late": refused unless allowed.
  await assert.rejects(client.start("late", { n: 7 }, { workflowId: "late-refused" }), refused(Code.NotFound, "WORKFLOW_NAME_UNKNOWN"));
  await assert.rejects(client.get("late-refused"), refused(Code.NotFound, "WORKFLOW_NOT_FOUND"));
  const early = await client.start("late", { n: 7 }, { workflowId: "early", allowUnregistered: true });
  assert.deepEqual([early.created, early.nameRegistered, early.workflow.status], [true, false, "ENQUEUED"]);
  const again = await client.start("late", { n: 7 }, { workflowId: "early", allowUnregistered: true });
  assert.equal(again.created, false, "a repeated start is the same start");

  // The new worker arrives (a rolling deploy) and takes it.
  await server.worker({}, (w) => w.workflow("late", async (ctx, x: unknown) => ctx.step("took", () => x)));
  assert.deepEqual(await client.result("early", PATIENCE), { n: 7 });
  const later = await client.start("late", 2, { workflowId: "later", allowUnregistered: true });
  assert.equal(later.nameRegistered, true);
  assert.equal(await client.result("later", PATIENCE), 2);
  const plain = await client.start("late", 3);
  assert.deepEqual([plain.created, plain.nameRegistered], [true, true]);
});
