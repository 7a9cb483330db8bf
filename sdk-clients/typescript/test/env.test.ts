// Configuration from the environment alone, against a real server with mutual TLS and API keys:
// WAYMARK_SERVER (host:port, no scheme), WAYMARK_TLS_CA, WAYMARK_TLS_CERT, WAYMARK_TLS_KEY,
// WAYMARK_API_KEY and WAYMARK_NAMESPACE, read when a Client or Worker is constructed.

import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import { Client, Code, RpcError, Worker, silentLogger } from "../src/index.js";
import { makeCerts, startServer, type Certs, type TestServer } from "./harness.js";

const NAMES = ["WAYMARK_SERVER", "WAYMARK_TLS_CA", "WAYMARK_TLS_CERT", "WAYMARK_TLS_KEY", "WAYMARK_API_KEY", "WAYMARK_NAMESPACE"];
let certs: Certs;
let server: TestServer;
const saved = Object.fromEntries(NAMES.map((n) => [n, process.env[n]]));

before(async () => {
  certs = makeCerts();
  server = await startServer([], { tls: certs, mtls: true, auth: true });
});
after(async () => {
  for (const [n, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[n];
    else process.env[n] = v;
  }
  await server?.stop();
});

test("a worker and a client configured by environment variables alone run a workflow", { timeout: 120_000 }, async (t) => {
  const workerKey = await server.createKey("worker", "env-worker");
  const clientKey = await server.createKey("client", "env-client");
  Object.assign(process.env, {
    WAYMARK_SERVER: server.address.replace("https://", ""),
    WAYMARK_TLS_CA: certs.ca,
    WAYMARK_TLS_CERT: certs.clientCert,
    WAYMARK_TLS_KEY: certs.clientKey,
    WAYMARK_NAMESPACE: "default",
    WAYMARK_API_KEY: workerKey,
  });
  const worker = new Worker({ logger: silentLogger });
  worker.workflow("env-greet", async (ctx, name: string) => ctx.step("greet", () => `hello ${name}`));
  process.env.WAYMARK_API_KEY = clientKey;
  const client = new Client();

  const stop = new AbortController();
  t.after(() => stop.abort());
  const run = worker.run({ signal: stop.signal });
  await Promise.race([
    new Promise((resolve) => worker.once("connected", resolve)),
    run.then(() => Promise.reject(new Error("the worker stopped before it connected"))),
  ]);
  const { workflow } = await client.start("env-greet", "env");
  assert.equal(await client.result(workflow.workflowId, { timeoutMs: 60_000 }), "hello env");
  stop.abort();
  await run;

  // What the environment says is what is used: without the key, the same client is refused.
  delete process.env.WAYMARK_API_KEY;
  await assert.rejects(new Client({ resendForMs: 0 }).get(workflow.workflowId), (e: unknown) => {
    assert.ok(e instanceof RpcError, String(e));
    assert.equal(e.code, Code.Unauthenticated);
    return true;
  });
});
