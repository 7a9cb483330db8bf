// Test harness: a real Waymark server process on a fresh SQLite database and a free port, and
// helpers to poll for a condition (tests never sleep to wait for one).

import { spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:net";
import { mkdtempSync, openSync, existsSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Client, Worker, silentLogger, type WorkerOptions } from "../src/index.js";

const here = dirname(fileURLToPath(import.meta.url));
/** The SDK's folder (tests run from dist/test). */
export const sdkRoot = resolve(here, "../..");
const repoRoot = resolve(sdkRoot, "../..");

export function serverBinary(): string {
  const bin = process.env.WAYMARK_BIN || join(repoRoot, "target/debug/waymark");
  if (!existsSync(bin)) throw new Error(`no server binary at ${bin}: build it or set WAYMARK_BIN`);
  return bin;
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

export interface TestServer {
  address: string;
  dir: string;
  client: Client;
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

export async function startServer(extraArgs: string[] = []): Promise<TestServer> {
  const dir = mkdtempSync(join(tmpdir(), "waymark-ts-"));
  const port = await freePort();
  const address = `http://127.0.0.1:${port}`;
  const logPath = join(dir, "server.log");
  let proc: ChildProcess | undefined;
  const launch = async () => {
    const out = openSync(logPath, "a");
    proc = spawn(
      serverBinary(),
      ["server", "--listen", `127.0.0.1:${port}`, "--database-url", `sqlite:${join(dir, "waymark.db")}`, ...FAST, ...extraArgs],
      { stdio: ["ignore", out, out] },
    );
    // However the test process ends, the server goes with it.
    const child = proc;
    process.once("exit", () => child.kill("SIGKILL"));
    await waitFor(() => client.queues.list().then(() => true), "the server to answer");
  };
  const killProc = async () => {
    const p = proc;
    if (!p || p.exitCode !== null) return;
    const exited = new Promise((r) => p.once("exit", r));
    p.kill("SIGKILL");
    await exited;
  };
  const client = new Client({ server: address });
  const workers: AbortController[] = [];
  const runs: Promise<void>[] = [];
  await launch();
  return {
    address,
    dir,
    client,
    async worker(options, register) {
      const w = new Worker({ server: address, logger: silentLogger, ...options });
      register(w);
      const ac = new AbortController();
      workers.push(ac);
      const connected = new Promise((r) => w.once("connected", r));
      runs.push(w.run({ signal: ac.signal }));
      await connected;
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
