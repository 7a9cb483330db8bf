// Test harness: a real Waymark server process on a fresh SQLite database and a free port (in the
// clear, or with TLS, mutual TLS and API keys), certificates made for the test, and helpers to
// poll for a condition (tests never sleep to wait for one).

import { execFile, execFileSync, spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:net";
import { mkdtempSync, openSync, existsSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Client, Code, RpcError, Worker, silentLogger, type ConnectionOptions, type WorkerOptions } from "../src/index.js";

const here = dirname(fileURLToPath(import.meta.url));
/** The SDK's folder (tests run from dist/test). */
export const sdkRoot = resolve(here, "../..");
const repoRoot = resolve(sdkRoot, "../..");

export function serverBinary(): string {
  const bin = process.env.WAYMARK_BIN || join(repoRoot, "target/debug/waymark");
  if (!existsSync(bin)) throw new Error(`no server binary at ${bin}: build it or set WAYMARK_BIN`);
  return bin;
}

/** The paths of the certificates `waymark-test-certs` writes (made fresh for each test file). */
export interface Certs {
  dir: string;
  ca: string;
  otherCa: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
}

/** A throwaway CA, server and client certificates, and an unrelated CA: `waymark-test-certs` beside the server binary. */
export function makeCerts(): Certs {
  const bin = join(dirname(serverBinary()), "waymark-test-certs");
  if (!existsSync(bin)) throw new Error(`no ${bin}: build it beside the server binary`);
  const dir = mkdtempSync(join(tmpdir(), "waymark-ts-certs-"));
  execFileSync(bin, [dir], { stdio: ["ignore", "ignore", "inherit"] });
  return {
    dir,
    ca: join(dir, "ca.pem"),
    otherCa: join(dir, "other-ca.pem"),
    serverCert: join(dir, "server.pem"),
    serverKey: join(dir, "server.key"),
    clientCert: join(dir, "client.pem"),
    clientKey: join(dir, "client.key"),
  };
}

async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolvePort(port));
    });
  });
}

/** Polls `predicate` until it returns a truthy value (returned) or the deadline passes (throws). */
export async function waitFor<T>(
  predicate: () => Promise<T> | T,
  what: string,
  { timeoutMs = 30_000, intervalMs = 25 } = {},
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await predicate();
      if (v) return v as NonNullable<T>;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ""}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** How a test server is secured: TLS with `certs` (client certificates required with `mtls`), API keys with `auth`. */
export interface Security {
  tls?: Certs;
  /** Require a client certificate signed by the test CA (`--tls-client-ca`); needs `tls`. */
  mtls?: boolean;
  /** `--auth`, with an admin key the server writes at start (`adminKey`). */
  auth?: boolean;
}

export interface TestServer {
  address: string;
  dir: string;
  /** A client with every credential the server asks for (the admin key under `auth`). */
  client: Client;
  /** What `client` connects with: the address, the CA, the client certificate, the admin key. */
  connection: ConnectionOptions;
  /** The admin key the server made at start (under `auth`). */
  adminKey?: string;
  /**
   * Runs the `waymark` command line against this server (WAYMARK_SERVER, WAYMARK_TLS_*, and
   * WAYMARK_API_KEY the admin key); rejects when it exits with another status than 0.
   */
  cli(args: string[]): Promise<string>;
  /** Creates an API key with `waymark key create --role ROLE` and returns it. */
  createKey(role: "admin" | "client" | "worker" | "reader", name?: string): Promise<string>;
  /** Starts a worker on this server and waits until it is connected; stopped by `stop()`. */
  worker(options: WorkerOptions, register: (w: Worker) => void): Promise<Worker>;
  /** Kills the server (and stops the workers started through it). */
  stop(): Promise<void>;
  /** Kills the server process only, leaving workers to reconnect. */
  kill(): Promise<void>;
  /** Starts the server again on the same port and database. */
  restart(): Promise<void>;
  log(): string;
}

/** Short intervals so recovery and dispatch happen within a test's patience. */
const FAST = ["--recovery-grace", "500ms", "--worker-lease", "3s", "--heartbeat-interval", "500ms", "--recovery-interval", "200ms", "--dispatch-poll-interval", "100ms"];

