// The golden workflows in TypeScript: the same code as integration-tests/src/golden.rs (each
// function's comment there is the specification) — the same workflow names, the same calls in
// the same order with the same step names, topics, keys and inputs, the same results — so that
// their recorded histories (contract/histories/) replay here to the outcomes they record, and a
// live run here records those histories.
//
// `ran` lists the step functions that ran (local and remote): a replay must leave it empty.

import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import {
  Interruption,
  StepFailedError,
  WorkflowFailure,
  type JsonValue,
  type RecordedHistory,
  type Worker,
  type WorkflowContext,
} from "../src/index.js";
import { sdkRoot } from "./harness.js";

export const ran: string[] = [];

const repoRoot = join(sdkRoot, "../..");
/** The golden histories: one file per scenario. */
export const HISTORIES = join(repoRoot, "contract/histories");
/** The specification this copy follows. */
export const GOLDEN_RS = join(repoRoot, "integration-tests/src/golden.rs");

/** A golden file: a history and what replaying it must come to. */
export interface Golden {
  about: string;
  history: Required<RecordedHistory>;
  expect: { returned: JsonValue } | { failed: string } | { suspended_at: number };
}

/** Every golden file, by name (its stem), in name order: read from the directory, so a new file is a new case. */
export function goldenFiles(): [string, Golden][] {
  return readdirSync(HISTORIES)
    .filter((f) => f.endsWith(".json"))
    .sort()
    .map((f) => [f.slice(0, -".json".length), JSON.parse(readFileSync(join(HISTORIES, f), "utf8")) as Golden]);
}

/** Registers every golden workflow (and the remote step they call). */
export function register(w: Worker): Worker {
  return w
    .workflow("golden.steps", steps)
    .workflow("golden.sleep", sleep)
    .workflow("golden.messages", messages)
    .workflow("golden.events", events)
    .workflow("golden.stream", stream)
    .workflow("golden.child", child)
    .workflow("golden.child_body", childBody)
    .workflow("golden.remote", remote)
    .workflow("golden.drawn", drawn)
    .workflow("golden.patched", patched)
    .workflow("golden.select", select)
    .workflow("golden.wait_all", waitAll)
    .workflow("golden.gated", gated)
    .workflow("golden.update", update)
    .step("golden.flaky", flaky);
}

/** `input.n` as an integer, 0 when there is none (Rust: `as_i64().unwrap_or(0)`). */
function n(input: unknown): number {
  const v = (input as { n?: unknown } | null)?.n;
  return typeof v === "number" && Number.isInteger(v) ? v : 0;
}

/**
 * Input {"n": N}. Step "add" returns N + 1; step "fail" fails with "boom" (no retries), which the
 * workflow catches. Returns {"sum": N + 1, "caught": "boom"}.
 */
async function steps(ctx: WorkflowContext, input: unknown): Promise<JsonValue> {
  const sum = await ctx.step("add", () => {
    ran.push("add");
    return n(input) + 1;
  });
  const caught = await ctx
    .step<number>("fail", () => {
      ran.push("fail");
      throw new Error("boom");
    })
    .then(
      (got) => {
        throw new WorkflowFailure("Unexpected", `step "fail" returned ${JSON.stringify(got)}`);
      },
      (e: unknown) => {
        if (e instanceof StepFailedError) return e.stepMessage;
        // Cancelled, taken over, the end of a replayed history: not this workflow's to catch.
        if (e instanceof Interruption) throw e;
        throw new WorkflowFailure("Unexpected", String(e));
      },
    );
  return { sum, caught };
}

/**
 * Takes one update named "add" (60 s); step "apply" returns its args' N + 1, and the update is
 * answered with {"total": N + 1}. Returns {"update": <its id>, "total": N + 1}, or
 * {"update": null} when no update came.
 */
async function update(ctx: WorkflowContext): Promise<JsonValue> {
  const u = await ctx.recvUpdate("add", { timeoutMs: 60_000 });
  if (u === undefined) return { update: null };
  const total = await ctx.step("apply", () => {
    ran.push("apply");
    return n(u.args) + 1;
  });
  await ctx.answerUpdate(u.id, { total });
  return { update: u.id, total };
}

/** Sleeps 10 ms; returns "slept". */
async function sleep(ctx: WorkflowContext): Promise<JsonValue> {
  await ctx.sleep(10);
  return "slept";
}

/**
 * Sends {"hi": 1} to itself on topic "t", receives on "t" (60 s), then receives on "none" (10 ms,
 * times out). Returns {"got": {"hi": 1}, "none": null}.
 */
async function messages(ctx: WorkflowContext): Promise<JsonValue> {
  await ctx.send(ctx.workflowId, { hi: 1 }, { topic: "t" });
  const got = await ctx.recv("t", { timeoutMs: 60_000 });
  const none = await ctx.recv("none", { timeoutMs: 10 });
  return { got: got ?? null, none: none ?? null };
}

/** Sets its event "k" to 7, then reads it back (1 s). Returns 7. */
async function events(ctx: WorkflowContext): Promise<JsonValue> {
  await ctx.setEvent("k", 7);
  return (await ctx.getEvent(ctx.workflowId, "k", { timeoutMs: 1000 })) ?? null;
}

