// Workflow updates against a real server, with a real worker: client.updateWorkflow returns the
// workflow's answer, the same update id is the same update (answered again, its step run once),
// a rejection and an unanswered update reach the caller as their reasons, and a workflow that
// ends without answering is UPDATE_NOT_ANSWERED.

import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import { Code, RpcError, type Client } from "../src/index.js";
import { startServer, type TestServer } from "./harness.js";

let server: TestServer;
let client: Client;

/** Every update id whose "add" step function ran, in order: a replay must not add to it. */
const added: string[] = [];

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

before(async () => {
  server = await startServer();
  client = server.client;
  // The worker parks long waits (the default): a cart left waiting for its next update is
  // parked, and replayed when one comes.
  await server.worker({}, (w) =>
    w
      // A cart: takes "add" updates of { qty } until none comes for ten minutes, rejects a qty
      // under 1, adds the rest in a step and answers with the running total.
      .workflow("cart", async (ctx) => {
        let total = 0;
        for (;;) {
          const u = await ctx.recvUpdate<{ qty?: unknown } | null>("add", { timeoutMs: 600_000 });
          if (u === undefined) return total;
          const qty = u.args?.qty;
          if (typeof qty !== "number" || qty < 1) {
            await ctx.rejectUpdate(u.id, `qty must be at least 1, not ${JSON.stringify(qty)}`);
            continue;
          }
          const before = total;
          total = await ctx.step("add", () => {
            added.push(u.id);
            return before + qty;
          });
          await ctx.answerUpdate(u.id, { total });
        }
      })
      // Takes one update and ends without answering it.
      .workflow("forgetful", async (ctx) => (await ctx.recvUpdate("add", { timeoutMs: 600_000 }))?.id ?? null),
  );
});
after(() => server?.stop());

/** Whether `e` is the server's refusal with this code and reason, for assert.rejects. */
function refused(code: Code, reason: string, check: (e: RpcError) => void = () => {}) {
  return (e: unknown) => {
    assert.ok(e instanceof RpcError, `an RpcError, not ${String(e)}`);
    assert.deepEqual([Code[e.code], e.reason], [Code[code], reason]);
    check(e);
    return true;
  };
}

test("an update is answered with the workflow's answer, under an update id made here", async () => {
  await client.start("cart", null, { workflowId: "cart-1" });
  assert.deepEqual(await client.updateWorkflow("cart-1", "add", { qty: 2 }), { total: 2 });
  assert.deepEqual(await client.updateWorkflow("cart-1", "add", { qty: 3 }, { waitMs: 30_000 }), { total: 5 });
  // Each went as a message on the update's topic, keyed by a UUID v7 the client made.
  const messages = await client.messages("cart-1");
  assert.deepEqual(messages.map((m) => [m.topic, m.consumed]), [["waymark.update/add", true], ["waymark.update/add", true]]);
  const ids = messages.map((m) => m.idempotencyKey.replace(/^waymark\.update\//, ""));
  for (const id of ids) assert.match(id, UUID_V7);
  assert.notEqual(ids[0], ids[1]);
  assert.deepEqual(messages.map((m) => m.payload), [{ update_id: ids[0], args: { qty: 2 } }, { update_id: ids[1], args: { qty: 3 } }]);
});

test("the same update id sent again returns the same answer and runs the step once", async () => {
  await client.start("cart", null, { workflowId: "cart-2" });
  const first = await client.updateWorkflow("cart-2", "add", { qty: 4 }, { updateId: "u-1" });
  // Again with the id: the same update, answered from what was recorded (its new args unread).
  const again = await client.updateWorkflow("cart-2", "add", { qty: 100 }, { updateId: "u-1" });
  assert.deepEqual([first, again], [{ total: 4 }, { total: 4 }]);
  assert.deepEqual(added.filter((id) => id === "u-1"), ["u-1"]);
  // A recv (its deadline, then the update), the step, the answer; after it the cart may have
  // begun its next recv.
  const steps = await client.steps("cart-2");
  assert.deepEqual(steps.slice(0, 4).map((s) => s.name), ["waymark.recv.deadline", "waymark.recv", "add", "waymark.set_event"]);
  assert.deepEqual(steps.slice(1, 4).map((s) => s.output), [
    { message: { update_id: "u-1", args: { qty: 4 } } },
    4,
    { key: "waymark.update/u-1" },
  ]);
  assert.equal(steps.filter((s) => s.name === "add").length, 1);
  assert.equal((await client.messages("cart-2")).length, 1);
});

test("a rejection reaches the caller as UPDATE_REJECTED with the reason, and the workflow goes on", async () => {
  await client.start("cart", null, { workflowId: "cart-3" });
  await assert.rejects(
    client.updateWorkflow("cart-3", "add", { qty: 0 }, { updateId: "u-zero" }),
    refused(Code.FailedPrecondition, "UPDATE_REJECTED", (e) => {
      assert.match(e.message, /qty must be at least 1, not 0/);
      assert.equal(e.metadata.update_id, "u-zero");
    }),
  );
  // Not taken as args of the wrong shape: rejected by the workflow, which keeps taking updates.
  await assert.rejects(client.updateWorkflow("cart-3", "add", "three"), refused(Code.FailedPrecondition, "UPDATE_REJECTED"));
  assert.deepEqual(await client.updateWorkflow("cart-3", "add", { qty: 1 }), { total: 1 });
  assert.equal((await client.get("cart-3")).status, "PENDING");
});

test("an update nobody answers within the wait is UPDATE_PENDING, and stays pending under its id", async () => {
  await client.start("cart", null, { workflowId: "cart-4" });
  // The cart receives "add"; nobody receives "remove".
  const pending = refused(Code.DeadlineExceeded, "UPDATE_PENDING", (e) => assert.equal(e.metadata.update_id, "u-remove"));
  await assert.rejects(client.updateWorkflow("cart-4", "remove", { qty: 1 }, { updateId: "u-remove", waitMs: 300 }), pending);
  // Called again with the id it waits on for the same update: nothing new is delivered.
  await assert.rejects(client.updateWorkflow("cart-4", "remove", { qty: 1 }, { updateId: "u-remove", waitMs: 300 }), pending);
  // A wait of nothing is refused: an update always waits some time for its answer.
  await assert.rejects(client.updateWorkflow("cart-4", "remove", { qty: 1 }, { waitMs: 0 }), refused(Code.InvalidArgument, "INVALID_ARGUMENT"));
  const messages = await client.messages("cart-4");
  assert.deepEqual(messages.map((m) => [m.topic, m.idempotencyKey, m.consumed]), [["waymark.update/remove", "waymark.update/u-remove", false]]);
});

test("a workflow that ends without answering is UPDATE_NOT_ANSWERED; an ended one takes no updates", async () => {
  await client.start("forgetful", null, { workflowId: "forgetful-1" });
  await assert.rejects(
    client.updateWorkflow("forgetful-1", "add", 1, { updateId: "u-lost", waitMs: 30_000 }),
    refused(Code.FailedPrecondition, "UPDATE_NOT_ANSWERED"),
  );
  assert.equal(await client.result("forgetful-1", { timeoutMs: 30_000 }), "u-lost");
  await assert.rejects(client.updateWorkflow("forgetful-1", "add", 2), refused(Code.FailedPrecondition, "WORKFLOW_NOT_RUNNING"));
  await assert.rejects(client.updateWorkflow("nobody", "add", 1), refused(Code.NotFound, "WORKFLOW_NOT_FOUND"));
});
