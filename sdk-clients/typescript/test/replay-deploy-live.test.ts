// Replay before deploy, end to end: a workflow runs on the real server, an operator exports its
// history with the command line (`waymark workflow export ID --server …`), CI saves it to a file
// and loads it back, and the offline Replayer replays it against the code as it is and as a
// deploy would change it: a step inserted where the history records another is
// non-determinism, naming both steps; the same insertion behind `ctx.patched` replays the old
// branch; a workflow renamed away is an UnknownWorkflowError. The replays connect to nothing: a
// fake connection fails the test if asked anything, and no step function may run in them.

import { test, after, afterEach, before, beforeEach } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  NonDeterminismError,
  Replayer,
  UnknownWorkflowError,
  Worker,
  silentLogger,
  type JsonValue,
  type RecordedHistory,
  type WorkflowContext,
} from "../src/index.js";
import { FakeConn } from "./fakes.js";
import { serverBinary, startServer, type TestServer } from "./harness.js";

const PATIENCE = { timeoutMs: 30_000 };
const ID = "deploy-demo-1";

/** The step functions that ran, by name, in order. */
const ran: string[] = [];

function step<T>(name: string, value: T): () => T {
  return () => {
    ran.push(name);
    return value;
  };
}

/** The code deployed now: reserve, then charge. */
async function v1(ctx: WorkflowContext, order: { order: number }) {
  const reserved = await ctx.step("reserve", step("reserve", { held: 3 }));
  const charged = await ctx.step("charge", step("charge", `ch-${order.order}`));
  return { reserved, charged };
}

/** An unsafe change: a new step "audit" where the runs in flight recorded "charge". */
async function v2Unsafe(ctx: WorkflowContext, order: { order: number }) {
  const reserved = await ctx.step("reserve", step("reserve", { held: 3 }));
  await ctx.step("audit", step("audit", "audited"));
  const charged = await ctx.step("charge", step("charge", `ch-${order.order}`));
  return { reserved, charged };
}

/** The same change made safely: only runs that reach it under the new code audit. */
async function v2Safe(ctx: WorkflowContext, order: { order: number }) {
  const reserved = await ctx.step("reserve", step("reserve", { held: 3 }));
  if (ctx.patched("add-audit")) await ctx.step("audit", step("audit", "audited"));
  const charged = await ctx.step("charge", step("charge", `ch-${order.order}`));
  return { reserved, charged };
}

let server: TestServer;
/** What the live run returned, as the client read it. */
let liveResult: JsonValue;
/** The CLI's stdout, parsed. */
let exported: RecordedHistory;
/** The same history as CI would load it: from the file it was saved to. */
let saved: RecordedHistory;
let conns: FakeConn[] = [];

/**
 * `waymark ARGS` as a subprocess, with no WAYMARK_* variable in its environment (so the server
 * it reaches is the one its flags name); its stdout, or a rejection saying how it failed.
 */
function waymark(args: string[]): Promise<string> {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("WAYMARK_")));
  return new Promise((resolve, reject) => {
    execFile(serverBinary(), args, { env }, (err, stdout, stderr) => {
      if (err) reject(new Error(`waymark ${args.join(" ")} failed (${err.code ?? err.signal}): ${stderr.trim()}`));
      else resolve(stdout);
    });
  });
}

before(async () => {
  server = await startServer();
  await server.worker({}, (w) => w.workflow("deploy-demo", v1));
  await server.client.start("deploy-demo", { order: 42 }, { workflowId: ID });
  const done = await server.client.await(ID, PATIENCE);
  assert.equal(done.status, "SUCCESS", `the live run ended ${done.status}: ${done.failure?.message ?? ""}`);
  liveResult = done.output ?? null;
  assert.deepEqual(ran, ["reserve", "charge"], "the live run ran each step once");

  // As an operator would: the command line, pointed at this server with --server.
  const stdout = await waymark(["workflow", "export", ID, "--server", server.address]);
  exported = JSON.parse(stdout) as RecordedHistory;
  const file = join(mkdtempSync(join(tmpdir(), "waymark-ts-deploy-")), `${ID}.json`);
  writeFileSync(file, stdout);
  saved = JSON.parse(readFileSync(file, "utf8")) as RecordedHistory;
});
after(() => server?.stop());

beforeEach(() => {
  ran.length = 0;
  conns = [];
});
afterEach(() => {
  for (const c of conns) assert.deepEqual(c.kinds(), [], "a replay sends nothing");
});

/** A replayer over a worker registering `code` as `name`, whose connection fails the test if asked anything. */
function replayer(name: string, code: (ctx: WorkflowContext, order: { order: number }) => Promise<unknown>): Replayer {
  const conn = new FakeConn(() => assert.fail("a replay sent a request"));
  conns.push(conn);
  return new Replayer(new Worker({ logger: silentLogger }).workflow(name, code), conn);
}

test("the CLI exports the live run's history, which replays offline against the same code to the live result", async () => {
  assert.deepEqual(liveResult, { reserved: { held: 3 }, charged: "ch-42" });
  assert.deepEqual(saved, exported, "the saved file reads back as the CLI printed it");
  assert.equal(exported.workflow_id, ID);
  assert.equal(exported.workflow_name, "deploy-demo");
  assert.deepEqual(exported.input, { order: 42 });
  assert.deepEqual(exported.steps, [
    { step_id: 0, name: "reserve", output: { held: 3 } },
    { step_id: 1, name: "charge", output: "ch-42" },
  ]);
  assert.deepEqual(exported, await server.client.history(ID), "the CLI exports what Client.history returns");

  assert.deepEqual(await replayer("deploy-demo", v1).replay(saved), { outcome: "returned", value: liveResult });
  assert.deepEqual(ran, [], "no step function ran in the replay");
});

test("a step inserted before a recorded one fails the replay with NonDeterminism naming both steps", async () => {
  const got = await replayer("deploy-demo", v2Unsafe).replay(saved);
  assert.equal(got.outcome, "failed");
  assert.ok(got.outcome === "failed");
  assert.equal(got.kind, "NonDeterminism");
  assert.ok(got.error instanceof NonDeterminismError, `a NonDeterminismError, not ${String(got.error)}`);
  assert.ok(got.message.includes('"charge"'), `the message names the recorded step "charge": ${got.message}`);
  assert.ok(got.message.includes('"audit"'), `the message names the step the code asked for, "audit": ${got.message}`);
  assert.deepEqual(ran, [], "no step function ran in the replay");
});

test("the same insertion behind patched('add-audit') replays the old branch to the recorded result, running no step", async () => {
  assert.deepEqual(await replayer("deploy-demo", v2Safe).replay(saved), {
    outcome: "returned",
    value: { reserved: { held: 3 }, charged: "ch-42" },
  });
  assert.deepEqual(ran, [], "no step function ran in the replay (audit included)");
});

test("a history whose workflow the code no longer registers (renamed) is an UnknownWorkflowError", async () => {
  await assert.rejects(
    replayer("deploy-demo-v2", v1).replay(saved),
    (e: unknown) => e instanceof UnknownWorkflowError && e.workflowName === "deploy-demo",
  );
  assert.deepEqual(ran, []);
});
