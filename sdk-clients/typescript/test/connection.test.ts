// Connection options without a Waymark server: how addresses, TLS options and environment
// variables resolve, what is refused at construction, the metadata every kind of call carries,
// TLS and mutual TLS against an in-process HTTP/2 server (certificates from waymark-test-certs),
// and a worker whose stream is refused for its key stopping instead of reconnecting.

import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import http2 from "node:http2";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { inspect } from "node:util";
import { create } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { Code, ConnectError, type ConnectRouter } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { QueueService } from "../src/gen/waymark/v1/queue_pb.js";
import { WorkflowService } from "../src/gen/waymark/v1/workflow_pb.js";
import { ServerMessageSchema, WelcomeSchema, WorkerService, type ServerMessage } from "../src/gen/waymark/v1/worker_pb.js";
import { Client, ConfigurationError, RpcError, Worker, silentLogger, type Logger } from "../src/index.js";
import { resolveConnection } from "../src/transport.js";
import { makeCerts } from "./harness.js";

const KEY = "wmk_k1_s3cr3t-never-shown";
const certs = makeCerts();
const pemOf = (path: string) => readFileSync(path, "utf8");

test("addresses and TLS options resolve to a URL, TLS material and metadata", () => {
  const r = (o: Parameters<typeof resolveConnection>[0], env: Record<string, string> = {}) => resolveConnection(o, env);
  assert.equal(r({}).baseUrl, "http://127.0.0.1:7450");
  assert.equal(r({}).tls, undefined);
  assert.equal(r({ server: "h:1" }).baseUrl, "http://h:1");
  assert.equal(r({ server: "http://h:1" }).baseUrl, "http://h:1");
  // https:// alone is TLS with the system roots.
  const https = r({ server: "https://h:1" });
  assert.equal(https.baseUrl, "https://h:1");
  assert.deepEqual(https.tls, { ca: undefined, cert: undefined, key: undefined });
  // No scheme and a TLS option: TLS. A path is read, PEM text taken as it is.
  const ca = r({ server: "h:1", tlsCa: certs.ca });
  assert.equal(ca.baseUrl, "https://h:1");
  assert.equal(ca.tls?.ca?.toString(), pemOf(certs.ca));
  assert.equal(r({ server: "h:1", tlsCa: pemOf(certs.ca) }).tls?.ca?.toString(), pemOf(certs.ca).trim());
  const mutual = r({ server: "h:1", tlsCert: certs.clientCert, tlsKey: certs.clientKey });
  assert.equal(mutual.baseUrl, "https://h:1");
  assert.equal(mutual.tls?.key?.toString(), pemOf(certs.clientKey));
  // The environment, when the options say nothing.
  const env = {
    WAYMARK_SERVER: "e:2",
    WAYMARK_TLS_CA: certs.ca,
    WAYMARK_TLS_CERT: certs.clientCert,
    WAYMARK_TLS_KEY: certs.clientKey,
    WAYMARK_API_KEY: ` ${KEY}\n`,
    WAYMARK_NAMESPACE: "default",
  };
  const fromEnv = r({}, env);
  assert.equal(fromEnv.baseUrl, "https://e:2");
  assert.equal(fromEnv.tls?.cert?.toString(), pemOf(certs.clientCert));
  assert.deepEqual(fromEnv.metadata, { authorization: `Bearer ${KEY}`, "waymark-namespace": "default" });
  // Options win over the environment; an empty option means none.
  const given = r({ server: "o:3", apiKey: "wmk_o_x", namespace: "" }, env);
  assert.equal(given.baseUrl, "https://o:3");
  assert.deepEqual(given.metadata, { authorization: "Bearer wmk_o_x" });
  assert.deepEqual(r({ server: "o:3" }).metadata, {});
});

