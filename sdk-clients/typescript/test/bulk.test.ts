// Tags, setVersion and bulk operations without a server (Connect's in-process router stands in
// for it): what the requests carry (tags at start and in a listing, the filter, the action, the
// batch size and page token, dry run), how the answers map, that `bulk` follows the page tokens
// to the end summing the batches, and that setVersion and batches are sent again on UNAVAILABLE.

import { test } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError, createRouterTransport } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import {
  WorkflowService,
  type BulkWorkflowsRequest,
  type ListWorkflowsRequest,
  type SetWorkflowVersionRequest,
  type StartWorkflowRequest,
} from "../src/gen/waymark/v1/workflow_pb.js";
import { WorkflowSchema, WorkflowStatus } from "../src/gen/waymark/v1/types_pb.js";
import { Client, RpcError, type BulkAction } from "../src/index.js";

const down = () => new ConnectError("the database is restarting", Code.Unavailable);

/**
 * A client on a fake WorkflowService that records every request. Bulk calls answer three
 * batches (tokens "" → "b2" → "b3" → end); the first `refusals` calls of each method answer
 * UNAVAILABLE.
 */
function fake(refusals = 0, resendForMs = 60_000) {
  const starts: StartWorkflowRequest[] = [];
  const lists: ListWorkflowsRequest[] = [];
  const versions: SetWorkflowVersionRequest[] = [];
  const bulks: BulkWorkflowsRequest[] = [];
  const refuse = <T>(seen: T[], req: T) => {
    seen.push(req);
    if (seen.length <= refusals) throw down();
  };
  const transport = createRouterTransport(({ service }) => {
    service(WorkflowService, {
      startWorkflow(req) {
        refuse(starts, req);
        return { workflow: create(WorkflowSchema, { workflowId: req.workflowId, tags: req.tags }), created: true, nameRegistered: true };
      },
      listWorkflows(req) {
        refuse(lists, req);
        return { workflows: [create(WorkflowSchema, { workflowId: "a", tags: { team: "payments" } }), create(WorkflowSchema, { workflowId: "b" })] };
      },
      setWorkflowVersion(req) {
        refuse(versions, req);
        return { workflow: create(WorkflowSchema, { workflowId: req.workflowId, appVersion: req.appVersion, status: WorkflowStatus.ENQUEUED }) };
      },
      bulkWorkflows(req) {
        refuse(bulks, req);
        if (req.dryRun) return { total: 7n };
        const next: Record<string, string> = { "": "b2", b2: "b3", b3: "" };
        const batch: Record<string, [number, number, Record<string, number>]> = {
          "": [3, 2, { WORKFLOW_FINISHED: 1 }],
          b2: [3, 1, { WORKFLOW_FINISHED: 1, WORKFLOW_NOT_FINISHED: 1 }],
          b3: [1, 0, { WORKFLOW_NOT_FINISHED: 1 }],
        };
        const [matched, applied, skipped] = batch[req.pageToken]!;
        return { matched, applied, skipped, nextPageToken: next[req.pageToken]! };
      },
    });
  });
  return { client: new Client({ transport, resendForMs }), starts, lists, versions, bulks };
}

test("tags go out with a start and a listing's filter, and come back on WorkflowInfo ({} when none)", async () => {
  const { client, starts, lists } = fake();
  const started = await client.start("echo", 1, { workflowId: "t-1", tags: { team: "payments", run: "r1" } });
  assert.deepEqual(started.workflow.tags, { team: "payments", run: "r1" });
  await client.start("echo", 2, { workflowId: "t-2" });
  assert.deepEqual(
    starts.map((r) => r.tags),
    [{ team: "payments", run: "r1" }, {}],
  );

  const page = await client.list({
    tags: { team: "payments" },
    statuses: ["ENQUEUED"],
    workerId: "w-1",
    appVersion: "v1",
    parentWorkflowId: "p",
    pageSize: 10,
  });
  assert.deepEqual(
    page.workflows.map((w) => [w.workflowId, w.tags]),
    [
      ["a", { team: "payments" }],
      ["b", {}],
    ],
  );
  const [l] = lists;
  assert.deepEqual(
    [l!.tags, l!.statuses, l!.workerId, l!.appVersion, l!.parentWorkflowId, l!.pageSize],
    [{ team: "payments" }, [WorkflowStatus.ENQUEUED], "w-1", "v1", "p", 10],
  );
});

test("setVersion sends the id, the version and allowUnserved (false unless asked), and returns the workflow", async () => {
  const { client, versions } = fake();
  const w = await client.setVersion("old-1", "v2");
  assert.deepEqual([w.workflowId, w.appVersion, w.status], ["old-1", "v2", "ENQUEUED"]);
  await client.setVersion("old-2", "v3", { allowUnserved: true });
  assert.deepEqual(
    versions.map((r) => [r.workflowId, r.appVersion, r.allowUnserved]),
    [
      ["old-1", "v2", false],
      ["old-2", "v3", true],
    ],
  );
});

