// The golden histories (contract/histories/, see contract/README.md), the cross-SDK contract for
// replay: each file holds a workflow's recorded history and what replaying it must come to.
// Every file in the directory is replayed here, offline, against the TypeScript copy of the
// golden workflows (test/golden-workflows.ts), and must reach its `expect`. No server is needed.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { Replayer, Worker, silentLogger, type Replayed } from "../src/index.js";
import type { WorkerConfig } from "../src/worker/registry.js";
import { FakeConn } from "./fakes.js";
import * as golden from "./golden-workflows.js";

/** An outcome in the shape of a golden file's `expect`. */
export function expected(r: Replayed): golden.Golden["expect"] {
  switch (r.outcome) {
    case "returned":
      return { returned: r.value };
    case "failed":
      return { failed: r.kind };
    case "suspended":
      return { suspended_at: r.stepId };
    case "continued_as_new":
      throw new Error(`no golden history continues as new, yet one replayed to that (${JSON.stringify(r.input)})`);
  }
}

const files = golden.goldenFiles();

test("the golden histories are there", () => {
  // An empty directory (a wrong path) would otherwise pass by replaying nothing.
  assert.ok(files.length >= 10, `golden histories in ${golden.HISTORIES}: ${files.map(([n]) => n).join(", ")}`);
});

for (const [name, file] of files) {
  test(`golden history ${name} replays to its expected outcome`, async () => {
    // A connection that answers nothing and keeps what it was asked: it must stay empty.
    const conn = new FakeConn(() => assert.fail("a replay sent a request"));
    const replayer = new Replayer(golden.register(new Worker({ logger: silentLogger })), conn);
    golden.ran.length = 0;
    const got = await replayer.replay(file.history);
    assert.deepEqual(expected(got), file.expect, `${name}: ${file.about}${got.outcome === "failed" ? ` (${got.message})` : ""}`);
    // Every call was answered from the history: no step function ran, local or remote, and
    // nothing was sent.
    assert.deepEqual(golden.ran, []);
    assert.deepEqual(conn.kinds(), []);
  });
}

test("the TypeScript copy registers what golden.rs registers", () => {
  // The names a live run records and every SDK replays; the calls inside each workflow are what
  // the histories above check.
  const rs = readFileSync(golden.GOLDEN_RS, "utf8");
  const registered = [...rs.matchAll(/^\s*\.(workflow|step)\("([^"]+)"/gm)].map((m) => [m[1], m[2]]);
  const names = (kind: string) => registered.filter(([k]) => k === kind).map(([, n]) => n).sort();
  const w = golden.register(new Worker({ logger: silentLogger }));
  assert.deepEqual([...w.registeredWorkflows().keys()].sort(), names("workflow"));
  assert.ok(names("workflow").length >= 9);
  // The worker keeps its remote steps to itself: read its config, for this check only.
  const steps = (w as unknown as { config: WorkerConfig }).config.steps;
  assert.deepEqual([...steps.keys()].sort(), names("step"));
});
