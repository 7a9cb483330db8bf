// The TypeScript golden workflows run live, on the real server, record the committed golden
// histories — times, UUIDs and message ids aside — as the Rust ones do: this copy makes the same
// calls in the same order. And a live run's history, read back with Client.history, replays
// offline to what the run returned, running nothing. (The offline replays of the committed files
// are in golden.test.ts.)

import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import { Replayer, Worker, silentLogger, type JsonValue } from "../src/index.js";
import { startServer, type TestServer } from "./harness.js";
import * as golden from "./golden-workflows.js";

/**
 * The scenarios run live: file, workflow (the other files are derived from these; see
 * integration-tests/tests/golden.rs: patched_old.json, for one, is golden.patched's history as
 * code without the change made it, which no live run of this code can record).
 */
const LIVE: [string, string][] = [
  ["steps", "golden.steps"],
  ["sleep", "golden.sleep"],
  ["messages", "golden.messages"],
  ["events", "golden.events"],
  ["stream", "golden.stream"],
  ["child", "golden.child"],
  ["remote_retry", "golden.remote"],
  ["drawn", "golden.drawn"],
  ["patched", "golden.patched"],
  // After golden.remote: they call its remote step, whose attempts it counts.
  ["select", "golden.select"],
  ["wait_all", "golden.wait_all"],
  ["update", "golden.update"],
];

/** Values that differ from run to run, blanked for the comparison (`normalized` in integration-tests/tests/golden.rs). */
const VARYING: Record<string, JsonValue> = { wake_at_ms: 0, deadline_ms: 0, now_ms: 0, uuid: "", message_id: "" };

function normalized(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(normalized);
  if (v !== null && typeof v === "object") {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, k in VARYING ? VARYING[k] : normalized(x)]));
  }
  return v;
}

let server: TestServer;
const committed = new Map(golden.goldenFiles());

before(async () => {
  server = await startServer();
  // Stopped in `after`, which runs whatever the tests did.
  await server.worker({}, (w) => golden.register(w));
});
after(() => server?.stop());

for (const [file, workflow] of LIVE) {
  test(`golden.${file}: a live run records the committed history and replays to its output`, async () => {
    const want = committed.get(file);
    assert.ok(want, `contract/histories/${file}.json`);
    // The ids the committed histories were recorded under (a fresh database per test file), so
    // a child's id, derived from its parent's, is the committed one too.
    const id = `golden-${file}`;
    // golden.update takes its number from the update, not its input: the Rust live run
    // (integration-tests/tests/golden.rs) starts it with {}.
    const input = file === "update" ? {} : { n: 41 };
    await server.client.start(workflow, input, { workflowId: id });
    if (file === "update") {
      // The update the Rust live run sends, under the id the committed history records.
      const answer = await server.client.updateWorkflow(id, "add", { n: 41 }, { updateId: "golden-update-1", waitMs: 60_000 });
      assert.deepEqual(answer, { total: 42 });
    }
    const output = await server.client.result(id, { timeoutMs: 60_000 });
    const live = await server.client.history(id);
    assert.deepEqual([live.workflow_name, live.input], [workflow, input]);
    assert.deepEqual(normalized({ returned: output }), normalized(want.expect), `${file}: the output`);
    assert.deepEqual(normalized(live), normalized(want.history), `${file}: the history (make golden writes the committed one)`);
    if (file === "child") {
      // The child's own history is in no golden file: golden.rs's comment specifies it.
      const body = await server.client.history(`${id}/child-0`);
      assert.deepEqual(body, { workflow_id: `${id}/child-0`, workflow_name: "golden.child_body", input: { n: 3 }, steps: [{ step_id: 0, name: "double", output: 6 }] });
    }
    // What was recorded replays to what the run returned, running nothing.
    golden.ran.length = 0;
    const replayer = new Replayer(golden.register(new Worker({ logger: silentLogger })));
    assert.deepEqual(await replayer.replay(live), { outcome: "returned", value: output }, `${file}: the replay`);
    assert.deepEqual(golden.ran, [], `${file}: no step function ran in the replay`);
  });
}
