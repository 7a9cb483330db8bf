// Tags, re-pinning and bulk operations against a real server, with a real worker (the
// TypeScript counterpart of integration-tests/tests/bulk.rs): tags given at the start are read
// back, inherited by children (a child start's own replacing or adding keys) and filter a listing
// (all of them must match), as do the parent, worker and version; workflows pinned to
// a retired version are counted, refused a version nobody serves, and re-pinned to the live
// worker's version one by hand and the rest by filter, after which they succeed; waiting
// workflows are cancelled, resumed and deleted by tag in batches, a repeat changing nothing.

import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import { Code, RpcError, WorkflowFailedError, isTerminal, type Client, type WorkflowFilter, type WorkflowStatus } from "../src/index.js";
import { startServer, type TestServer } from "./harness.js";

let server: TestServer;
let client: Client;

const PATIENCE = { timeoutMs: 30_000 };
/** The live worker's application version. */
const LIVE = "bulk-live-1";

before(async () => {
  server = await startServer();
  client = server.client;
  await server.worker({ appVersion: LIVE, parkAfterMs: null }, (w) =>
    w
      .workflow("echo", async (ctx, x: unknown) => ctx.step("echo", () => x))
      // Starts an echo child per input and returns their ids once they have all finished.
      .workflow("family", async (ctx, o: { children: number[] }) => {
        const ids = await Promise.all(o.children.map((x) => ctx.startChild("echo", x)));
        for (const id of ids) await ctx.awaitChild(id);
        return ids;
      })
      // A plain child, then one with `own` tags over the inherited ones; returns their outputs.
      .workflow("tagged-family", async (ctx, own: Record<string, string>) => {
        const a = await ctx.startChild("echo", 1, { workflowId: `${ctx.workflowId}-a` });
        const b = await ctx.startChild("echo", 2, { workflowId: `${ctx.workflowId}-b`, tags: own });
        return [await ctx.awaitChild(a), await ctx.awaitChild(b)];
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

/** The ids of the workflows carrying `tags` (and in `status`, when given), sorted. */
async function tagged(tags: Record<string, string>, status?: WorkflowStatus): Promise<string[]> {
  const ids: string[] = [];
  for await (const w of client.listAll({ tags, statuses: status ? [status] : [], pageSize: 1000 })) ids.push(w.workflowId);
  return ids.sort();
}

test("tags given at the start are read back, inherited by children, and filter a listing (all of them)", async () => {
  const tags = { team: "payments", run: "r1" };
  const started = await client.start("family", { children: [1, 2] }, { workflowId: "fam", tags });
  assert.deepEqual(started.workflow.tags, tags);
  const children = await client.result<string[]>("fam", PATIENCE);
  assert.equal(children.length, 2);
  const fam = await client.get("fam");
  assert.deepEqual(fam.tags, tags);

  const tree = await tagged({ team: "payments" });
  assert.deepEqual(tree, ["fam", ...children].sort(), "the parent and both children");
  for (const id of children) {
    const w = await client.get(id);
    assert.deepEqual([w.parentWorkflowId, w.tags], ["fam", tags], "inherited");
  }
  assert.deepEqual(await tagged({ team: "payments", run: "r1" }), tree);
  assert.deepEqual(await tagged({ team: "payments", run: "r2" }), [], "every tag must match");
  const page = await client.list({ tags: { team: "payments" }, workflowName: "family" });
  assert.deepEqual(
    page.workflows.map((w) => w.workflowId),
    ["fam"],
    "with the other filters",
  );

  // Untagged: {} on the way back.
  await client.start("echo", 0, { workflowId: "plain" });
  assert.deepEqual((await client.get("plain")).tags, {});

  // Bounds: a key with `=` or more than 16 tags is refused, and nothing is started.
  await assert.rejects(client.start("echo", 1, { workflowId: "bad-tag", tags: { "a=b": "c" } }), refused(Code.InvalidArgument, "INVALID_ARGUMENT"));
  const many = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, "v"]));
  await assert.rejects(client.start("echo", 1, { workflowId: "many-tags", tags: many }), (e: unknown) => {
    assert.ok(e instanceof RpcError && e.code === Code.InvalidArgument && e.message.includes("at most 16"), String(e));
    return true;
  });
  await assert.rejects(client.get("bad-tag"), refused(Code.NotFound, "WORKFLOW_NOT_FOUND"));
});

/** The ids of the workflows `filter` matches, sorted. */
async function listed(filter: WorkflowFilter): Promise<string[]> {
  const ids: string[] = [];
  for await (const w of client.listAll({ ...filter, pageSize: 1000 })) ids.push(w.workflowId);
  return ids.sort();
}

test("a child start's own tags override the inherited ones, and a listing filters by parent, worker and version", async () => {
  const tags = { team: "a", tier: "gold" };
  await client.start("tagged-family", { tier: "silver", extra: "x" }, { workflowId: "tf", tags });
  assert.deepEqual(await client.result("tf", PATIENCE), [1, 2]);
  const plain = await client.get("tf-a");
  assert.deepEqual(plain.tags, tags, "inherited as they are");
  assert.deepEqual((await client.get("tf-b")).tags, { team: "a", tier: "silver", extra: "x" }, "replaced and added");

  const children = ["tf-a", "tf-b"];
  assert.deepEqual(await listed({ parentWorkflowId: "tf" }), children);
  assert.deepEqual(await listed({ tags: { tier: "silver" } }), ["tf-b"]);
  // The worker and version filters narrow the parent's children as the server has them.
  assert.ok(plain.workerId, "a finished child keeps the worker that ran it");
  assert.deepEqual(await listed({ parentWorkflowId: "tf", workerId: plain.workerId }), children);
  assert.deepEqual(await listed({ parentWorkflowId: "tf", workerId: "no-such-worker" }), []);
  assert.deepEqual(await listed({ parentWorkflowId: "tf", appVersion: LIVE }), children);
  assert.deepEqual(await listed({ parentWorkflowId: "tf", appVersion: "no-such-version" }), []);

  // A bad key is refused by the server: startChild throws the refusal, which uncaught fails the
  // parent with its reason; the child is not started.
  await client.start("tagged-family", { "a=b": "x" }, { workflowId: "tf-bad", tags });
  await assert.rejects(client.result("tf-bad", PATIENCE), (e: unknown) => {
    assert.ok(e instanceof WorkflowFailedError, String(e));
    assert.deepEqual([e.status, e.kind], ["ERROR", "INVALID_ARGUMENT"]);
    assert.match(e.message, /tag key/);
    return true;
  });
  assert.deepEqual(await listed({ parentWorkflowId: "tf-bad" }), ["tf-bad-a"], "only the plain child");
});

test("workflows pinned to a retired version are counted, refused a version nobody serves, and re-pinned to the live one", async () => {
  // Pinned to a version whose workers are gone: they wait ENQUEUED.
  for (let i = 0; i < 6; i++) {
    await client.start("echo", i, { workflowId: `old-${i}`, appVersion: "retired", tags: { batch: "stranded" } });
  }
  const stranded: WorkflowFilter = { appVersion: "retired" };
  assert.equal(await client.countMatching(stranded), 6);

  // A version no worker serves is refused unless asked; the refusal changes nothing.
  await assert.rejects(client.setVersion("old-0", "nobody-serves"), refused(Code.FailedPrecondition, "VERSION_NOT_SERVED"));
  assert.deepEqual([(await client.get("old-0")).appVersion, (await client.get("old-0")).status], ["retired", "ENQUEUED"]);
  const bulkRefused = await client.bulk(stranded, { setVersion: "nobody-serves" }, { batchSize: 4 });
  assert.deepEqual(bulkRefused, { matched: 6, applied: 0, skipped: { VERSION_NOT_SERVED: 6 } });
  assert.equal(await client.countMatching(stranded), 6, "still all stranded");

  // One by hand: it runs on the live worker.
  const moved = await client.setVersion("old-0", LIVE);
  assert.equal(moved.appVersion, LIVE);
  const done = await client.await("old-0", PATIENCE);
  assert.deepEqual([done.status, done.appVersion, done.output], ["SUCCESS", LIVE, 0]);
  await assert.rejects(client.setVersion("old-0", LIVE, { allowUnserved: true }), refused(Code.FailedPrecondition, "WORKFLOW_FINISHED"));

  // The rest by filter: a dry run first, then moved two at a time.
  assert.equal(await client.countMatching(stranded), 5);
  const all = await client.bulk(stranded, { setVersion: LIVE }, { batchSize: 2 });
  assert.deepEqual(all, { matched: 5, applied: 5, skipped: {} });
  for (let i = 1; i < 6; i++) {
    const w = await client.await(`old-${i}`, PATIENCE);
    assert.deepEqual([w.status, w.appVersion, w.output], ["SUCCESS", LIVE, i]);
  }
  // Again: nothing is pinned there any more.
  assert.equal(await client.countMatching(stranded), 0);
  assert.deepEqual(await client.bulk(stranded, { setVersion: LIVE }, { batchSize: 2 }), { matched: 0, applied: 0, skipped: {} });
  // Re-pinning the finished ones by tag: each skipped as finished.
  const finished = await client.bulk({ tags: { batch: "stranded" } }, { setVersion: "elsewhere", allowUnserved: true }, { batchSize: 4 });
  assert.deepEqual(finished, { matched: 6, applied: 0, skipped: { WORKFLOW_FINISHED: 6 } });
});

test("waiting workflows are cancelled, resumed and deleted by tag in batches, and a repeat changes nothing", async () => {
  const waiting = { topic: "t", timeoutMs: 600_000 };
  for (let i = 0; i < 5; i++) await client.start("inbox", waiting, { workflowId: `n-${i}`, tags: { job: "nightly" } });
  await client.start("inbox", waiting, { workflowId: "other" });
  const nightly: WorkflowFilter = { tags: { job: "nightly" } };
  const ids = ["n-0", "n-1", "n-2", "n-3", "n-4"];
  assert.equal(await client.countMatching(nightly), 5);

  // Deleting what has not finished: every one skipped, none touched.
  assert.deepEqual(await client.bulk(nightly, "delete", { batchSize: 2 }), { matched: 5, applied: 0, skipped: { WORKFLOW_NOT_FINISHED: 5 } });

  // Cancel in batches of two (three calls, followed by hand); the untagged one is left alone.
  let batches = 0;
  let pageToken: string | undefined;
  let cancelled = 0;
  do {
    const b = await client.bulkBatch(nightly, "cancel", { batchSize: 2, pageToken });
    batches += 1;
    cancelled += b.applied;
    pageToken = b.nextPageToken;
  } while (pageToken);
  assert.deepEqual([batches, cancelled], [3, 5]);
  assert.deepEqual(await tagged({ job: "nightly" }, "CANCELLED"), ids);
  assert.equal(isTerminal((await client.get("other")).status), false, "outside the filter: untouched");
  // Twice is safe: nothing is cancelled again.
  assert.deepEqual(await client.bulk(nightly, "cancel", { batchSize: 2 }), { matched: 5, applied: 0, skipped: { WORKFLOW_FINISHED: 5 } });

  // Resume them: they wait again, and a message finishes one.
  assert.deepEqual(await client.bulk(nightly, "resume"), { matched: 5, applied: 5, skipped: {} });
  await client.send("n-0", "go", { topic: "t" });
  assert.equal(await client.result("n-0", PATIENCE), "go");

  // Delete the finished one by filter; the four still waiting are skipped.
  assert.deepEqual(await client.bulk(nightly, "delete", { batchSize: 3 }), { matched: 5, applied: 1, skipped: { WORKFLOW_NOT_FINISHED: 4 } });
  await assert.rejects(client.get("n-0"), refused(Code.NotFound, "WORKFLOW_NOT_FOUND"));
  // Cancel and delete the rest by status and tag.
  assert.deepEqual(await client.bulk(nightly, "cancel"), { matched: 4, applied: 4, skipped: {} });
  assert.deepEqual(await client.bulk({ ...nightly, statuses: ["CANCELLED"] }, "delete"), { matched: 4, applied: 4, skipped: {} });
  assert.equal(await client.countMatching(nightly), 0);
  assert.deepEqual(await tagged({ job: "nightly" }), []);
  assert.equal(isTerminal((await client.get("other")).status), false, "outside the filter: untouched");

  // A bad filter or batch size is refused.
  await assert.rejects(client.bulk({ tags: { "": "x" } }, "cancel", { batchSize: 10 }), refused(Code.InvalidArgument, "INVALID_ARGUMENT"));
  await assert.rejects(client.bulk(nightly, "cancel", { batchSize: -1 }), refused(Code.InvalidArgument, "INVALID_ARGUMENT"));
});