export async function startServer(extraArgs: string[] = [], security: Security = {}): Promise<TestServer> {
  const dir = mkdtempSync(join(tmpdir(), "waymark-ts-"));
  const port = await freePort();
  const { tls, mtls, auth } = security;
  if (mtls && !tls) throw new Error("mtls needs tls");
  const address = `${tls ? "https" : "http"}://127.0.0.1:${port}`;
  const logPath = join(dir, "server.log");
  const adminKeyPath = join(dir, "admin.key");
  const securityArgs = [
    ...(tls ? ["--tls-cert", tls.serverCert, "--tls-key", tls.serverKey] : []),
    ...(mtls && tls ? ["--tls-client-ca", tls.ca] : []),
    ...(auth ? ["--auth", "--init-admin-key-file", adminKeyPath] : []),
  ];
  const connection: ConnectionOptions = {
    server: address,
    ...(tls ? { tlsCa: tls.ca } : {}),
    ...(mtls && tls ? { tlsCert: tls.clientCert, tlsKey: tls.clientKey } : {}),
  };
  let proc: ChildProcess | undefined;
  let client: Client | undefined;
  const launch = async () => {
    const out = openSync(logPath, "a");
    proc = spawn(
      serverBinary(),
      // A free port for the console: the usual one, beside --listen, may be another server's.
      ["server", "--listen", `127.0.0.1:${port}`, "--database-url", `sqlite:${join(dir, "waymark.db")}`,
        "--console-listen", "127.0.0.1:0", ...FAST, ...securityArgs, ...extraArgs],
      { stdio: ["ignore", out, out] },
    );
    // However the test process ends, the server goes with it.
    const child = proc;
    process.once("exit", () => child.kill("SIGKILL"));
    if (auth && connection.apiKey === undefined) {
      // Up once it refuses a call without a key; by then it has written the key file.
      const keyless = new Client({ ...connection, resendForMs: 0 });
      await waitFor(
        () => keyless.queues.list().then(() => false, (e: unknown) => e instanceof RpcError && e.code === Code.Unauthenticated),
        "the server to refuse a call without a key",
      );
      connection.apiKey = await waitFor(
        () => (existsSync(adminKeyPath) ? /^wmk_\S+/.exec(readFileSync(adminKeyPath, "utf8").trim())?.[0] : undefined),
        "the server's admin key file",
      );
    }
    client ??= new Client(connection);
    const c = client;
    await waitFor(() => c.queues.list().then(() => true), "the server to answer");
  };
  const cliEnv = (): NodeJS.ProcessEnv => {
    const env: NodeJS.ProcessEnv = { ...process.env, WAYMARK_SERVER: address };
    for (const n of ["WAYMARK_TLS_CA", "WAYMARK_TLS_CERT", "WAYMARK_TLS_KEY", "WAYMARK_API_KEY", "WAYMARK_NAMESPACE"]) delete env[n];
    if (tls) env.WAYMARK_TLS_CA = tls.ca;
    if (mtls && tls) Object.assign(env, { WAYMARK_TLS_CERT: tls.clientCert, WAYMARK_TLS_KEY: tls.clientKey });
    if (connection.apiKey) env.WAYMARK_API_KEY = connection.apiKey;
    return env;
  };
  const cli = (args: string[]) =>
    new Promise<string>((resolveCli, reject) => {
      execFile(serverBinary(), args, { env: cliEnv() }, (err, stdout, stderr) => {
        if (err) reject(new Error(`waymark ${args.join(" ")} failed (${err.code ?? err.signal}): ${stderr.trim()}`));
        else resolveCli(stdout);
      });
    });
  const killProc = async () => {
    const p = proc;
    if (!p || p.exitCode !== null) return;
    const exited = new Promise((r) => p.once("exit", r));
    p.kill("SIGKILL");
    await exited;
  };
  const workers: AbortController[] = [];
  const runs: Promise<void>[] = [];
  await launch();
  return {
    address,
    dir,
    client: client!,
    connection,
    get adminKey() {
      return connection.apiKey;
    },
    cli,
    async createKey(role, name) {
      const out = await cli(["key", "create", "--role", role, ...(name ? ["--name", name] : [])]);
      const key = out.split("\n")[0]!.trim();
      if (!key.startsWith("wmk_")) throw new Error("waymark key create printed no key on its first line");
      return key;
    },
    async worker(options, register) {
      // A transport of its own stands for the whole connection.
      const w = new Worker({ ...(options.transport ? {} : connection), logger: silentLogger, ...options });
      register(w);
      const ac = new AbortController();
      workers.push(ac);
      const connected = new Promise((r) => w.once("connected", r));
      const run = w.run({ signal: ac.signal });
      runs.push(run);
      await Promise.race([connected, run.then(() => Promise.reject(new Error("the worker stopped before it connected")))]);
      return w;
    },
    async stop() {
      for (const ac of workers) ac.abort();
      await Promise.all(runs);
      await killProc();
    },
    kill: killProc,
    restart: launch,
    log: () => readFileSync(logPath, "utf8"),
  };
}
