// The console in a real browser against a real server: `waymark server --auth` on a fresh SQLite
// database (seeded with many finished workflows when WAYMARK_SEED_BIN is given), workers and a
// client of the TypeScript SDK making the workflows the pages show, and Debian's chromium driven
// by playwright-core. Nothing sleeps to wait: every wait is on a condition, with a deadline.
//
// Env: WAYMARK_BIN (default ../target/debug/waymark, or under CARGO_TARGET_DIR), WAYMARK_CONSOLE_SHOTS (screenshots;
// default console/test-results/), WAYMARK_SEED_BIN and WAYMARK_CONSOLE_SEED (workflows to seed,
// default 1,000,000), WAYMARK_CHROMIUM (default /usr/bin/chromium), WAYMARK_NO_SKIP=1 (a
// missing program fails instead of skipping), WAYMARK_CONSOLE_DEV=1 (serve dist/ from disk
// through devserver.mjs instead of the files embedded in the server binary).
//
// Prints `CONSOLE_TIMINGS {"list_ms":…,"workflow_ms":…,"rows":…,"assets_gzip_bytes":…}`.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile, execFileSync, spawn } from "node:child_process";
import { createServer } from "node:net";
import { existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { gzipSync } from "node:zlib";

const here = dirname(fileURLToPath(import.meta.url));
const consoleRoot = resolve(here, "..");
const repoRoot = resolve(consoleRoot, "..");
const dist = join(repoRoot, "server/assets/console");
const targetDir = process.env.CARGO_TARGET_DIR ? resolve(repoRoot, process.env.CARGO_TARGET_DIR) : join(repoRoot, "target");
const bin = process.env.WAYMARK_BIN || join(targetDir, "debug/waymark");
const chromiumPath = process.env.WAYMARK_CHROMIUM || "/usr/bin/chromium";
const sdkEntry = join(repoRoot, "sdk-clients/typescript/dist/src/index.js");
const shots = resolve(process.env.WAYMARK_CONSOLE_SHOTS || join(consoleRoot, "test-results"));
const NS = "default";

/** What this machine lacks for the test, if anything. */
function missing() {
  if (!existsSync(bin)) return `no server binary at ${bin}: build it (cargo build) or set WAYMARK_BIN`;
  const help = execFileSync(bin, ["server", "--help"], { encoding: "utf8" });
  if (!help.includes("--console-listen")) return `${bin} has no --console-listen: a server without the console`;
  if (!existsSync(chromiumPath)) return `no chromium at ${chromiumPath}: apt-get install -y chromium`;
  if (!existsSync(sdkEntry)) return `no TypeScript SDK build at ${sdkEntry}: make -C sdk-clients/typescript build`;
  if (!existsSync(join(dist, "index.html"))) return "no server/assets/console: make -C console build";
  return undefined;
}

const lacking = missing();
const forbidSkips = process.env.WAYMARK_NO_SKIP === "1";

/** Declares a test that needs the server, chromium and the SDK (skipped, or failed under WAYMARK_NO_SKIP=1, without them). */
function scenario(name, fn) {
  if (lacking === undefined) test(name, { timeout: 300_000 }, fn);
  else if (forbidSkips) test(name, () => assert.fail(`${lacking}; WAYMARK_NO_SKIP=1 forbids skipping this test`));
  else test(name, { skip: lacking }, () => {});
}

async function freePort() {
  return new Promise((resolvePort, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolvePort(port));
    });
  });
}

/** Polls `predicate` until it returns a truthy value (returned) or the deadline passes (throws). */
async function waitFor(predicate, what, { timeoutMs = 60_000, intervalMs = 50 } = {}) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      const v = await predicate();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ""}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

