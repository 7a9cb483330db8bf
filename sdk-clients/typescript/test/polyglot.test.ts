// Across languages: a TypeScript workflow runs a child workflow that a Rust worker serves (the
// Rust SDK's polyglot example), and receives a message the Rust workflow sends. Skipped when
// the example binary has not been built (failed instead under WAYMARK_NO_SKIP=1).

import { after, before } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, openSync } from "node:fs";
import { dirname, join } from "node:path";
import { RpcError } from "../src/index.js";
import { serverBinary, startServer, waitFor, type TestServer } from "./harness.js";
import { testNeeding } from "./skips.js";

const example = join(dirname(serverBinary()), "examples", "polyglot");
const missing = existsSync(example)
  ? undefined
  : `the Rust SDK's polyglot example is not built: no ${example} beside the server binary ` +
    "(`cargo build --workspace --examples`, part of `make build` at the repository root, builds it)";
let server: TestServer;
let rust: ChildProcess | undefined;

before(async () => {
  if (missing) return;
  server = await startServer();
  rust = spawn(example, [], {
    env: { ...process.env, WAYMARK_SERVER: server.address },
    stdio: ["ignore", "ignore", openSync(join(server.dir, "rust-worker.log"), "a")],
  });
  await server.worker({ appVersion: "1" }, (w) => {
    w.workflow("ts-parent", async (ctx, name: string) => ctx.runChild<string>("greet", name));
    w.workflow("ts-inbox", async (ctx) => ctx.recv<string>("greeting", { timeoutMs: 60_000 }));
  });
});
after(async () => {
  rust?.kill("SIGKILL");
  await server?.stop();
});

testNeeding("a TypeScript workflow and a Rust worker meet", missing, async () => {
  const client = server.client;
  // The Rust worker has registered its workflows once a start by name is accepted.
  await waitFor(
    () =>
      client.start("greet", "Probe", { workflowId: "probe", appVersion: "1" }).then(
        () => true,
        (e) => (e instanceof RpcError && e.reason === "WORKFLOW_NAME_UNKNOWN" ? false : Promise.reject(e)),
      ),
    "the Rust worker to connect",
  );
  const parent = await client.start("ts-parent", "Ada", { appVersion: "1" });
  assert.equal(await client.result(parent.workflow.workflowId, { timeoutMs: 30_000 }), "Hello, Ada, from a Rust workflow!");
  const inbox = await client.start("ts-inbox", null, { appVersion: "1" });
  await client.start("courier", { to: inbox.workflow.workflowId, text: "hi from Rust" }, { appVersion: "1" });
  assert.equal(await client.result(inbox.workflow.workflowId, { timeoutMs: 30_000 }), "hi from Rust");
});
