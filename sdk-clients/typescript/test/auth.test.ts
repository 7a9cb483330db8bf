// API keys against a real server run with --auth: calls without a valid key are UNAUTHENTICATED,
// a key whose role does not allow a call is PERMISSION_DENIED (a worker refused either way stops
// instead of reconnecting), a worker key runs workflows, and revoking it stops its worker.

import { test, after, before, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { inspect } from "node:util";
import { Client, Code, RpcError, Worker, silentLogger, type Logger } from "../src/index.js";
import { startServer, type TestServer } from "./harness.js";

let server: TestServer;
let clientKey: string;

before(async () => {
  server = await startServer([], { auth: true });
  clientKey = await server.createKey("client", "ts-client");
  // Starts need a worker that registered the names.
  const workerKey = await server.createKey("worker", "ts-worker");
  await server.worker({ server: server.address, apiKey: workerKey }, register);
});
after(() => server.stop());

function register(w: Worker): void {
  w.workflow("auth-echo", async (ctx, input: string) => ctx.step("echo", () => `echo ${input}`));
  w.workflow("auth-wait", async (ctx) => ctx.recv<string>("go", { timeoutMs: 600_000 }));
}

/** A client with this key (or none), against the test server. */
const clientWith = (apiKey?: string) => new Client({ server: server.address, apiKey, resendForMs: 0 });

/** Matches an RpcError of this code whose reason is the code's name. */
function refused(code: Code.Unauthenticated | Code.PermissionDenied, secret?: string) {
  return (e: unknown) => {
    assert.ok(e instanceof RpcError, String(e));
    assert.equal(e.code, code, e.message);
    assert.equal(e.reason, code === Code.Unauthenticated ? "UNAUTHENTICATED" : "PERMISSION_DENIED");
    if (secret) assert.ok(!inspect(e).includes(secret), "the error shows the key");
    return true;
  };
}

/**
 * Runs a worker with `apiKey` that is expected to stop by itself: its run promise (stopped when
 * the test ends, so that one that does not stop fails the test rather than hang the file).
 */
function runWorker(t: TestContext, apiKey: string | undefined, logger: Logger = silentLogger): { worker: Worker; run: Promise<void> } {
  const worker = new Worker({ server: server.address, apiKey, logger, queues: ["auth-nothing"] });
  register(worker);
  const stop = new AbortController();
  t.after(() => stop.abort());
  return { worker, run: worker.run({ signal: stop.signal }) };
}

/** The secret half of a key `wmk_<id>_<secret>`, and its id. */
const secretOf = (key: string) => key.slice(key.lastIndexOf("_") + 1);
const idOf = (key: string) => key.split("_")[1]!;

test("without a key, or with an unknown one, calls are UNAUTHENTICATED and a worker stops", { timeout: 120_000 }, async (t) => {
  await assert.rejects(clientWith().list(), refused(Code.Unauthenticated));
  const unknown = "wmk_0123456789abcdef_notasecretthatexists";
  await assert.rejects(clientWith(unknown).get("nope"), refused(Code.Unauthenticated, "notasecretthatexists"));

  const lines: string[] = [];
  const log = (message: string, fields?: Record<string, unknown>) => lines.push(`${message} ${JSON.stringify(fields ?? {})}`);
  const { run } = runWorker(t, undefined);
  await assert.rejects(run, refused(Code.Unauthenticated));
  const withUnknown = runWorker(t, unknown, { debug: log, info: log, warn: log, error: log });
  await assert.rejects(withUnknown.run, refused(Code.Unauthenticated, "notasecretthatexists"));
  assert.ok(lines.some((l) => l.includes("UNAUTHENTICATED")), lines.join("\n"));
  assert.ok(!lines.some((l) => l.includes("notasecretthatexists")), "a log line shows the key");
});

test("a reader key reads, but may not cancel or start", { timeout: 120_000 }, async () => {
  const { workflow } = await clientWith(clientKey).start("auth-wait", null);
  const readerKey = await server.createKey("reader", "ts-reader");
  const reader = clientWith(readerKey);
  assert.equal((await reader.get(workflow.workflowId)).workflowName, "auth-wait");
  assert.ok((await reader.list({ workflowName: "auth-wait" })).workflows.some((w) => w.workflowId === workflow.workflowId));
  await assert.rejects(reader.cancel(workflow.workflowId), refused(Code.PermissionDenied, secretOf(readerKey)));
  await assert.rejects(reader.start("auth-echo", "x"), refused(Code.PermissionDenied));
  // Nothing was cancelled: the client key can still talk to it, and finish it.
  await clientWith(clientKey).send(workflow.workflowId, "done", { topic: "go" });
  assert.equal(await clientWith(clientKey).result(workflow.workflowId, { timeoutMs: 60_000 }), "done");
});

test("a worker with a client key is refused: its run rejects with PERMISSION_DENIED, without reconnecting", { timeout: 120_000 }, async (t) => {
  const { worker, run } = runWorker(t, clientKey);
  const disconnects: Error[] = [];
  worker.on("disconnected", (e) => disconnects.push(e));
  await assert.rejects(run, refused(Code.PermissionDenied, secretOf(clientKey)));
  assert.equal(disconnects.length, 1);
});

test("a worker key runs workflows that a client key starts", { timeout: 120_000 }, async () => {
  const client = clientWith(clientKey);
  const { workflow } = await client.start("auth-echo", "keys");
  assert.equal(await client.result(workflow.workflowId, { timeoutMs: 60_000 }), "echo keys");
});

test("revoking a worker's key stops the running worker with UNAUTHENTICATED", { timeout: 180_000 }, async (t) => {
  const key = await server.createKey("worker", "ts-revoked");
  const { worker, run } = runWorker(t, key);
  await Promise.race([
    new Promise((resolve) => worker.once("connected", resolve)),
    run.then(() => Promise.reject(new Error("the worker stopped before it connected"))),
  ]);

  await server.cli(["key", "revoke", idOf(key)]);
  // The server closes the stream when the revocation reaches it (within its key cache time).
  await assert.rejects(run, refused(Code.Unauthenticated, secretOf(key)));
  // And the key opens no stream any more.
  await assert.rejects(runWorker(t, key).run, refused(Code.Unauthenticated));
});