function run(file, args, env = {}) {
  return new Promise((resolveRun, reject) => {
    execFile(file, args, { env: { ...process.env, ...env }, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${file} ${args.join(" ")} failed (${err.code ?? err.signal}): ${stderr.trim()}`));
      else resolveRun(stdout);
    });
  });
}

/** Total bytes of dist/'s files, each gzip-compressed at level 9. */
function assetsGzipBytes() {
  return readdirSync(dist)
    .filter((f) => !f.startsWith("."))
    .reduce((sum, f) => sum + gzipSync(readFileSync(join(dist, f)), { level: 9 }).length, 0);
}

// Shared by the tests below, in order.
const s = {};
let counter = 0;

before(async () => {
  if (lacking !== undefined) return;
  mkdirSync(shots, { recursive: true });
  s.dir = mkdtempSync(join(tmpdir(), "waymark-console-"));
  const db = join(s.dir, "w.db");
  s.seeded = 0;
  if (process.env.WAYMARK_SEED_BIN) {
    s.seeded = Number(process.env.WAYMARK_CONSOLE_SEED || 1_000_000);
    const t = Date.now();
    await run(process.env.WAYMARK_SEED_BIN, ["--database-url", `sqlite:${db}`, "--workflows", String(s.seeded)]);
    console.log(`# seeded ${s.seeded} workflows in ${Date.now() - t} ms`);
  }
  const port = await freePort();
  const consolePort = await freePort();
  s.address = `http://127.0.0.1:${port}`;
  s.consoleUrl = `http://127.0.0.1:${consolePort}`;
  const keyFile = join(s.dir, "admin.key");
  s.logPath = join(s.dir, "server.log");
  const out = openSync(s.logPath, "a");
  s.server = spawn(
    bin,
    [
      "server",
      "--database-url", `sqlite:${db}`,
      "--listen", `127.0.0.1:${port}`,
      "--console-listen", `127.0.0.1:${consolePort}`,
      "--auth",
      "--init-admin-key-file", keyFile,
      "--dispatch-poll-interval", "100ms",
    ],
    { stdio: ["ignore", out, out] },
  );
  const proc = s.server;
  process.once("exit", () => proc.kill("SIGKILL"));
  s.serverExit = new Promise((r) => proc.once("exit", (code, signal) => r({ code, signal })));

  s.adminKey = await waitFor(() => {
    if (proc.exitCode !== null) throw new Error(`the server exited (${proc.exitCode}): ${readFileSync(s.logPath, "utf8").slice(-2000)}`);
    return existsSync(keyFile) ? /^wmk_\S+/.exec(readFileSync(keyFile, "utf8").trim())?.[0] : undefined;
  }, "the server's admin key file", { timeoutMs: 120_000 });

  s.sdk = await import(pathToFileURL(sdkEntry).href);
  const { Client } = s.sdk;
  s.client = new Client({ server: s.address, apiKey: s.adminKey });
  await waitFor(() => s.client.queues.list().then(() => true), "the server to answer", { timeoutMs: 120_000 });
  await waitFor(() => fetch(`${s.consoleUrl}/`).then(() => true), "the console port to answer");

  // The browser is served either the files embedded in the server or, under
  // WAYMARK_CONSOLE_DEV=1, dist/ from disk through the development server.
  if (process.env.WAYMARK_CONSOLE_DEV === "1") {
    const { startDevServer } = await import(pathToFileURL(join(consoleRoot, "devserver.mjs")).href);
    s.dev = await startDevServer({ upstream: s.consoleUrl, dist });
    s.origin = s.dev.origin;
  } else {
    const served = Buffer.from(await (await fetch(`${s.consoleUrl}/app.js`)).arrayBuffer());
    assert.ok(
      served.equals(readFileSync(join(dist, "app.js"))),
      `the server at ${bin} embeds another server/assets/console/app.js than the one on disk: build the server again, or run with WAYMARK_CONSOLE_DEV=1`,
    );
    s.origin = s.consoleUrl;
  }

  const env = { WAYMARK_SERVER: s.address, WAYMARK_API_KEY: s.adminKey };
  const keyOf = async (role, name) => {
    const line = (await run(bin, ["key", "create", "--role", role, "--name", name], env)).split("\n")[0].trim();
    assert.match(line, /^wmk_/, `waymark key create printed no key: ${line}`);
    return line;
  };
  s.readerKey = await keyOf("reader", "console-reader");
  s.workerKey = await keyOf("worker", "console-worker");

  const { Worker, silentLogger } = s.sdk;
  s.worker = new Worker({ server: s.address, apiKey: s.workerKey, appName: "console-test", appVersion: "1", logger: silentLogger, parkAfterMs: null });
  s.worker.workflow("console.fail", async (ctx) => {
    await ctx.step("prepare", () => "ready");
    await ctx.step("explode", () => {
      throw new Error("boom: the card was declined");
    });
    return "unreachable";
  });
  s.worker.workflow("console.wait", async (ctx) => {
    const m = await ctx.recv("go", { timeoutMs: 600_000 });
    return { got: m ?? null };
  });
  s.worker.workflow("console.stream", async (ctx) => {
    await ctx.writeStream("progress", { n: 1, note: "first value" });
    await ctx.recv("next", { timeoutMs: 600_000 });
    await ctx.writeStream("progress", { n: 2, note: "second value" });
    return "streamed";
  });
  // Step 2's output counts the times its function ran in this process: a fork from step 1
  // runs it again and differs there (steps 0 and 1 are the same in every run).
  s.worker.workflow("console.steps", async (ctx) => {
    const a = await ctx.step("one", () => "a");
    // Its first attempt fails: the timeline marks it retried.
    const b = await ctx.step("two", ({ attempt }) => {
      if (attempt === 1) throw new Error("flaky");
      return "b";
    }, { retry: { maxAttempts: 3, initialIntervalMs: 10 } });
    const c = await ctx.step("three", () => `run-${++counter}`);
    return [a, b, c];
  });
  s.worker.workflow("console.parent", async (ctx) => ctx.runChild("console.steps", null, { workflowId: "ct-child" }).catch((e) => `child failed: ${e.message}`));
  s.workerStop = new AbortController();
  const connected = new Promise((r) => s.worker.once("connected", r));
  s.workerRun = s.worker.run({ signal: s.workerStop.signal });
  await Promise.race([connected, s.workerRun.then(() => Promise.reject(new Error("the worker stopped before it connected")))]);

  const start = (name, id, input = null) => s.client.start(name, input, { workflowId: id });
  await start("console.steps", "ct-steps", { order: 7 });
  await start("console.fail", "ct-fail");
  await start("console.wait", "ct-wait");
  await start("console.wait", "ct-cancel");
  await start("console.stream", "ct-stream");
  await start("console.steps", "ct.dotted");
  await start("console.parent", "ct-parent");
  s.started = 8;
  await s.client.await("ct-steps", { timeoutMs: 60_000 });
  await s.client.await("ct-fail", { timeoutMs: 60_000 });
  await s.client.await("ct.dotted", { timeoutMs: 60_000 });
  await s.client.await("ct-parent", { timeoutMs: 60_000 });
  await s.client.schedules.create({ name: "nightly", cron: "0 3 * * *", timezone: "UTC", workflowName: "console.steps", input: { nightly: true } });

  const { chromium } = await import("playwright-core");
  s.browser = await chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  s.admin = await newPage();
});

after(async () => {
  if (lacking !== undefined) return;
  await s.browser?.close().catch(() => {});
  s.workerStop?.abort();
  await s.workerRun?.catch(() => {});
  await s.dev?.close();
  if (s.server && s.server.exitCode === null) {
    s.server.kill("SIGTERM");
    const exited = await Promise.race([s.serverExit, new Promise((r) => setTimeout(() => r(undefined), 10_000))]);
    if (!exited) s.server.kill("SIGKILL");
  }
  const log = s.logPath && existsSync(s.logPath) ? readFileSync(s.logPath, "utf8") : "";
  if (/panicked at/.test(log)) console.log(`# the server panicked:\n${log.slice(-4000)}`);
  if (s.dir) rmSync(s.dir, { recursive: true, force: true });
  assert.ok(!/panicked at/.test(log), "the server panicked (its log is printed above)");
});

/** A page of a fresh browser context (its own sessionStorage), failing the test on a page error. */
async function newPage() {
  const context = await s.browser.newContext({ viewport: { width: 1440, height: 960 } });
  const page = await context.newPage();
  page.errors = [];
  page.on("pageerror", (e) => page.errors.push(e.message));
  page.on("console", (m) => {
    if (m.type() === "error") page.errors.push(`console: ${m.text()}`);
  });
  return page;
}

const tid = (id) => `[data-testid="${id}"]`;
const wfPath = (id) => `/ns/${NS}/workflows/${encodeURIComponent(id)}`;

async function shot(page, name, locator) {
  const path = join(shots, `${name}.png`);
  if (locator) await locator.screenshot({ path });
  else await page.screenshot({ path, fullPage: true });
}

async function signIn(page, key) {
  await page.goto(`${s.origin}/`);
  await page.locator(tid("signin-key")).waitFor();
  await page.fill(tid("signin-key"), key);
  await page.click(tid("signin-submit"));
}

/** ms from navigation start to a performance mark, once the page has set it. */
async function markMs(page, name) {
  return waitFor(
    () => page.evaluate((n) => performance.getEntriesByName(n)[0]?.startTime, name),
    `the performance mark ${name}`,
  );
}

async function wfStatus(page) {
  return page.locator(tid("wf-status")).getAttribute("data-status");
}

async function noPageErrors(page) {
  // A refused call logs nothing; anything here is the app's own failure.
  const errors = page.errors.filter((e) => !/Failed to load resource/.test(e));
  assert.deepEqual(errors, [], "errors in the page");
}

scenario("sign-in: the admin key signs in and WhoAmI names its role", async () => {
  const page = s.admin;
  await page.goto(`${s.origin}/`);
  await page.locator(tid("signin-key")).waitFor();
  assert.match(page.url(), /\/signin/);
  await shot(page, "signin");
  await page.fill(tid("signin-key"), "wmk_0123456789abcdef_notakey");
  await page.click(tid("signin-submit"));
  await page.locator(tid("error")).waitFor();
  await page.fill(tid("signin-key"), s.adminKey);
  await page.click(tid("signin-submit"));
  await page.locator(tid("whoami")).waitFor();
  assert.match(await page.locator(tid("whoami")).textContent(), /admin/);
  await waitFor(() => new URL(page.url()).pathname === `/ns/${NS}/workflows`, "the redirect to the first namespace's workflows");
  const stored = await page.evaluate(() => [Object.keys(sessionStorage), Object.keys(localStorage)]);
  assert.ok(stored[0].length > 0 && !JSON.stringify(await page.evaluate(() => ({ ...localStorage }))).includes("wmk_"), "the key is kept in sessionStorage only");
  assert.deepEqual(await page.locator(`${tid("namespace-switch")} option`).allTextContents(), [NS]);
});

scenario("list: every workflow, filters kept in the URL, live refresh", async () => {
  const page = s.admin;
  await page.goto(`${s.origin}/ns/${NS}/workflows`);
  for (const id of ["ct-steps", "ct-fail", "ct-wait", "ct-cancel", "ct-stream"]) {
    await page.locator(`${tid("workflow-row")}[data-workflow-id="${id}"]`).waitFor();
  }
  s.listMs = await markMs(page, "waymark:list-painted");
  s.listRows = await page.locator(tid("workflow-row")).count();
  // An id with a dot opens from its link (a path whose last segment has a dot is a file to the server).
  await page.locator(`${tid("workflow-row")}[data-workflow-id="ct.dotted"] a`).click();
  await waitFor(async () => (await page.locator(tid("wf-status")).count()) === 1 && (await wfStatus(page)) === "SUCCESS", "the dotted id's page");
  await page.goBack();
  await page.locator(`${tid("workflow-row")}[data-workflow-id="ct-fail"]`).waitFor();
  assert.equal(await page.locator(`${tid("workflow-row")}[data-workflow-id="ct-fail"]`).getAttribute("data-status"), "ERROR");
  await shot(page, "list");
  if (await page.locator(tid("page-next")).isEnabled()) {
    // More than a page (a seeded database): Next by token, and Previous back to the first.
    const first = await page.locator(tid("workflow-row")).first().getAttribute("data-workflow-id");
    await page.click(tid("page-next"));
    await waitFor(async () => (await page.locator(tid("workflow-row")).first().getAttribute("data-workflow-id")) !== first, "the second page");
    assert.equal(await page.locator(`${tid("workflow-row")}[data-workflow-id="ct-fail"]`).count(), 0);
    await page.click(tid("page-prev"));
    await page.locator(`${tid("workflow-row")}[data-workflow-id="ct-fail"]`).waitFor();
  }

  await page.selectOption(tid("filter-status"), "ERROR");
  await waitFor(() => new URL(page.url()).searchParams.get("status") === "ERROR", "status=ERROR in the URL");
  await waitFor(async () => {
    const statuses = await page.locator(tid("workflow-row")).evaluateAll((rows) => rows.map((r) => r.getAttribute("data-status")));
    return statuses.length > 0 && statuses.every((st) => st === "ERROR");
  }, "only ERROR rows");
  await page.locator(`${tid("workflow-row")}[data-workflow-id="ct-fail"]`).waitFor();
  assert.equal(await page.locator(`${tid("workflow-row")}[data-workflow-id="ct-wait"]`).count(), 0);

  // The URL restores the filters.
  await page.goto(`${s.origin}/ns/${NS}/workflows?status=ERROR&prefix=ct-`);
  assert.equal(await page.locator(tid("filter-status")).inputValue(), "ERROR");
  assert.equal(await page.locator(tid("filter-prefix")).inputValue(), "ct-");
  await page.locator(`${tid("workflow-row")}[data-workflow-id="ct-fail"]`).waitFor();
  assert.equal(await page.locator(tid("workflow-row")).count(), 1);

  // Typing a filter writes it to the URL.
  await page.goto(`${s.origin}/ns/${NS}/workflows`);
  await page.fill(tid("filter-name"), "console.wait");
  await waitFor(() => new URL(page.url()).searchParams.get("name") === "console.wait", "name=console.wait in the URL");
  await waitFor(async () => (await page.locator(tid("workflow-row")).count()) === 2, "the two console.wait rows");

  // Live: a workflow started now appears without a reload.
  await page.evaluate(() => (window.__sameDocument = true));
  await s.client.start("console.wait", null, { workflowId: "ct-live" });
  s.started += 1;
  await page.locator(`${tid("workflow-row")}[data-workflow-id="ct-live"]`).waitFor({ timeout: 30_000 });
  assert.equal(await page.evaluate(() => window.__sameDocument), true, "the page was reloaded");
  await s.client.cancel("ct-live");

  // Count matching asks once, on request.
  await page.getByRole("button", { name: "Count matching" }).click();
  await waitFor(async () => /3 workflows match/.test((await page.locator(tid("count")).textContent()) ?? ""), "the count");

  // Bulk: a dry run counts first, then the action runs batch by batch.
  await page.goto(`${s.origin}/ns/${NS}/workflows?prefix=ct-live`);
  await page.locator(`${tid("workflow-row")}[data-workflow-id="ct-live"][data-status="CANCELLED"]`).waitFor();
  await page.selectOption(tid("bulk-action"), "delete");
  await page.locator(tid("bulk-summary")).waitFor();
  assert.match(await page.locator(tid("bulk-summary")).textContent(), /This will delete 1 workflow\b/);
  await shot(page, "bulk");
  await page.click(tid("bulk-confirm"));
  await waitFor(async () => /Done\./.test(await page.locator(tid("bulk-progress")).textContent()), "the bulk delete to finish");
  assert.match(await page.locator(tid("bulk-progress")).textContent(), /Deleted 1 workflow of 1/);
  await page.getByRole("button", { name: "Close" }).click();
  await waitFor(async () => (await page.locator(tid("workflow-row")).count()) === 0, "the deleted row to go");
  s.started -= 1;

  // Keyboard: j/k move the selection, Enter opens it; g q goes to the queues; ? lists the keys.
  await page.goto(`${s.origin}/ns/${NS}/workflows?prefix=ct-`);
  await page.locator(`${tid("workflow-row")}[data-workflow-id="ct-steps"]`).waitFor();
  const ids = await page.locator(tid("workflow-row")).evaluateAll((rows) => rows.map((r) => r.getAttribute("data-workflow-id")));
  await page.keyboard.press("j");
  await page.keyboard.press("j");
  await page.keyboard.press("j");
  await page.keyboard.press("k");
  await page.keyboard.press("Enter");
  await waitFor(() => new URL(page.url()).pathname === wfPath(ids[1]), `the second row's page (${ids[1]})`);
  await page.locator(tid("wf-status")).waitFor();
  await page.keyboard.press("g");
  await page.keyboard.press("q");
  await waitFor(() => new URL(page.url()).pathname === `/ns/${NS}/queues`, "g q to the queues");
  await page.keyboard.press("?");
  await page.locator("dialog[open] table.shortcuts").waitFor();
  await page.keyboard.press("Escape");
  await page.goto(`${s.origin}/ns/${NS}/workflows`);
  await page.locator(tid("workflow-row")).first().waitFor();
  await page.keyboard.press("/");
  assert.equal(await page.evaluate(() => document.activeElement?.getAttribute("data-testid")), "filter-status");

  // The dark theme, as the system asks for it.
  await page.emulateMedia({ colorScheme: "dark" });
  await shot(page, "list-dark");
  await page.emulateMedia({ colorScheme: "light" });
  await noPageErrors(page);
});

scenario("workflow page: the failure, the timeline and the steps", async () => {
  const page = s.admin;
  await page.goto(`${s.origin}${wfPath("ct-fail")}`);
  await page.locator(tid("timeline-step")).first().waitFor();
  s.workflowMs = await markMs(page, "waymark:workflow-painted");
  assert.equal(await wfStatus(page), "ERROR");
  assert.equal((await page.locator(tid("wf-status")).textContent()).trim(), "ERROR");
  assert.match(await page.locator(tid("wf-failure")).textContent(), /boom: the card was declined/);
  const steps = await page.locator(tid("timeline-step")).evaluateAll((rows) => rows.map((r) => [r.getAttribute("data-step-id"), r.textContent]));
  assert.equal(steps.length, 2, JSON.stringify(steps));
  assert.equal(steps[0][0], "0");
  assert.equal(steps[1][0], "1");
  assert.match(steps[1][1], /explode/);
  assert.match(steps[1][1], /failed/);
  await page.locator(`${tid("timeline-step")}[data-step-id="1"]`).focus();
  assert.match(await page.locator(tid("timeline-detail")).textContent(), /explode/);
  await shot(page, "workflow");
  await shot(page, "timeline", page.locator(tid("timeline")));

  // A parent lists its child, which links back to it.
  await page.goto(`${s.origin}${wfPath("ct-parent")}`);
  await page.locator(`${tid("child")}[data-workflow-id="ct-child"] a`).click();
  await waitFor(() => new URL(page.url()).pathname === wfPath("ct-child"), "the child's page");
  assert.equal(await page.locator(tid("parent-link")).textContent(), "ct-parent");
  await noPageErrors(page);
});

scenario("streams: a value written while the page is open appears without a reload", async () => {
  const page = s.admin;
  await page.goto(`${s.origin}${wfPath("ct-stream")}`);
  await page.locator(tid("stream-value")).first().waitFor({ timeout: 30_000 });
  assert.match(await page.locator(tid("stream-value")).first().textContent(), /first value/);
  await page.evaluate(() => (window.__sameDocument = true));
  await s.client.send("ct-stream", { go: true }, { topic: "next" });
  await waitFor(async () => (await page.locator(tid("stream-value")).count()) === 2, "the second stream value", { timeoutMs: 30_000 });
  assert.match(await page.locator(tid("stream-value")).nth(1).textContent(), /second value/);
  assert.equal(await page.evaluate(() => window.__sameDocument), true, "the page was reloaded");
  await waitFor(async () => (await wfStatus(page)) === "SUCCESS", "the streaming workflow to finish on the page");
  await noPageErrors(page);
});

scenario("actions: send a message, cancel, fork from a step, compare with the source", async () => {
  const page = s.admin;
  // Send: the waiting workflow takes it and finishes, seen by the page's live refresh.
  await page.goto(`${s.origin}${wfPath("ct-wait")}`);
  await page.locator(tid("waiting-on")).waitFor();
  await waitFor(async () => /go/.test(await page.locator(tid("waiting-on")).textContent()), "the wait on topic go");
  await page.click(tid("action-send"));
  await page.fill(tid("send-topic"), "go");
  await page.fill(tid("send-payload"), '{"approved": true}');
  await shot(page, "send");
  await page.click(tid("confirm"));
  await page.locator(tid("sent")).waitFor();
  await page.getByRole("button", { name: "Close" }).click();
  await waitFor(async () => (await wfStatus(page)) === "SUCCESS", "ct-wait to finish after the message", { timeoutMs: 30_000 });
  await page.locator(tid("message-row")).first().waitFor();
  await shot(page, "messages");

  // Cancel.
  await page.goto(`${s.origin}${wfPath("ct-cancel")}`);
  await page.click(tid("action-cancel"));
  await page.click(tid("confirm"));
  await waitFor(async () => (await wfStatus(page)) === "CANCELLED", "ct-cancel to be cancelled", { timeoutMs: 30_000 });

  // A refusal is shown with its reason: a second fork with an id already taken.
  await page.goto(`${s.origin}${wfPath("ct-steps")}`);
  await page.locator(tid("timeline-step")).nth(2).waitFor();
  assert.match(await page.locator(`${tid("timeline-step")}[data-step-id="1"]`).textContent(), /2 attempts/);
  await page.click(tid("action-fork"));
  await page.selectOption(tid("fork-step"), "1");
  await page.fill(tid("fork-id"), "ct-fail");
  await page.click(tid("confirm"));
  await page.locator(`dialog ${tid("error")}`).waitFor();
  assert.match(await page.locator(`dialog ${tid("error")}`).textContent(), /WORKFLOW_ID_CONFLICT/);

  // Fork from step 1, landing on the new workflow.
  await page.fill(tid("fork-id"), "ct-steps-fork");
  await page.click(tid("confirm"));
  await waitFor(() => new URL(page.url()).pathname === wfPath("ct-steps-fork"), "the fork's page");
  await waitFor(async () => (await wfStatus(page)) === "SUCCESS", "the fork to finish", { timeoutMs: 30_000 });
  assert.equal(await page.locator(tid("forked-from")).textContent(), "ct-steps");
  await page.locator(`${tid("timeline-step")}[data-step-id="2"]`).waitFor();
  await shot(page, "fork");

  // Compare it with its source: they part at step 2 (step 1 ran again with the same result).
  await page.click(tid("compare-link"));
  await page.locator(tid("diverged-at")).waitFor();
  const u = new URL(page.url());
  assert.equal(u.searchParams.get("a"), "ct-steps");
  assert.equal(u.searchParams.get("b"), "ct-steps-fork");
  assert.equal(await page.locator(tid("diverged-at")).getAttribute("data-step-id"), "2");
  assert.match(await page.locator(tid("diverged-at")).textContent(), /step 2/);
  assert.equal(await page.locator(`${tid("compare-row")}[data-differs="true"]`).count(), 1);
  await shot(page, "compare");
  await noPageErrors(page);
});

scenario("queues, workers, schedules and admin pages", async () => {
  const page = s.admin;
  await page.goto(`${s.origin}/ns/${NS}/queues`);
  await page.locator(`${tid("queue-row")}[data-queue="default"]`).waitFor();
  await shot(page, "queues");
  await page.goto(`${s.origin}/ns/${NS}/queues/default`);
  await page.locator(tid("queue-stats")).waitFor();
  await page.locator("figure.chart").waitFor();
  assert.match(await page.locator("figure.chart figcaption").textContent(), /dispatched by this replica, per minute, last 15 min/);
  await shot(page, "queue");

  // A queue made, limited, and deleted from the pages.
  await page.goto(`${s.origin}/ns/${NS}/queues`);
  await page.click(tid("queue-create"));
  await page.fill(tid("queue-name"), "ct-queue");
  await page.fill(tid("limit-worker"), "2");
  await page.click(tid("confirm"));
  await waitFor(() => new URL(page.url()).pathname === `/ns/${NS}/queues/ct-queue`, "the new queue's page");
  await page.click(tid("queue-edit"));
  assert.equal(await page.locator(tid("limit-worker")).inputValue(), "2");
  await page.fill(tid("limit-global"), "5");
  await page.click(tid("confirm"));
  await waitFor(async () => (await s.client.queues.get("ct-queue")).limits.globalConcurrency === 5, "the global limit saved");
  assert.equal((await s.client.queues.get("ct-queue")).limits.workerConcurrency, 2);
  await page.click(tid("queue-delete"));
  await page.click(tid("confirm"));
  await waitFor(() => new URL(page.url()).pathname === `/ns/${NS}/queues`, "back to the queues");
  await page.locator(`${tid("queue-row")}[data-queue="default"]`).waitFor();
  assert.equal(await page.locator(`${tid("queue-row")}[data-queue="ct-queue"]`).count(), 0);

  await page.goto(`${s.origin}/ns/${NS}/workers`);
  await page.locator(tid("worker-row")).first().waitFor();
  assert.match(await page.locator(tid("worker-row")).first().textContent(), /console-test/);
  await shot(page, "workers");

  await page.goto(`${s.origin}/ns/${NS}/schedules`);
  await page.locator(`${tid("schedule-row")}[data-schedule="nightly"]`).waitFor();
  await shot(page, "schedules");
  await page.goto(`${s.origin}/ns/${NS}/schedules/nightly`);
  await page.locator(`${tid("upcoming")} li`).first().waitFor();
  assert.ok((await page.locator(`${tid("upcoming")} li`).count()) >= 1);
  await shot(page, "schedule");

  await page.goto(`${s.origin}/admin`);
  await page.locator(`${tid("key-row")}`).first().waitFor();
  await page.locator(`${tid("namespace-row")}[data-namespace="default"]`).waitFor();
  // A key made here is shown once.
  await page.click(tid("key-create"));
  await page.fill(tid("key-name"), "made-in-the-console");
  await page.selectOption(tid("key-role"), "1");
  await page.fill(tid("key-namespaces"), NS);
  await page.click(tid("confirm"));
  await page.locator(tid("new-key-secret")).waitFor();
  s.consoleMadeKey = (await page.locator(tid("new-key-secret")).textContent()).trim();
  assert.match(s.consoleMadeKey, /^wmk_/);
  await shot(page, "admin");
  await page.getByRole("button", { name: "Close" }).click();

  // A namespace made here appears in the switcher, which goes to it.
  await page.click(tid("namespace-create"));
  await page.fill(tid("namespace-name"), "team-b");
  await page.click(tid("confirm"));
  await page.locator(`${tid("namespace-row")}[data-namespace="team-b"]`).waitFor();
  await page.selectOption(tid("namespace-switch"), "team-b"); // waits for the option to appear
  await waitFor(() => new URL(page.url()).pathname === "/ns/team-b/workflows", "the switch to team-b");
  await page.getByText("No workflows in").waitFor();
  await page.selectOption(tid("namespace-switch"), NS);
  await page.locator(tid("workflow-row")).first().waitFor();
  await noPageErrors(page);
});

scenario("reader: no write action is offered, and a forced write is PERMISSION_DENIED", async () => {
  const page = await newPage();
  await signIn(page, s.readerKey);
  await page.locator(tid("whoami")).waitFor();
  assert.match(await page.locator(tid("whoami")).textContent(), /reader/);
  await page.goto(`${s.origin}${wfPath("ct-fail")}`);
  await page.locator(tid("timeline-step")).first().waitFor();
  for (const action of ["action-cancel", "action-resume", "action-fork", "action-delete", "action-send"]) {
    assert.equal(await page.locator(tid(action)).count(), 0, `${action} is offered to a reader`);
  }
  await page.goto(`${s.origin}/ns/${NS}/workflows`);
  await page.locator(tid("workflow-row")).first().waitFor();
  assert.equal(await page.locator(tid("bulk-action")).count(), 0, "bulk actions are offered to a reader");
  assert.equal(await page.getByRole("link", { name: "Admin" }).count(), 0, "the admin page is offered to a reader");

  const refusal = await page.evaluate(async () => {
    const w = window.__waymark;
    try {
      await w.clients.workflows.cancelWorkflow({ workflowId: "ct-fail" });
      return { ok: true };
    } catch (e) {
      return w.describeError(e);
    }
  });
  assert.equal(refusal.code, 7, JSON.stringify(refusal));
  assert.equal(refusal.reason, "PERMISSION_DENIED", JSON.stringify(refusal));
  await page.context().close();
});

scenario("worker key: told the console needs a reader, client or admin key", async () => {
  const page = await newPage();
  await signIn(page, s.workerKey);
  await page.locator(tid("worker-key")).waitFor();
  assert.match(await page.locator(tid("worker-key")).textContent(), /reader, client or admin/);
  await page.context().close();
});

/** Runs `fn(page)` against a server of its own without --auth (with `args`), signed in as nobody. */
async function withOpenServer(args, fn) {
  const dir = mkdtempSync(join(tmpdir(), "waymark-console-open-"));
  const port = await freePort();
  const consolePort = await freePort();
  const log = openSync(join(dir, "server.log"), "a");
  const proc = spawn(
    bin,
    ["server", "--database-url", `sqlite:${join(dir, "w.db")}`, "--listen", `127.0.0.1:${port}`, "--console-listen", `127.0.0.1:${consolePort}`, ...args],
    { stdio: ["ignore", log, log] },
  );
  process.once("exit", () => proc.kill("SIGKILL"));
  let dev;
  try {
    const consoleUrl = `http://127.0.0.1:${consolePort}`;
    await waitFor(() => fetch(`${consoleUrl}/`).then(() => true), "the open server's console");
    let origin = consoleUrl;
    if (s.dev) {
      const { startDevServer } = await import(pathToFileURL(join(consoleRoot, "devserver.mjs")).href);
      dev = await startDevServer({ upstream: consoleUrl, dist });
      origin = dev.origin;
    }
    const page = await newPage();
    await page.goto(`${origin}/`);
    await page.locator(tid("whoami")).waitFor();
    await fn(page, origin);
    await noPageErrors(page);
    await page.context().close();
  } finally {
    await dev?.close();
    proc.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  }
}

scenario("without --auth: no sign-in, and every page and action is offered", async () => {
  await withOpenServer([], async (page) => {
    assert.match(await page.locator(tid("whoami")).textContent(), /no auth/);
    assert.equal(await page.locator(tid("signin-key")).count(), 0);
    assert.equal(new URL(page.url()).pathname, `/ns/${NS}/workflows`);
    assert.equal(await page.getByRole("link", { name: "Admin" }).count(), 1);
    assert.equal(await page.locator(tid("bulk-action")).count(), 1);
  });
});

scenario("--console-read-only: no write action whatever the key, and a forced write is CONSOLE_READ_ONLY", async () => {
  await withOpenServer(["--console-read-only"], async (page, origin) => {
    await page.locator(tid("page-next")).waitFor();
    assert.equal(await page.locator(tid("bulk-action")).count(), 0, "bulk actions are offered by a read-only console");
    await page.goto(`${origin}/admin`);
    // The lists of namespaces and keys, or the server's refusal of them: it counts them among
    // the calls that change something (they need an admin key), so a read-only console is
    // refused them too (reported, not asserted either way).
    await page.locator(`${tid("namespaces")} ${tid("namespace-row")}, ${tid("namespaces")} ${tid("error")}`).first().waitFor();
    if ((await page.locator(`${tid("namespaces")} ${tid("error")}`).count()) > 0) {
      console.log(`# a read-only console is refused ListNamespaces: ${await page.locator(`${tid("namespaces")} ${tid("error")}`).textContent()}`);
    }
    assert.equal(await page.locator(tid("namespace-create")).count(), 0, "a read-only console offers to make a namespace");
    assert.equal(await page.locator(tid("key-create")).count(), 0, "a read-only console offers to make a key");
    const refusal = await page.evaluate(async () => {
      const w = window.__waymark;
      try {
        await w.clients.queues.createQueue({ queue: { name: "nope" } });
        return { ok: true };
      } catch (e) {
        return w.describeError(e);
      }
    });
    assert.equal(refusal.reason, "CONSOLE_READ_ONLY", JSON.stringify(refusal));
  });
});

scenario("timings and asset size", async () => {
  const bytes = assetsGzipBytes();
  const timings = {
    list_ms: Math.round(s.listMs),
    workflow_ms: Math.round(s.workflowMs),
    rows: s.seeded + s.started + 1,
    rows_on_page: s.listRows,
    assets_gzip_bytes: bytes,
  };
  console.log(`CONSOLE_TIMINGS ${JSON.stringify(timings)}`);
  assert.ok(bytes < 500_000, `server/assets/console is ${bytes} bytes gzip-compressed, over 500,000`);
});
