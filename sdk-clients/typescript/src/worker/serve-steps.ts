// Serving remote steps this worker registered: run one attempt per DispatchStep and report its
// result. An attempt still running at its deadline is abandoned: the server has already failed
// it and would refuse a late result.

import { create } from "@bufbuild/protobuf";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { StepResultSchema, type DispatchStep, type StepResult } from "../gen/waymark/v1/worker_pb.js";
import { PayloadTooLargeError } from "../errors.js";
import { fromPayload } from "../payload.js";
import { checkedPayload, failure } from "./limits.js";
import type { Conn } from "./conn.js";
import { isUnavailable } from "./replies.js";
import { resending } from "../internal/resend.js";
import type { WorkerConfig } from "./registry.js";
import { startSpan, type TraceSpan } from "../tracing.js";

const ABANDONED = Symbol("abandoned");

export async function serveStep(config: WorkerConfig, conn: Conn, d: DispatchStep, stream: AbortSignal): Promise<void> {
  // Under the caller's `call` span; it ends once the attempt's result is sent.
  const span = startSpan(
    `step ${d.stepName}`,
    "consumer",
    { wire: d.traceContext },
    {
      "waymark.workflow.id": d.workflowId,
      "waymark.step.id": d.stepId,
      "waymark.step.name": d.stepName,
      "waymark.step.attempt": d.attempt,
    },
  );
  try {
    await attempt(config, conn, d, stream, span);
  } finally {
    span.end();
  }
}

async function attempt(config: WorkerConfig, conn: Conn, d: DispatchStep, stream: AbortSignal, span: TraceSpan): Promise<void> {
  const fn = config.steps.get(d.stepName);
  const left = d.deadline ? timestampMs(d.deadline) - Date.now() : 2 ** 31 - 1;
  const signal = AbortSignal.any([stream, AbortSignal.timeout(Math.min(Math.max(left, 0), 2 ** 31 - 1))]);
  let outcome: StepResult["outcome"];
  try {
    if (!fn) throw new Error(`this worker has no step named ${JSON.stringify(d.stepName)}`);
    const attempt = Promise.resolve(
      span.within(() => fn(fromPayload(d.input), { workflowId: d.workflowId, stepId: d.stepId, attempt: d.attempt, signal })),
    );
    const aborted = new Promise<typeof ABANDONED>((resolve) => {
      if (signal.aborted) resolve(ABANDONED);
      signal.addEventListener("abort", () => resolve(ABANDONED), { once: true });
    });
    const out = await Promise.race([attempt, aborted]);
    if (out === ABANDONED) {
      attempt.catch(() => undefined);
      config.logger.info("remote step attempt abandoned at its deadline", { workflowId: d.workflowId, step: d.stepName });
      if (!stream.aborted) span.fail("the attempt was still running at its deadline");
      return;
    }
    // An output over the server's limit fails the attempt with PAYLOAD_TOO_LARGE (caught
    // below): sent anyway, the result would be refused and the attempt run again for nothing.
    outcome = { case: "output", value: checkedPayload(`the output of remote step ${JSON.stringify(d.stepName)}`, out, conn.limits) };
  } catch (e) {
    const kind = e instanceof PayloadTooLargeError ? e.kind : "StepFailed";
    outcome = { case: "failure", value: failure(kind, e instanceof Error ? e.message : String(e)) };
    span.fail(outcome.value.message);
  }
  const req = create(StepResultSchema, { workflowId: d.workflowId, stepId: d.stepId, attempt: d.attempt, outcome });
  try {
    // A result sent twice is recorded once (the attempt number fences it), so UNAVAILABLE is
    // answered by sending it again; past the bound the server times the attempt out and retries.
    const r = await resending(() => conn.request({ case: "stepResult", value: req }), {
      forMs: config.resendForMs,
      unavailable: (a) => a.ok && isUnavailable(a.value),
      signal: stream,
    });
    if (r.case === "error") {
      config.logger.info("step result refused", { workflowId: d.workflowId, step: d.stepName, reason: r.value.reason });
    }
  } catch {
    config.logger.debug("stream broke before the step result was sent", { workflowId: d.workflowId, step: d.stepName });
  }
}