test("contradictory connection options are refused at construction, naming their source and never the key", () => {
  const refused = (f: () => unknown, ...words: string[]) =>
    assert.throws(f, (e: unknown) => {
      assert.ok(e instanceof ConfigurationError, String(e));
      for (const w of words) assert.ok(e.message.includes(w), `${JSON.stringify(e.message)} lacks ${JSON.stringify(w)}`);
      assert.ok(!e.message.includes("s3cr3t"));
      return true;
    });
  refused(() => new Client({ server: "http://h:1", tlsCa: certs.ca }), "http://", "tlsCa option");
  refused(() => new Worker({ server: "http://h:1", tlsCert: certs.clientCert, tlsKey: certs.clientKey }), "tlsCert option", "tlsKey option");
  refused(() => resolveConnection({}, { WAYMARK_SERVER: "http://h:1", WAYMARK_TLS_CA: certs.ca }), "WAYMARK_SERVER", "WAYMARK_TLS_CA");
  refused(() => new Client({ server: "h:1", tlsCert: certs.clientCert }), "tlsCert option", "WAYMARK_TLS_KEY");
  refused(() => new Client({ server: "grpc://h:1" }), "grpc");
  refused(() => new Client({ server: "h:1", tlsCa: join(certs.dir, "missing.pem") }), "missing.pem", "ENOENT");
  refused(() => new Client({ apiKey: `${KEY} extra` }), "API key", "apiKey option");
  refused(() => new Worker({ apiKey: `${KEY}\nx-other: 1` }), "API key");
  // A transport of your own carries its own credentials: a key given beside it would be ignored.
  refused(() => new Worker({ transport: {} as never, apiKey: KEY }), "apiKey", "createTransport");
  refused(() => new Client({ transport: {} as never, tlsCa: certs.ca, namespace: "default" }), "tlsCa, namespace");
});

test("an API key over plaintext to a host that is not loopback is refused unless insecure says so", () => {
  const r = (o: Parameters<typeof resolveConnection>[0], env: Record<string, string> = {}) => resolveConnection(o, env);
  const refused = (f: () => unknown, ...words: string[]) =>
    assert.throws(f, (e: unknown) => {
      assert.ok(e instanceof ConfigurationError, String(e));
      for (const w of ["unencrypted", "https://", "insecure: true", "WAYMARK_INSECURE=1", ...words]) {
        assert.ok(e.message.includes(w), `${JSON.stringify(e.message)} lacks ${JSON.stringify(w)}`);
      }
      assert.ok(!e.message.includes("s3cr3t"));
      return true;
    });
  for (const server of ["http://waymark.example:7450", "waymark.example:7450", "http://10.0.0.1:7450", "http://[2001:db8::1]:7450"]) {
    refused(() => r({ server, apiKey: KEY }), "apiKey option", "server option");
  }
  refused(() => r({}, { WAYMARK_SERVER: "http://waymark.example:7450", WAYMARK_API_KEY: KEY }), "WAYMARK_API_KEY", "WAYMARK_SERVER");
  // Given, the option wins over the variable.
  refused(() => r({ server: "http://waymark.example:7450", apiKey: KEY, insecure: false }, { WAYMARK_INSECURE: "1" }));
  refused(() => r({ server: "http://waymark.example:7450", apiKey: KEY }, { WAYMARK_INSECURE: "0" }));

  const bearer = { authorization: `Bearer ${KEY}` };
  // Loopback: the key does not cross a network.
  for (const server of ["http://127.0.0.1:7450", "127.0.0.1:7450", "http://127.4.5.6:7450", "http://localhost:7450", "LocalHost:7450", "http://[::1]:7450"]) {
    assert.deepEqual(r({ server, apiKey: KEY }).metadata, bearer, server);
  }
  assert.deepEqual(r({ apiKey: KEY }).metadata, bearer, "the default address is loopback");
  // TLS, to any host.
  assert.deepEqual(r({ server: "https://waymark.example:7450", apiKey: KEY }).metadata, bearer);
  assert.equal(r({ server: "waymark.example:7450", apiKey: KEY, tlsCa: pemOf(certs.ca) }).baseUrl, "https://waymark.example:7450");
  // No key: plaintext to any host, as before.
  assert.deepEqual(r({ server: "http://waymark.example:7450" }).metadata, {});
  // Said explicitly: the option, or the variable.
  assert.deepEqual(r({ server: "http://waymark.example:7450", apiKey: KEY, insecure: true }).metadata, bearer);
  assert.deepEqual(r({ server: "http://waymark.example:7450", apiKey: KEY }, { WAYMARK_INSECURE: "1" }).metadata, bearer);
  assert.deepEqual(r({}, { WAYMARK_SERVER: "waymark.example:7450", WAYMARK_API_KEY: KEY, WAYMARK_INSECURE: "1" }).metadata, bearer);

  // The Client and the Worker, at construction.
  const saved = process.env.WAYMARK_INSECURE;
  try {
    delete process.env.WAYMARK_INSECURE;
    refused(() => new Client({ server: "http://waymark.example:7450", apiKey: KEY }));
    refused(() => new Worker({ server: "http://waymark.example:7450", apiKey: KEY }));
    new Client({ server: "http://waymark.example:7450", apiKey: KEY, insecure: true });
    new Worker({ server: "http://waymark.example:7450", apiKey: KEY, insecure: true });
    process.env.WAYMARK_INSECURE = "1";
    new Client({ server: "http://waymark.example:7450", apiKey: KEY });
    new Worker({ server: "http://waymark.example:7450", apiKey: KEY });
  } finally {
    if (saved === undefined) delete process.env.WAYMARK_INSECURE;
    else process.env.WAYMARK_INSECURE = saved;
  }
  // With a transport of your own it would be ignored: refused like the other connection options.
  assert.throws(() => new Client({ transport: {} as never, insecure: true }), /insecure cannot be given with a transport of your own/);
});

