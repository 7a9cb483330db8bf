// TLS against real servers, with certificates waymark-test-certs makes for this run: a worker
// and a client trusting the test CA run a workflow; a client trusting another CA (or only the
// system roots) refuses the server; a server that requires client certificates refuses a
// client without one and takes one with it.

import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import { Client, Code, RpcError } from "../src/index.js";
import { makeCerts, startServer, type Certs, type TestServer } from "./harness.js";

let certs: Certs;
let server: TestServer;
let mutual: TestServer;

before(async () => {
  certs = makeCerts();
  server = await startServer([], { tls: certs });
  mutual = await startServer([], { tls: certs, mtls: true });
});
after(async () => {
  await server?.stop();
  await mutual?.stop();
});

/** A call refused during the TLS handshake: an RpcError at once (not repeated, not timed out) that says why. */
async function refusedHandshake(client: Client, why: RegExp): Promise<void> {
  await assert.rejects(client.queues.list({ timeoutMs: 60_000 }), (e: unknown) => {
    assert.ok(e instanceof RpcError, String(e));
    assert.notEqual(e.code, Code.DeadlineExceeded, e.message);
    assert.match(e.message, why);
    return true;
  });
}

test("a worker and a client trusting the test CA run a workflow over TLS", { timeout: 120_000 }, async () => {
  assert.match(server.address, /^https:\/\/127\.0\.0\.1:/);
  await server.worker({}, (w) =>
    w.workflow("tls-greet", async (ctx, name: string) => ctx.step("greet", () => `hello ${name}`)),
  );
  const { workflow } = await server.client.start("tls-greet", "over tls");
  assert.equal(await server.client.result(workflow.workflowId, { timeoutMs: 60_000 }), "hello over tls");
});

test("a client trusting another CA, or only the system roots, refuses the server's certificate", { timeout: 120_000 }, async () => {
  await refusedHandshake(new Client({ server: server.address, tlsCa: certs.otherCa }), /certificate/i);
  await refusedHandshake(new Client({ server: server.address }), /certificate/i);
  // The address without a scheme is TLS too when a CA is given.
  await new Client({ server: server.address.replace("https://", ""), tlsCa: certs.ca }).queues.list();
});

test("a server requiring client certificates refuses a client without one and takes one with it", { timeout: 120_000 }, async () => {
  await refusedHandshake(new Client({ server: mutual.address, tlsCa: certs.ca }), /certificate required/i);
  const withCert = new Client({ server: mutual.address, tlsCa: certs.ca, tlsCert: certs.clientCert, tlsKey: certs.clientKey });
  assert.ok(Array.isArray(await withCert.queues.list()));
});
