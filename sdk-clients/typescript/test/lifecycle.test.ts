// client.delete and the start option allowUnregistered without a server (Connect's in-process
// router stands in for it): what the requests carry, how the answers map, and that a delete is
// sent once — a repeat after a lost reply would find the workflow gone.

import { test } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError, createRouterTransport } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import {
  WorkflowService,
  type DeleteWorkflowRequest,
  type StartWorkflowRequest,
} from "../src/gen/waymark/v1/workflow_pb.js";
import { WorkflowSchema, WorkflowStatus } from "../src/gen/waymark/v1/types_pb.js";
import { Client, RpcError } from "../src/index.js";

/** A refusal as the server makes it: the code, and google.rpc.ErrorInfo with `reason` in the details. */
function refusal(message: string, code: Code, reason: string): ConnectError {
  const e = new ConnectError(message, code);
  e.details.push({ type: "google.rpc.ErrorInfo", value: new BinaryWriter().tag(1, WireType.LengthDelimited).string(reason).finish() });
  return e;
}

/**
 * A client on a fake WorkflowService. Starts answer `nameRegistered` false for names in
 * `unregistered`; deletes answer `answer(req)` (ids, or an error thrown).
 */
function fake(answer: (req: DeleteWorkflowRequest) => string[], unregistered: string[] = []) {
  const starts: StartWorkflowRequest[] = [];
  const deletes: DeleteWorkflowRequest[] = [];
  const transport = createRouterTransport(({ service }) => {
    service(WorkflowService, {
      startWorkflow(req) {
        starts.push(req);
        return {
          workflow: create(WorkflowSchema, { workflowId: req.workflowId, workflowName: req.workflowName, status: WorkflowStatus.ENQUEUED }),
          created: true,
          nameRegistered: !unregistered.includes(req.workflowName),
        };
      },
      deleteWorkflow(req) {
        deletes.push(req);
        return { deletedWorkflowIds: answer(req) };
      },
    });
  });
  return { client: new Client({ transport }), starts, deletes };
}

test("a start carries allowUnregistered (false unless asked) and returns nameRegistered", async () => {
  const { client, starts } = fake(() => [], ["not-yet"]);
  const early = await client.start("not-yet", 1, { workflowId: "e-1", allowUnregistered: true });
  assert.deepEqual([early.created, early.nameRegistered, early.workflow.status], [true, false, "ENQUEUED"]);
  const known = await client.start("known", 2, { workflowId: "k-1" });
  assert.deepEqual([known.created, known.nameRegistered], [true, true]);
  assert.deepEqual(
    starts.map((r) => [r.workflowName, r.allowUnregistered]),
    [
      ["not-yet", true],
      ["known", false],
    ],
  );
});

test("delete sends the id and cascade and returns the deleted ids, the asked-for one first", async () => {
  const { client, deletes } = fake((req) => (req.cascade ? [req.workflowId, `${req.workflowId}-c1`, `${req.workflowId}-c2`] : [req.workflowId]));
  assert.deepEqual(await client.delete("p"), ["p"]);
  assert.deepEqual(await client.delete("q", { cascade: true }), ["q", "q-c1", "q-c2"]);
  assert.deepEqual(
    deletes.map((r) => [r.workflowId, r.cascade]),
    [
      ["p", false],
      ["q", true],
    ],
  );
});

test("a refused delete is an RpcError with the server's reason", async () => {
  const { client } = fake((req) => {
    throw refusal(`workflow ${req.workflowId} has not finished`, Code.FailedPrecondition, "WORKFLOW_NOT_FINISHED");
  });
  await assert.rejects(client.delete("busy", { cascade: true }), (e: unknown) => {
    assert.ok(e instanceof RpcError);
    assert.deepEqual([e.code, e.reason], [Code.FailedPrecondition, "WORKFLOW_NOT_FINISHED"]);
    return true;
  });
});

test("a delete answered UNAVAILABLE is not sent again", async () => {
  const { client, deletes } = fake(() => {
    throw new ConnectError("the database is restarting", Code.Unavailable);
  });
  await assert.rejects(client.delete("gone?"), (e: unknown) => e instanceof RpcError && e.code === Code.Unavailable);
  assert.equal(deletes.length, 1);
});
