// Durable waits: sleep, recv and get_event. The deadline (or wake time) is recorded as a step
// first, so a recovered workflow keeps its original timeout; then the server is asked, and on
// WAITING the run waits for the server's Wakeup (nothing polls), or parks when the wait is long.

import { create, type JsonValue } from "@bufbuild/protobuf";
import { EventKeySchema, GetEventStepSchema, RecvResult_Outcome, RecvSchema, type Park } from "../gen/waymark/v1/worker_pb.js";
import { ParkedError } from "../errors.js";
import { fromPayload } from "../payload.js";
import type { Kind } from "./conn.js";
import { NEVER_MS, type Run } from "./run.js";
import { expect } from "./replies.js";
import { BUILTIN, deadlineRecord, GET_EVENT_WAIT, RECV_WAIT, sleepRecord, type WaitSteps } from "./history.js";
import { spanning, type Attributes } from "../tracing.js";

/**
 * The longest a recv or getEvent waits: the server takes deadlines up to ten years ahead, so
 * "no timeout" is nine years.
 */
export const LONGEST_WAIT_MS = 9 * 365 * 24 * 3600 * 1000;

/** `timeoutMs` from now as a deadline, at most `cap` ahead. */
function deadlineFrom(timeoutMs: number | undefined, cap: number): number {
  const t = Math.min(Math.max(timeoutMs ?? Infinity, 0), cap);
  return Math.min(Date.now() + t, NEVER_MS);
}

export async function sleep(run: Run, stepId: number, ms: number): Promise<void> {
  const recorded = run.history.wakeAt(stepId);
  // A sleep recorded and over is read back: it opens no span. One begun now, or recorded and
  // not over yet (a recovered run sleeps the rest), is waited now.
  if (recorded !== undefined && Date.now() >= recorded) return;
  if (recorded === undefined) run.checkCancelled();
  return spanning(run.span("wait sleep", "internal", stepId), async () => {
    let wakeAt = recorded;
    if (wakeAt === undefined) {
      wakeAt = deadlineFrom(ms, NEVER_MS);
      await run.record(stepId, BUILTIN.sleep, sleepRecord(wakeAt));
    }
    if (run.shouldPark(wakeAt, Date.now()) && (await run.park(stepId, wakeAt, { case: "timer", value: true }))) {
      throw new ParkedError();
    }
    while (Date.now() < wakeAt) {
      // A replay of a sleep still running ends where the live run sleeps.
      run.live(stepId);
      await run.waitUntil(wakeAt, Date.now());
    }
  });
}

export function recv(run: Run, stepId: number, topic: string, timeoutMs: number | undefined) {
  return durableWait(
    run,
    stepId,
    RECV_WAIT,
    "wait recv",
    { "waymark.wait.topic": topic },
    timeoutMs,
    { case: "topic", value: topic },
    (step, deadlineMs) => ({
      case: "recv",
      value: create(RecvSchema, { workflowId: run.workflowId, epoch: run.epoch, stepId: step, topic, deadlineMs: BigInt(deadlineMs) }),
    }),
  );
}

export function getEvent(run: Run, stepId: number, target: string, key: string, timeoutMs: number | undefined) {
  return durableWait(
    run,
    stepId,
    GET_EVENT_WAIT,
    "wait event",
    { "waymark.wait.key": key },
    timeoutMs,
    { case: "event", value: create(EventKeySchema, { workflowId: target, key }) },
    (step, deadlineMs) => ({
      case: "getEvent",
      value: create(GetEventStepSchema, {
        workflowId: run.workflowId,
        epoch: run.epoch,
        stepId: step,
        targetWorkflowId: target,
        key,
        deadlineMs: BigInt(deadlineMs),
      }),
    }),
  );
}

/**
 * A wait over two step positions: the deadline, then the outcome, which the server records.
 * Resolves with the value, or undefined when the deadline passed first.
 */
async function durableWait(
  run: Run,
  deadlineStep: number,
  wait: WaitSteps,
  spanName: string,
  attributes: Attributes,
  timeoutMs: number | undefined,
  parkOn: Park["on"],
  request: (stepId: number, deadlineMs: number) => Kind,
): Promise<JsonValue | undefined> {
  const resultStep = deadlineStep + 1;
  const recordedDeadline = run.history.deadline(deadlineStep, wait);
  if (recordedDeadline !== undefined) {
    const waited = run.history.waited(resultStep, wait);
    // Read back from the history: no span.
    if (waited !== undefined) return waited.timedOut ? undefined : waited.value;
  } else {
    run.checkCancelled();
  }
  return spanning(run.span(spanName, "internal", deadlineStep, attributes), async () => {
    let deadlineMs = recordedDeadline;
    if (deadlineMs === undefined) {
      deadlineMs = deadlineFrom(timeoutMs, LONGEST_WAIT_MS);
      await run.record(deadlineStep, wait.deadline, deadlineRecord(deadlineMs));
      // Recorded just now, so the outcome cannot be; unless a malformed history holds one.
      const waited = run.history.waited(resultStep, wait);
      if (waited !== undefined) return waited.timedOut ? undefined : waited.value;
    }
    return waitLive(run, resultStep, deadlineMs, parkOn, request);
  });
}

/** The live part of a durable wait: ask the server, then wait for a wakeup or park. */
async function waitLive(
  run: Run,
  resultStep: number,
  deadlineMs: number,
  parkOn: Park["on"],
  request: (stepId: number, deadlineMs: number) => Kind,
): Promise<JsonValue | undefined> {
  for (;;) {
    run.checkCancelled();
    // The server may have completed the wait itself and pushed the answer with the wakeup.
    const pushed = run.delivered.get(resultStep);
    if (pushed) {
      run.delivered.delete(resultStep);
      return fromPayload(pushed);
    }
    const r = await run.request(request(resultStep, deadlineMs));
    const answer =
      r.case === "eventResult"
        ? { ...expect(r, "eventResult"), message: r.value.value }
        : expect(r, "recvResult");
    const value = answer.message;
    const serverNow = Number(answer.serverNowMs);
    switch (answer.outcome) {
      case RecvResult_Outcome.DELIVERED:
        return fromPayload(value);
      case RecvResult_Outcome.TIMED_OUT:
        return undefined;
      default:
        // Wait for a wakeup, or until the deadline by the server's clock.
        if (run.shouldPark(deadlineMs, serverNow)) {
          if (await run.park(resultStep, deadlineMs, parkOn)) throw new ParkedError();
        } else await run.waitUntil(deadlineMs, serverNow);
    }
  }
}
