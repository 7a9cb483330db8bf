// Local steps: run a function once, retry it per policy, checkpoint its result. On replay the
// recorded result comes back and the function is not called. The clock and random UUIDs are
// steps of the same kind, built in: read once live, recorded, and read back from then on.

import { randomUUID } from "node:crypto";
import type { JsonValue } from "@bufbuild/protobuf";
import { Interruption, PayloadTooLargeError, StepFailedError } from "../errors.js";
import { toJsonValue } from "../payload.js";
import { maxAttempts, retryDelayMs, type RetryPolicy } from "../retry.js";
import { sleep } from "../internal/wake.js";
import type { Run } from "./run.js";
import { boundedMessage, failure } from "./limits.js";
import { BUILTIN, nowRecord, uuidRecord } from "./history.js";
import { spanning } from "../tracing.js";

export interface StepOptions {
  /** Retry the function with backoff before the step fails. Default: one attempt. */
  retry?: RetryPolicy;
}

/** What a step function gets. */
export interface StepAttempt {
  /** 1 for the first attempt. */
  attempt: number;
  /** Aborted when the workflow is cancelled or its run abandoned. */
  signal: AbortSignal;
}

export async function runStep<T>(
  run: Run,
  stepId: number,
  name: string,
  fn: (attempt: StepAttempt) => Promise<T> | T,
  options: StepOptions,
): Promise<T> {
  const replayed = run.history.at(stepId, name);
  if (replayed.kind === "output") return replayed.value as T;
  if (replayed.kind === "failure") throw replayed.error;
  // Past the end of a history replayed offline, the function is never called.
  run.live(stepId);
  run.checkCancelled();
  // This step may depend on the ones before: their records are durable first (also those
  // another operation is flushing right now).
  await run.flush();
  run.checkCancelled();
  // The step's function runs now: one span over its attempts, the application's own spans
  // inside it nested under it.
  const span = run.span(`step ${name}`, "internal", stepId, { "waymark.step.name": name });
  return spanning(span, () => attemptAll(run, stepId, name, (a) => span.within(() => fn(a)), options));
}

/** Runs a live step's function (retried per policy), holds back its record and returns its result. */
async function attemptAll<T>(
  run: Run,
  stepId: number,
  name: string,
  fn: (attempt: StepAttempt) => Promise<T> | T,
  options: StepOptions,
): Promise<T> {
  const attempts = maxAttempts(options.retry);
  let attempt = 1;
  let result: { ok: true; value: JsonValue } | { ok: false; message: string };
  // How long the step takes, retries and their backoff included: its record carries it, and
  // the server dates the step's start from it.
  const began = performance.now();
  for (;;) {
    try {
      // Normalized to JSON now, so this run sees exactly what a replay will.
      result = { ok: true, value: toJsonValue(await fn({ attempt, signal: run.signal })) };
      break;
    } catch (e) {
      run.checkCancelled();
      if (e instanceof Interruption) throw e;
      // Bounded now, so this run sees the message a replay reads from the record.
      const message = boundedMessage(e instanceof Error ? e.message : String(e));
      if (attempt >= attempts) {
        result = { ok: false, message };
        break;
      }
      run.logger.debug("step failed; retrying", { workflowId: run.workflowId, step: name, attempt, error: message });
      await sleep(retryDelayMs(options.retry ?? {}, attempt), run.signal);
      run.checkCancelled();
      attempt += 1;
    }
  }
  const tookMs = performance.now() - began;
  let kind = "StepFailed";
  if (result.ok) {
    try {
      run.defer(stepId, name, { case: "output", value: run.payload(`the output of step ${JSON.stringify(name)}`, result.value) }, attempt, tookMs);
      return result.value as T;
    } catch (e) {
      if (!(e instanceof PayloadTooLargeError)) throw e;
      // Not retried: the same function would make the same output. Recorded as the step's
      // failure, so this run and every replay see the same StepFailedError.
      kind = e.kind;
      result = { ok: false, message: e.message };
    }
  }
  run.defer(stepId, name, { case: "failure", value: failure(kind, result.message) }, attempt, tookMs);
  throw new StepFailedError(name, result.message, kind);
}

/** The worker's clock, read once at `stepId` (Unix ms); a replay reads the recorded time. */
export async function readClock(run: Run, stepId: number): Promise<Date> {
  return new Date(run.history.nowMs(stepId) ?? drawOnce(run, stepId, BUILTIN.now, () => Date.now(), nowRecord));
}

/** A random UUID (v4, lowercase, hyphenated), drawn once at `stepId`; a replay gets the recorded one. */
export async function drawUuid(run: Run, stepId: number): Promise<string> {
  return run.history.uuid(stepId) ?? drawOnce(run, stepId, BUILTIN.uuid, () => randomUUID(), uuidRecord);
}

/**
 * Draws a value live and records it as built-in step `name`, held back like a step's result:
 * it costs no round trip of its own and is durable before anything that could depend on it
 * (the next step's function, any request, the completion). Nothing is flushed first, unlike a
 * step's function: the clock and the random source depend on no record taken before.
 */
function drawOnce<T>(run: Run, stepId: number, name: string, draw: () => T, record: (value: T) => JsonValue): T {
  // Offline, a value the history does not record is where the replay ends: drawn now, it would
  // be another value than any live run's.
  run.live(stepId);
  // A cancelled (or dropped) run draws nothing, as a step's function does not run.
  run.checkCancelled();
  const value = draw();
  run.defer(stepId, name, { case: "output", value: run.payload(`the record of ${name}`, record(value)) }, 1);
  return value;
}
