// Continue-as-new on the real server with real worker processes, mirroring the integration test
// continue_as_new.rs: a workflow that loops by continuing as new keeps its id (its awaiter, its
// inbox), each run starts with an empty history, each ended run is kept as `<id>/run-<n>`
// (CONTINUED_AS_NEW) with its own steps — and a worker killed -9 between runs loses nothing and
// runs no tick twice.

import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { openSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { RpcError } from "../src/index.js";
import { sdkRoot, startServer, waitFor, type TestServer } from "./harness.js";

const ID = "loop-typescript";
const PATIENCE_MS = 60_000;

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
  const p = spawn(process.execPath, [join(sdkRoot, "dist/test/fixtures/looper-worker.js")], {
    env: { ...process.env, WAYMARK_SERVER: server.address, TICK_LOG: log, WORKER_ID: name },
    stdio: ["ignore", "pipe", out],
  });
  procs.push(p);
  let seen = "";
  p.stdout!.on("data", (d) => (seen += String(d)));
  await waitFor(() => seen.includes("connected") || p.exitCode !== null, `${name} to connect`);
  assert.equal(p.exitCode, null, `${name} exited early; see ${name}.log`);
  return p;
}

test("a looping workflow continues as new under its id across a worker killed -9; each ended run keeps its own steps", async () => {
  const client = server.client;
  const ticks = join(server.dir, "ticks.log");
  const a = await workerProcess("worker-a", ticks);
  await waitFor(
    () =>
      client.start("looper", { n: 0, until: 3, wait: true }, { workflowId: ID }).then(
        () => true,
        (e) => (e instanceof RpcError && e.reason === "WORKFLOW_NAME_UNKNOWN" ? false : Promise.reject(e)),
      ),
    `${ID} to start`,
  );
  // An awaiter from before the first run gets the end of the last.
  const awaiter = client.await(ID, { timeoutMs: PATIENCE_MS });
  await client.send(ID, 0, { topic: "go" });

  // The first run ends and the second waits on "go" (its deadline recorded): worker A is killed there.
  const second = await waitFor(async () => {
    const w = await client.get(ID);
    return w.run === 1 && (await client.steps(ID)).length >= 1 ? w : undefined;
  }, "the second run waiting");
  assert.deepEqual(second.input, { n: 1, until: 3, wait: true });
  const exited = new Promise((r) => a.once("exit", r));
  a.kill("SIGKILL");
  await exited;

  const b = await workerProcess("worker-b", ticks);
  // Messages sent to the workflow's id reach whichever run is current, read or not yet.
  for (const i of [1, 2, 3]) await client.send(ID, i, { topic: "go" });
  const done = await client.await(ID, { timeoutMs: PATIENCE_MS });
  assert.deepEqual([done.status, done.output, done.run], ["SUCCESS", 3, 3], JSON.stringify(done.failure));
  const awaited = await awaiter;
  assert.deepEqual([awaited.workflowId, awaited.status, awaited.output], [ID, "SUCCESS", 3]);

  // The current run's history is its own: the recv (its deadline, then the message) and one tick.
  const current = await client.steps(ID);
  assert.deepEqual(
    current.map((s) => s.name),
    ["waymark.recv.deadline", "waymark.recv", "tick"],
  );
  assert.deepEqual([current[1]!.output, current[2]!.output], [{ message: 3 }, 3]);

  // Every ended run kept its own, exactly once each.
  const ended = (await client.list({ statuses: ["CONTINUED_AS_NEW"], workflowName: "looper" })).workflows;
  assert.deepEqual(ended.map((w) => w.workflowId).sort(), [0, 1, 2].map((i) => `${ID}/run-${i}`));
  for (const w of ended) {
    const i = Number(w.workflowId.slice(`${ID}/run-`.length));
    assert.deepEqual([w.status, w.run, w.continuedAsWorkflowId, w.workflowName], ["CONTINUED_AS_NEW", i, ID, "looper"]);
    assert.deepEqual(w.input, { n: i, until: 3, wait: true });
    const steps = await client.steps(w.workflowId);
    assert.deepEqual(
      steps.map((s) => s.name),
      ["waymark.recv.deadline", "waymark.recv", "tick"],
      w.workflowId,
    );
    assert.deepEqual([steps[1]!.output, steps[2]!.output], [{ message: i }, i], `${w.workflowId}: its message and its tick`);
  }

  // Nothing ran twice after the kill: run 0 ticked in worker A, the others in worker B.
  const lines = readFileSync(ticks, "utf8").trim().split("\n");
  assert.deepEqual(lines, [`${ID} tick 0 ${a.pid}`, `${ID} tick 1 ${b.pid}`, `${ID} tick 2 ${b.pid}`, `${ID} tick 3 ${b.pid}`]);
  b.kill("SIGTERM");
});