/**
 * An in-process HTTP/2 server speaking gRPC (TLS when `tls` is given), closed when the test
 * ends: its sessions are destroyed, as the clients' stay open (kept alive by pings).
 */
async function serve(t: TestContext, routes: (router: ConnectRouter) => void, tls?: http2.SecureServerOptions): Promise<number> {
  const handler = connectNodeAdapter({ routes });
  const server = tls ? http2.createSecureServer(tls, handler) : http2.createServer(handler);
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (s) => {
    sessions.add(s);
    s.once("close", () => sessions.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(
    () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sessions) s.destroy();
      }),
  );
  return (server.address() as { port: number }).port;
}

/** The metadata each call came with, by method. */
type Seen = { method: string; authorization: string | null; namespace: string | null }[];

function welcome(): ServerMessage {
  return create(ServerMessageSchema, {
    kind: { case: "welcome", value: create(WelcomeSchema, { sessionId: "fake", heartbeatIntervalMs: 1000 }) },
  });
}

/** Queues, ReadStream and the worker stream, each noting the metadata it was called with. */
function recording(seen: Seen) {
  const note = (method: string, h: Headers) =>
    seen.push({ method, authorization: h.get("authorization"), namespace: h.get("waymark-namespace") });
  return (router: ConnectRouter) => {
    router.service(QueueService, {
      listQueues: (_req, ctx) => {
        note("listQueues", ctx.requestHeader);
        return {};
      },
    });
    router.service(WorkflowService, {
      // Server-streaming: ends at once (no items).
      async *readStream(_req, ctx) {
        note("readStream", ctx.requestHeader);
      },
    });
    router.service(WorkerService, {
      async *connect(requests, ctx) {
        note("connect", ctx.requestHeader);
        yield welcome();
        for await (const _ of requests);
      },
    });
  };
}

