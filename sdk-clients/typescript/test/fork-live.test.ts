// Fork and rerun-after-ERROR against a real server, with real workers (the TypeScript
// counterpart of integration-tests/tests/lifecycle.rs,
// a_failed_workflow_is_forked_onto_fixed_code_and_rerun_where_it_failed): a finished workflow
// forked from its step 1 replays step 0 and runs only steps 1 and 2 again; a workflow whose step
// failed ends ERROR, and once a fixed worker of its version replaces the buggy one, `resume`
// reruns the failed step and it succeeds.

import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import { Code, RpcError, Worker, silentLogger, type Client } from "../src/index.js";
import { startServer, type TestServer } from "./harness.js";

let server: TestServer;
let client: Client;

const PATIENCE = { timeoutMs: 30_000 };
const VERSION = "fork-test-1";

/** The steps that ran (not replayed), as "workflowId:position". */
const ran: string[] = [];

/** A worker of VERSION whose "flaky" step fails (`fixed` false) or succeeds; stop with `stop()`. */
async function versionWorker(fixed: boolean): Promise<{ stop: () => Promise<void> }> {
  const w = new Worker({ ...server.connection, logger: silentLogger, appVersion: VERSION, parkAfterMs: null });
  w.workflow("counted", async (ctx, n: number) => {
    let sum = 0;
    for (let i = 0; i < n; i++) {
      sum += await ctx.step(`step-${i}`, () => {
        ran.push(`${ctx.workflowId}:${i}`);
        return i;
      });
    }
    return sum;
  }).workflow("flaky", async (ctx, x: number) =>
    ctx.step("divide", () => {
      ran.push(`${ctx.workflowId}:divide`);
      if (!fixed) throw new Error("the bug");
      return x;
    }),
  );
  const ac = new AbortController();
  const connected = new Promise((r) => w.once("connected", r));
  const run = w.run({ signal: ac.signal });
  await Promise.race([connected, run.then(() => Promise.reject(new Error("the worker stopped before it connected")))]);
  return {
    stop: async () => {
      ac.abort();
      await run;
    },
  };
}

let buggy: { stop: () => Promise<void> } | undefined;
let fixedWorker: { stop: () => Promise<void> } | undefined;

before(async () => {
  server = await startServer();
  client = server.client;
  buggy = await versionWorker(false);
});
after(async () => {
  await buggy?.stop();
  await fixedWorker?.stop();
  await server?.stop();
});

test("a finished workflow forked from step 1 replays the copied step and runs only the rest", async () => {
  await client.start("counted", 3, { workflowId: "three", appVersion: VERSION });
  assert.equal(await client.result("three", PATIENCE), 3);
  assert.deepEqual(
    ran.filter((r) => r.startsWith("three:")),
    ["three:0", "three:1", "three:2"],
  );

  const fork = await client.fork("three", { fromStep: 1, workflowId: "three-again" });
  assert.deepEqual(
    [fork.workflowId, fork.forkedFromWorkflowId, fork.forkedFromStep, fork.workflowName],
    ["three-again", "three", 1, "counted"],
  );
  assert.equal(await client.result("three-again", PATIENCE), 3);
  assert.deepEqual(
    ran.filter((r) => r.startsWith("three-again:")),
    ["three-again:1", "three-again:2"],
    "the copied step replays, the rest run",
  );
  const got = await client.get("three-again");
  assert.deepEqual([got.status, got.forkedFromWorkflowId, got.forkedFromStep], ["SUCCESS", "three", 1]);
  assert.deepEqual(
    (await client.steps("three-again")).map((s) => s.stepId),
    [0, 1, 2],
  );
  // The same fork made again (a resent call) is the first one; an id anything else holds is refused.
  const again = await client.fork("three", { fromStep: 1, workflowId: "three-again" });
  assert.deepEqual([again.workflowId, again.status], ["three-again", "SUCCESS"]);
  assert.equal(ran.filter((r) => r.startsWith("three-again:")).length, 2, "nothing ran again");
  const source = await client.get("three");
  assert.deepEqual([source.forkedFromWorkflowId, source.forkedFromStep], ["", 0], "the source is no fork");
  await assert.rejects(client.fork("three-again", { workflowId: "three" }), (e: unknown) => {
    assert.ok(e instanceof RpcError, `an RpcError, not ${String(e)}`);
    assert.deepEqual([Code[e.code], e.reason], [Code[Code.AlreadyExists], "WORKFLOW_ID_CONFLICT"]);
    return true;
  });
});

test("a failed workflow, resumed after a fixed worker of its version replaces the buggy one, reruns its step", async () => {
  await client.start("flaky", 7, { workflowId: "bug", appVersion: VERSION });
  const failed = await client.await("bug", PATIENCE);
  assert.equal(failed.status, "ERROR");
  assert.ok(failed.failure, "an ERROR workflow carries its failure");

  await buggy!.stop();
  buggy = undefined;
  fixedWorker = await versionWorker(true);

  const resumed = await client.resume("bug");
  assert.deepEqual([resumed.status, resumed.failure], ["ENQUEUED", undefined]);
  assert.equal(await client.result("bug", PATIENCE), 7);
  assert.deepEqual(
    ran.filter((r) => r.startsWith("bug:")),
    ["bug:divide", "bug:divide"],
    "the failed step ran again",
  );
  const steps = await client.steps("bug");
  assert.equal(steps.length, 1);
  assert.equal(steps[0]!.failure, undefined, "the failed record was replaced");
});
