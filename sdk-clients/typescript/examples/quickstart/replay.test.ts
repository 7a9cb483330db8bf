// Replays saved histories against the workflow code in workflows.ts, offline: run it in CI
// before deploying a change to that code.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { test } from "node:test";
import { Replayer } from "waymark-sdk";
import { worker } from "./workflows.js"; // builds the Worker; nothing connects

const histories = new URL("./histories/", import.meta.url); // waymark workflow export ID > histories/ID.json

test("saved histories still replay", async () => {
  const files = readdirSync(histories).filter((f) => f.endsWith(".json"));
  assert.ok(files.length > 0, "no histories in histories/: save some with `waymark workflow export ID`");
  const replayer = new Replayer(worker);
  for (const f of files) {
    const r = await replayer.replay(JSON.parse(readFileSync(new URL(f, histories), "utf8")));
    if (r.outcome === "failed") assert.fail(`${f}: ${r.kind}: ${r.message}`);
  }
});