/** Runs a worker until it connects, then stops it. */
async function connectOnce(w: Worker): Promise<void> {
  const ac = new AbortController();
  const connected = new Promise((r) => w.once("connected", r));
  const run = w.run({ signal: ac.signal });
  await Promise.race([connected, run.then(() => Promise.reject(new Error("the worker stopped before it connected")))]);
  ac.abort();
  await run;
}

test("the API key and namespace go with every call: unary, server-streaming and the worker's stream", { timeout: 60_000 }, async (t) => {
  const seen: Seen = [];
  const port = await serve(t, recording(seen));
  const server = `127.0.0.1:${port}`;
  const client = new Client({ server, apiKey: KEY, namespace: "default" });
  // Held where printing the client (or a worker) does not show it.
  assert.ok(!inspect(client, { depth: Infinity }).includes("s3cr3t"));
  assert.ok(!inspect(new Worker({ server, apiKey: KEY }), { depth: Infinity }).includes("s3cr3t"));
  await client.queues.list();
  for await (const _ of client.readStream("wf", "k"));
  await connectOnce(new Worker({ server, apiKey: KEY, namespace: "default", logger: silentLogger }).workflow("w", async () => 1));
  const want = { authorization: `Bearer ${KEY}`, namespace: "default" };
  assert.deepEqual(seen, [
    { method: "listQueues", ...want },
    { method: "readStream", ...want },
    { method: "connect", ...want },
  ]);

  // Without them, neither header is sent.
  seen.length = 0;
  await new Client({ server }).queues.list();
  await connectOnce(new Worker({ server, logger: silentLogger }).workflow("w", async () => 1));
  assert.deepEqual(seen, [
    { method: "listQueues", authorization: null, namespace: null },
    { method: "connect", authorization: null, namespace: null },
  ]);
});

