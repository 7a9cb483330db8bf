// Remote steps and waiting on several things. A workflow calls a step by name and any worker
// that registered it runs it (this process, another one, another language); the server records
// the result as this workflow's step, so a replay — even on another worker — finds it.

import { create, type JsonValue } from "@bufbuild/protobuf";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import {
  CallStepSchema,
  RecvResult_Outcome,
  SelectSchema,
  WaitTargetSchema,
  type CallResult,
} from "../gen/waymark/v1/worker_pb.js";
import type { Payload } from "../gen/waymark/v1/types_pb.js";
import { ParkedError, WorkflowFailure } from "../errors.js";
import { toPayload } from "../payload.js";
import { wireRetryPolicy, type RetryPolicy } from "../retry.js";
import { NEVER_MS, type Run } from "./run.js";
import { expect } from "./replies.js";
import { stepOutcome } from "./history.js";
import { endFailed, NOOP, spanning, type TraceSpan } from "../tracing.js";

/** How a remote step is retried and timed; unset fields take the server's defaults. */
export interface RemoteStepOptions {
  /** Default: three attempts, 1 s doubling up to 60 s between them. */
  retry?: RetryPolicy;
  /** Start-to-close timeout of one attempt. Default: five minutes. */
  timeoutMs?: number;
}

/** A remote step that was called and may still be running. */
export class StepHandle {
  /** @internal */
  constructor(
    readonly stepId: number,
    readonly name: string,
    /** @internal */ readonly input: Payload,
    /** @internal */ readonly options: RemoteStepOptions,
    /**
     * @internal The `call` span of this run's call, sent with every CallStep of it; NOOP when
     * the call was read back from the history.
     */
    readonly span: TraceSpan = NOOP,
  ) {}
}

/** Something to wait for alongside others: a workflow id (a child, or any), or a remote step. */
export type Awaitable = string | StepHandle;

async function call(run: Run, h: StepHandle): Promise<CallResult> {
  const req = create(CallStepSchema, {
    workflowId: run.workflowId,
    epoch: run.epoch,
    stepId: h.stepId,
    stepName: h.name,
    input: h.input,
    retry: h.options.retry ? wireRetryPolicy(h.options.retry) : undefined,
    timeout: h.options.timeoutMs !== undefined ? durationFromMs(h.options.timeoutMs) : undefined,
    traceContext: h.span.wire,
  });
  return expect(await run.request({ case: "callStep", value: req }), "callResult");
}

export async function startStep(run: Run, stepId: number, name: string, input: unknown, options: RemoteStepOptions): Promise<StepHandle> {
  if (run.history.isRecorded(stepId, name)) {
    // Finished and recorded: its input is never sent again, so it is not checked again.
    return new StepHandle(stepId, name, toPayload(input), options);
  }
  run.checkCancelled();
  const payload = run.payload(`the input of remote step ${JSON.stringify(name)}`, input);
  // Open until the result is delivered (or the run ends first).
  const span = run.span(`call ${name}`, "client", stepId, { "waymark.step.name": name });
  const handle = new StepHandle(stepId, name, payload, options, span);
  try {
    await call(run, handle);
  } catch (e) {
    endFailed(span, e);
    throw e;
  }
  return handle;
}

export async function stepResult(run: Run, h: StepHandle): Promise<JsonValue> {
  const recorded = run.history.json(h.stepId, h.name);
  if (recorded !== undefined) return recorded;
  const waitingSince = Date.now();
  for (;;) {
    run.checkCancelled();
    const r = await call(run, h);
    if (r.outcome === RecvResult_Outcome.DELIVERED) {
      if (r.failure) h.span.fail(r.failure.message);
      h.span.end();
      return stepOutcome(h.name, r);
    }
    const parkAt = run.config.parkAfterMs === null ? NEVER_MS : waitingSince + run.config.parkAfterMs;
    if (parkAt !== NEVER_MS && Date.now() >= parkAt) {
      if (await run.park(h.stepId, NEVER_MS, { case: "step", value: h.stepId })) throw new ParkedError();
    } else await run.waitUntil(parkAt, Date.now());
  }
}

/** Waits for the first (or, with `all`, the last) of `targets` to finish; the index is recorded. */
export async function waitSeveral(run: Run, stepId: number, targets: Awaitable[], all: boolean): Promise<number> {
  const recorded = run.history.index(stepId, all);
  if (recorded !== undefined) return recorded;
  if (targets.length === 0) throw new WorkflowFailure("InvalidArgument", "nothing to wait for");
  const wire = targets.map((t) =>
    create(WaitTargetSchema, {
      target: typeof t === "string" ? { case: "workflowId", value: t } : { case: "stepId", value: t.stepId },
    }),
  );
  return spanning(run.span("wait select", "internal", stepId), async () => {
    for (;;) {
      run.checkCancelled();
      const req = create(SelectSchema, { workflowId: run.workflowId, epoch: run.epoch, stepId, targets: wire, all });
      const r = expect(await run.request({ case: "select", value: req }), "selected");
      if (r.outcome === RecvResult_Outcome.DELIVERED) return r.index;
      await run.waitUntil(NEVER_MS, 0);
    }
  });
}
