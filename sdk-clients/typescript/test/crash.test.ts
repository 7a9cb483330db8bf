// The crash test: a worker process is killed with SIGKILL mid-workflow; another process
// finishes every workflow, and every step ran exactly once across the two.

import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync, openSync } from "node:fs";
import { join } from "node:path";
import { RpcError } from "../src/index.js";
import { sdkRoot, startServer, waitFor, type TestServer } from "./harness.js";

let server: TestServer;
const procs: ChildProcess[] = [];

before(async () => {
  server = await startServer();
});
after(async () => {
  for (const p of procs) if (p.exitCode === null) p.kill("SIGKILL");
  await server.stop();
});

async function workerProcess(name: string, log: string): Promise<ChildProcess> {
  const out = openSync(join(server.dir, `${name}.log`), "a");
  const p = spawn(process.execPath, [join(sdkRoot, "dist/test/fixtures/crash-worker.js")], {
    env: { ...process.env, WAYMARK_SERVER: server.address, CRASH_LOG: log, WORKER_ID: name },
    stdio: ["ignore", "pipe", out],
  });
  procs.push(p);
  let seen = "";
  p.stdout!.on("data", (d) => (seen += String(d)));
  await waitFor(() => seen.includes("connected") || p.exitCode !== null, `${name} to connect`);
  assert.equal(p.exitCode, null, `${name} exited early; see ${name}.log`);
  return p;
}

// conformance: replay_after_kill
test("a worker killed with SIGKILL mid-workflow: another finishes it, every step ran once", async () => {
  const log = join(server.dir, "steps.log");
  const client = server.client;
  const a = await workerProcess("worker-a", log);
  const ids = ["crash-1", "crash-2", "crash-3"];
  for (const id of ids) {
    await waitFor(
      () =>
        client.start("crashy", null, { workflowId: id }).then(
          () => true,
          (e) => (e instanceof RpcError && e.reason === "WORKFLOW_NAME_UNKNOWN" ? false : Promise.reject(e)),
        ),
      `${id} to start`,
    );
  }
  // Each has run steps one and two and recorded its recv deadline: it is waiting in worker A.
  for (const id of ids) await waitFor(async () => (await client.steps(id)).length >= 3, `${id} to wait`);
  const exited = new Promise((r) => a.once("exit", r));
  a.kill("SIGKILL");
  await exited;
  for (const id of ids) assert.equal((await client.get(id)).status, "PENDING");

  const b = await workerProcess("worker-b", log);
  for (const id of ids) await client.send(id, `go ${id}`, { topic: "go" });
  for (const id of ids) {
    const w = await client.await(id, { timeoutMs: 60_000 });
    assert.equal(w.status, "SUCCESS", `${id}: ${JSON.stringify(w.failure)}`);
    assert.deepEqual(w.output, { go: `go ${id}`, recoveries: 1 });
    assert.ok(w.recoveryAttempts >= 1);
  }

  assert.ok(existsSync(log));
  const lines = readFileSync(log, "utf8").trim().split("\n").map((l) => l.split(" "));
  for (const id of ids) {
    const mine = lines.filter(([w]) => w === id);
    assert.deepEqual(mine.map(([, step]) => step), ["one", "two", "three", "four", "five"], `${id} ran each step once`);
    assert.deepEqual(mine.map(([, , pid]) => Number(pid)), [a.pid, a.pid, b.pid, b.pid, b.pid]);
  }
  b.kill("SIGTERM");
});