/** Captures every log line and its fields as text. */
function capturing(): { logger: Logger; text: () => string } {
  const lines: string[] = [];
  const at = (level: string) => (message: string, fields?: Record<string, unknown>) => lines.push(`${level} ${message} ${JSON.stringify(fields ?? {})}`);
  return { logger: { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") }, text: () => lines.join("\n") };
}

/** A refusal as the server makes it: the code, and google.rpc.ErrorInfo with `reason` in the status's details. */
function refusal(message: string, code: Code, reason: string): ConnectError {
  const e = new ConnectError(message, code);
  e.details.push({ type: "google.rpc.ErrorInfo", value: new BinaryWriter().tag(1, WireType.LengthDelimited).string(reason).finish() });
  return e;
}

test("a worker whose stream is refused for its key stops with the error, and never logs the key", { timeout: 60_000 }, async (t) => {
  let connects = 0;
  const port = await serve(t, (router) =>
    router.service(WorkerService, {
      async *connect(_requests, ctx) {
        connects += 1;
        const auth = ctx.requestHeader.get("authorization");
        throw refusal(auth ? "unknown API key" : "no API key", Code.Unauthenticated, "UNAUTHENTICATED");
      },
    }),
  );
  const log = capturing();
  const w = new Worker({ server: `127.0.0.1:${port}`, apiKey: KEY, logger: log.logger }).workflow("w", async () => 1);
  const disconnects: Error[] = [];
  w.on("disconnected", (e) => disconnects.push(e));
  // Stopped when the test ends, so that a worker that does not stop fails the test, not the run.
  const stop = new AbortController();
  t.after(() => stop.abort());
  await assert.rejects(w.run({ signal: stop.signal }), (e: unknown) => {
    assert.ok(e instanceof RpcError, String(e));
    assert.equal(e.code, Code.Unauthenticated);
    assert.equal(e.reason, "UNAUTHENTICATED");
    assert.match(e.message, /unknown API key/);
    assert.ok(!inspect(e).includes("s3cr3t"));
    return true;
  });
  assert.equal(connects, 1);
  assert.equal(disconnects.length, 1);
  assert.match(log.text(), /refused this worker's stream/);
  assert.ok(!log.text().includes("s3cr3t"), log.text());
});

test("a worker reconnects after other errors, and stops when a later stream is refused", { timeout: 60_000 }, async (t) => {
  let connects = 0;
  const port = await serve(t, (router) =>
    router.service(WorkerService, {
      async *connect(requests) {
        connects += 1;
        if (connects === 1) throw new ConnectError("database restarting", Code.Unavailable);
        if (connects === 2) throw new ConnectError("something broke", Code.Internal);
        // Welcomed, then refused (as when the worker's key is revoked, or its role does not allow it).
        yield welcome();
        const first = await requests[Symbol.asyncIterator]().next();
        assert.equal(first.done, false);
        throw refusal("this key may not run a worker", Code.PermissionDenied, "ROLE_NOT_ALLOWED");
      },
    }),
  );
  const w = new Worker({ server: `127.0.0.1:${port}`, logger: silentLogger }).workflow("w", async () => 1);
  let connected = 0;
  w.on("connected", () => (connected += 1));
  const stop = new AbortController();
  t.after(() => stop.abort());
  await assert.rejects(w.run({ signal: stop.signal }), (e: unknown) => {
    assert.ok(e instanceof RpcError, String(e));
    assert.equal(e.code, Code.PermissionDenied);
    // The reason is the server's (its ErrorInfo), not one made from the code.
    assert.equal(e.reason, "ROLE_NOT_ALLOWED");
    assert.match(e.message, /worker stream: this key may not run a worker/);
    return true;
  });
  assert.deepEqual([connects, connected], [3, 1]);
});

test("TLS from the environment: the CA, a client certificate for mutual TLS, the key and namespace", { timeout: 60_000 }, async (t) => {
  const seen: Seen = [];
  // Asks for a client certificate signed by the test CA, and refuses a connection without one.
  const port = await serve(t, recording(seen), {
    cert: readFileSync(certs.serverCert),
    key: readFileSync(certs.serverKey),
    ca: readFileSync(certs.ca),
    requestCert: true,
    rejectUnauthorized: true,
  });
  const env = {
    WAYMARK_SERVER: `127.0.0.1:${port}`,
    WAYMARK_TLS_CA: certs.ca,
    WAYMARK_TLS_CERT: certs.clientCert,
    WAYMARK_TLS_KEY: certs.clientKey,
    WAYMARK_API_KEY: KEY,
    WAYMARK_NAMESPACE: "default",
  };
  const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
  t.after(() => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });
  Object.assign(process.env, env);
  await new Client().queues.list();
  await connectOnce(new Worker({ logger: silentLogger }).workflow("w", async () => 1));
  const want = { authorization: `Bearer ${KEY}`, namespace: "default" };
  assert.deepEqual(seen, [
    { method: "listQueues", ...want },
    { method: "connect", ...want },
  ]);

  // PEM text as options works the same, and overrides the environment.
  const server = `https://127.0.0.1:${port}`;
  await new Client({ server, tlsCa: pemOf(certs.ca), tlsCert: pemOf(certs.clientCert), tlsKey: pemOf(certs.clientKey) }).queues.list();

  // Trusting another CA, the client refuses the server; without a client certificate the server
  // refuses the client. Neither is repeated as if the server were unavailable.
  delete process.env.WAYMARK_TLS_CERT;
  delete process.env.WAYMARK_TLS_KEY;
  const refused = async (client: Client, pattern: RegExp) =>
    assert.rejects(client.queues.list({ timeoutMs: 30_000 }), (e: unknown) => {
      assert.ok(e instanceof RpcError, String(e));
      assert.notEqual(e.code, Code.DeadlineExceeded);
      assert.match(e.message, pattern);
      return true;
    });
  await refused(new Client({ server, tlsCa: certs.otherCa, tlsCert: certs.clientCert, tlsKey: certs.clientKey }), /certificate/i);
  await refused(new Client({ server }), /certificate/i);
  await refused(new Client(), /certificate/i);
});
