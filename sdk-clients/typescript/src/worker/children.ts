// Child workflows: started as a step (the child's row and the parent's record commit together,
// so a replaying parent re-joins its child), awaited as a durable wait.

import { create, type JsonValue } from "@bufbuild/protobuf";
import { AwaitChildSchema, RecvResult_Outcome, StartChildSchema } from "../gen/waymark/v1/worker_pb.js";
import { ChildWorkflowError, ParkedError } from "../errors.js";
import { NEVER_MS, type Run } from "./run.js";
import { expect } from "./replies.js";
import { liveChildOutcome, type ChildOutcome } from "./history.js";
import { spanning } from "../tracing.js";

export interface ChildOptions {
  /** The child's id; derived from this workflow's id and the step position when not given. */
  workflowId?: string;
  /** The child's queue; this workflow's when not given. */
  queue?: string;
  /**
   * Tags over this workflow's, which the child inherits: these replace or add keys. The bounds
   * of a start's tags apply; the server refuses a bad one, and `startChild` throws that as a
   * `WorkflowFailure` of kind INVALID_ARGUMENT. Sent only when the child is started, not on a
   * replay.
   */
  tags?: Record<string, string>;
}

export async function startChild(run: Run, stepId: number, name: string, input: unknown, o: ChildOptions): Promise<string> {
  const recorded = run.history.childId(stepId);
  if (recorded !== undefined) return recorded;
  run.checkCancelled();
  const payload = run.payload(`the input of child workflow ${JSON.stringify(name)}`, input);
  // The child's dispatches hang under this span: its context goes with the start.
  const span = run.span(`start child ${name}`, "producer", stepId);
  return spanning(span, async () => {
    const req = create(StartChildSchema, {
      workflowId: run.workflowId,
      epoch: run.epoch,
      stepId,
      workflowName: name,
      childWorkflowId: o.workflowId ?? "",
      input: payload,
      queueName: o.queue ?? "",
      tags: { ...o.tags },
      traceContext: span.wire,
    });
    return expect(await run.request({ case: "startChild", value: req }), "childStarted").childWorkflowId;
  });
}

export async function awaitChild(run: Run, stepId: number, childId: string): Promise<JsonValue> {
  const recorded = run.history.childOutcome(stepId);
  if (recorded !== undefined) return childOutcome(childId, recorded);
  return childOutcome(childId, await spanning(run.span("wait child", "internal", stepId), () => waitForChild(run, stepId, childId)));
}

/** Asks the server for the child's end until it is delivered, waiting (or parking) between. */
async function waitForChild(run: Run, stepId: number, childId: string): Promise<ChildOutcome> {
  const waitingSince = Date.now();
  let outcome: ChildOutcome | undefined;
  while (outcome === undefined) {
    run.checkCancelled();
    const req = create(AwaitChildSchema, { workflowId: run.workflowId, epoch: run.epoch, stepId, childWorkflowId: childId });
    const r = expect(await run.request({ case: "awaitChild", value: req }), "childResult");
    if (r.outcome === RecvResult_Outcome.DELIVERED) {
      outcome = liveChildOutcome(r);
      break;
    }
    // Parked once it has waited past the threshold: children can run for days.
    const parkAt = run.config.parkAfterMs === null ? NEVER_MS : waitingSince + run.config.parkAfterMs;
    if (parkAt !== NEVER_MS && Date.now() >= parkAt) {
      if (await run.park(stepId, NEVER_MS, { case: "awaitedWorkflowId", value: childId })) throw new ParkedError();
    } else await run.waitUntil(parkAt, Date.now());
  }
  return outcome;
}

/** The child's output, or the ChildWorkflowError its end raises in the awaiting workflow. */
function childOutcome(childId: string, o: ChildOutcome): JsonValue {
  switch (o.status) {
    case "SUCCESS":
      return o.output;
    case "CANCELLED":
      throw new ChildWorkflowError("ChildCancelled", childId, `child workflow ${childId} was cancelled`);
    case "MAX_RECOVERY_ATTEMPTS_EXCEEDED":
      throw new ChildWorkflowError("ChildDeadLettered", childId, `child workflow ${childId} was dead-lettered`);
    default:
      throw new ChildWorkflowError(
        "ChildFailed",
        childId,
        `child workflow ${childId} failed: ${o.failure.kind}: ${o.failure.message}`,
      );
  }
}