test("countMatching is a dry run carrying the whole filter, and returns the total", async () => {
  const { client, bulks } = fake();
  const after = new Date("2026-01-02T03:04:05Z");
  const before = new Date("2026-02-03T04:05:06Z");
  const n = await client.countMatching({
    statuses: ["ENQUEUED", "DELAYED"],
    workflowName: "echo",
    queue: "q",
    createdAfter: after,
    createdBefore: before,
    workerId: "w-1",
    appVersion: "retired",
    parentWorkflowId: "p",
    tags: { job: "nightly" },
  });
  assert.equal(n, 7);
  const [r] = bulks;
  assert.equal(r!.dryRun, true);
  const f = r!.filter!;
  assert.deepEqual(
    [f.statuses, f.workflowName, f.queueName, f.workerId, f.appVersion, f.parentWorkflowId, f.tags],
    [[WorkflowStatus.ENQUEUED, WorkflowStatus.DELAYED], "echo", "q", "w-1", "retired", "p", { job: "nightly" }],
  );
  assert.deepEqual([timestampDate(f.createdAfter!), timestampDate(f.createdBefore!)], [after, before]);
  // An empty filter matches everything: nothing set on the wire.
  await client.countMatching();
  const empty = bulks[1]!.filter!;
  assert.deepEqual(
    [empty.statuses, empty.workflowName, empty.tags, empty.createdAfter],
    [[], "", {}, undefined],
  );
});

test("each action goes out as its own case; bulkBatch carries the batch size and token", async () => {
  const { client, bulks } = fake();
  const actions: BulkAction[] = ["cancel", "resume", "delete", { setVersion: "v2" }, { setVersion: "v3", allowUnserved: true }];
  for (const a of actions) await client.bulkBatch({ tags: { job: "nightly" } }, a, { batchSize: 3, pageToken: "b2" });
  assert.deepEqual(
    bulks.map((r) => [r.action.case, r.action.case === "setVersion" ? [r.action.value.appVersion, r.action.value.allowUnserved] : null]),
    [
      ["cancel", null],
      ["resume", null],
      ["delete", null],
      ["setVersion", ["v2", false]],
      ["setVersion", ["v3", true]],
    ],
  );
  assert.ok(bulks.every((r) => !r.dryRun && r.batchSize === 3 && r.pageToken === "b2" && r.filter?.tags.job === "nightly"));
  const first = await client.bulkBatch({}, "cancel");
  assert.deepEqual(first, { matched: 3, applied: 2, skipped: { WORKFLOW_FINISHED: 1 }, nextPageToken: "b2" });
  assert.deepEqual([bulks.at(-1)!.batchSize, bulks.at(-1)!.pageToken], [0, ""], "the server's default batch, from the start");
  const last = await client.bulkBatch({}, "cancel", { pageToken: "b3" });
  assert.equal(last.nextPageToken, undefined, "the last batch has no token");
});

test("bulk follows the tokens to the end and sums the batches", async () => {
  const { client, bulks } = fake();
  const sum = await client.bulk({ appVersion: "retired" }, { setVersion: "v2" }, { batchSize: 3 });
  assert.deepEqual(sum, { matched: 7, applied: 3, skipped: { WORKFLOW_FINISHED: 2, WORKFLOW_NOT_FINISHED: 2 } });
  assert.deepEqual(
    bulks.map((r) => [r.pageToken, r.batchSize, r.filter?.appVersion]),
    [
      ["", 3, "retired"],
      ["b2", 3, "retired"],
      ["b3", 3, "retired"],
    ],
  );
});

test("setVersion, countMatching and batches are sent again while the server answers UNAVAILABLE", async () => {
  const { client, versions, bulks } = fake(2);
  assert.equal((await client.setVersion("old-1", "v2")).appVersion, "v2");
  assert.equal(versions.length, 3);
  assert.equal(await client.countMatching({}), 7);
  assert.equal(bulks.length, 3);
  const sum = await client.bulk({}, "cancel");
  assert.equal(sum.matched, 7);
  assert.deepEqual(
    bulks.slice(3).map((r) => r.pageToken),
    ["", "b2", "b3"],
    "each batch once more (the refusals are spent), with its own token",
  );
});

test("with resending off, an UNAVAILABLE batch comes out as an RpcError, sent once", async () => {
  const { client, bulks } = fake(1, 0);
  await assert.rejects(client.bulk({}, "delete"), (e: unknown) => e instanceof RpcError && e.code === Code.Unavailable);
  assert.equal(bulks.length, 1);
});
