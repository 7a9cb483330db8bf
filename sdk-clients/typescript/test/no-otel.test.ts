// Without @opentelemetry/api installed, the SDK works unchanged. The compiled SDK is copied to a
// temporary folder whose node_modules holds only its own dependencies, and a fixture runs a
// workflow (a dispatch with a trace context, a step, a sleep, a child, a remote step) and a
// client call there; no server.

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sdkRoot } from "./harness.js";

test("without @opentelemetry/api a workflow runs and a client calls as before, with no trace context anywhere", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "waymark-ts-no-otel-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, "package.json"), JSON.stringify({ type: "module" }));
  cpSync(join(sdkRoot, "dist/src"), join(dir, "dist/src"), { recursive: true });
  for (const f of ["fakes.js", "fake-server.js", "fixtures/no-otel.js"]) cpSync(join(sdkRoot, "dist/test", f), join(dir, "dist/test", f));
  mkdirSync(join(dir, "node_modules"));
  // The SDK's own dependencies, and nothing of OpenTelemetry.
  for (const scope of ["@bufbuild", "@connectrpc"]) symlinkSync(join(sdkRoot, "node_modules", scope), join(dir, "node_modules", scope));

  const out = await new Promise<string>((resolve, reject) => {
    execFile(process.execPath, [join(dir, "dist/test/fixtures/no-otel.js")], { timeout: 60_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`the fixture failed (${err.code ?? err.signal}): ${stdout}${stderr}`));
      else resolve(stdout);
    });
  });
  assert.deepEqual(JSON.parse(out.trim().split("\n").pop()!), {
    tracingAvailable: false,
    output: "sent",
    traceContexts: [null, null, null],
    got: "wf-1",
    headers: [null],
  });
});