/** Writes "a" then "b" to its stream "s" and closes it. Returns the offset "b" was written at. */
async function stream(ctx: WorkflowContext): Promise<JsonValue> {
  await ctx.writeStream("s", "a");
  const b = await ctx.writeStream("s", "b");
  await ctx.closeStream("s");
  return b;
}

/** Starts "golden.child_body" with {"n": 3} (its id derived by the server) and awaits it. Returns the child's output. */
async function child(ctx: WorkflowContext): Promise<JsonValue> {
  const id = await ctx.startChild("golden.child_body", { n: 3 });
  return ctx.awaitChild(id);
}

/** Input {"n": N}: step "double" returns 2N; returns it. */
async function childBody(ctx: WorkflowContext, input: unknown): Promise<JsonValue> {
  return ctx.step("double", () => {
    ran.push("double");
    return 2 * n(input);
  });
}

/**
 * Calls the remote step "golden.flaky" with {"fail_times": 1} and up to 3 attempts (50 ms
 * backoff): its first attempt fails, its second succeeds. Returns the step's output.
 */
async function remote(ctx: WorkflowContext): Promise<JsonValue> {
  const retry = { maxAttempts: 3, initialIntervalMs: 50, backoffCoefficient: 2, maxIntervalMs: 1000 };
  return ctx.callStep("golden.flaky", { fail_times: 1 }, { retry });
}

/** Reads the time and draws a UUID. Returns {"now_ms": …, "uuid": "…"}. */
async function drawn(ctx: WorkflowContext): Promise<JsonValue> {
  const now = await ctx.now();
  const uuid = await ctx.uuid();
  return { now_ms: now.getTime(), uuid };
}

/**
 * Asks patched("golden-fix"). The new branch runs step "fixed", which returns "new"; the old one
 * runs step "unfixed", which returns "old". Returns {"branch": <what the step returned>}.
 */
async function patched(ctx: WorkflowContext): Promise<JsonValue> {
  const branch = ctx.patched("golden-fix")
    ? await ctx.step("fixed", () => {
        ran.push("fixed");
        return "new";
      })
    : await ctx.step("unfixed", () => {
        ran.push("unfixed");
        return "old";
      });
  return { branch };
}

/**
 * Calls the remote step "golden.flaky" with {"fail_times": 0} (the server's retry policy), then
 * starts "golden.gated" (its id derived by the server), and waits for the first of the two to
 * finish, the step first: the step wins (index 0), as the child cannot finish before it gets the
 * message this workflow sends it only after the wait. Then reads the step's result, sends the
 * child "go" on topic "go", and awaits the child. Returns
 * {"winner": 0, "step": "ok after 0 failures", "child": "go"}.
 */
async function select(ctx: WorkflowContext): Promise<JsonValue> {
  const step = await ctx.startStep("golden.flaky", { fail_times: 0 });
  const child = await ctx.startChild("golden.gated", {});
  const winner = await ctx.waitFirst([step, child]);
  const result = await ctx.stepResult(step);
  await ctx.send(child, "go", { topic: "go" });
  const got = await ctx.awaitChild(child);
  return { winner, step: result, child: got };
}

/**
 * Calls the remote step "golden.flaky" with {"fail_times": 0} (the server's retry policy) and
 * starts "golden.gated" (its id derived by the server), as golden.select does; reads the step's
 * result (so the step has finished before the child can), sends the child "go" on topic "go",
 * then waits for both to finish, the child first. The wait records the last to finish, the child
 * (index 0; a tie would go to the lower index, the child too). Then awaits the child and reads
 * the step's result again. Returns {"results": ["go", "ok after 0 failures"]}.
 */
async function waitAll(ctx: WorkflowContext): Promise<JsonValue> {
  const step = await ctx.startStep("golden.flaky", { fail_times: 0 });
  const child = await ctx.startChild("golden.gated", {});
  await ctx.stepResult(step);
  await ctx.send(child, "go", { topic: "go" });
  await ctx.waitAll([child, step]);
  const got = await ctx.awaitChild(child);
  const result = await ctx.stepResult(step);
  return { results: [got, result] };
}

/** Receives on topic "go" (60 s). Returns what it got (null when nothing came). */
async function gated(ctx: WorkflowContext): Promise<JsonValue> {
  return (await ctx.recv("go", { timeoutMs: 60_000 })) ?? null;
}

let flakyCalls = 0;

/**
 * The remote step: fails its first `fail_times` attempts in this process, then returns
 * "ok after N failures". (Only a live run calls it; a replay reads its recorded result.)
 * Every attempt counts, so golden.remote runs before the others that call it.
 */
function flaky(input: unknown): JsonValue {
  ran.push("golden.flaky");
  const v = (input as { fail_times?: unknown } | null)?.fail_times;
  const failTimes = typeof v === "number" && Number.isInteger(v) && v > 0 ? v : 0;
  const call = flakyCalls++;
  if (call < failTimes) throw new Error(`planned failure ${call + 1}`);
  return `ok after ${failTimes} failures`;
}
