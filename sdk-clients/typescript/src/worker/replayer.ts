// Replays recorded histories offline, against registered workflow code: no server, no side
// effects. Every call the code makes is answered from the history through the same cursor a live
// run replays through; the first call it does not record ends the replay where a live run would
// go on. Use it in a test suite before deploying changed workflow code ("replay before deploy"):
// replay the histories of workflows already running (`waymark workflow export ID`,
// `Client.history`) and check none now fails with NonDeterminism. The project's golden histories
// (contract/histories/) are in the same form, and every SDK replays them to the same outcomes.

import { create, type JsonValue } from "@bufbuild/protobuf";
import { DispatchWorkflowSchema, type DispatchWorkflow } from "../gen/waymark/v1/worker_pb.js";
import { FailureSchema, StepSchema, type Step } from "../gen/waymark/v1/types_pb.js";
import { ContinueAsNew, HistoryEndedError, SerializationError, UnknownWorkflowError } from "../errors.js";
import { silentLogger } from "../logger.js";
import { fromPayload, toPayload } from "../payload.js";
import type { RecordedHistory } from "../recorded.js";
import type { Requests } from "./conn.js";
import { DEFAULT_LIMITS } from "./limits.js";
import type { WorkerConfig, WorkflowFn } from "./registry.js";
import { WorkflowContext } from "./context.js";
import { kindOf, messageOf, Run } from "./run.js";
import { Worker } from "./worker.js";

/** How a replay ended. */
export type Replayed =
  /** The code returned `value` (as JSON, as a live run would record it), every call answered by the history. */
  | { readonly outcome: "returned"; readonly value: JsonValue }
  /**
   * The code failed, with the kind and message a live run would record: `NonDeterminism` when it
   * called another step than the history records, `StepFailed` for a recorded failure it did
   * not handle, else its own (`WorkflowFailure.kind`, or the error's `name`). `error` is what it threw.
   */
  | { readonly outcome: "failed"; readonly kind: string; readonly message: string; readonly error: unknown }
  /**
   * The code made a call at `stepId`, which the history does not record (a step to run, a request
   * to the server, the time or a UUID to draw, a sleep whose wake time is still ahead): a live
   * run would go on from there. A workflow still running replays to this.
   */
  | { readonly outcome: "suspended"; readonly stepId: number }
  /**
   * The code continued as new (`ctx.continueAsNew`) with `input` (as JSON): a live run would end
   * here and the workflow go on under its id with a fresh history.
   */
  | { readonly outcome: "continued_as_new"; readonly input: JsonValue };

/**
 * Where a replay's requests would go: nowhere. `Run.live` stops each one before it is sent; one
 * that got past would be a bug, failing the replay at once rather than waiting for an answer.
 */
const NOWHERE: Requests = {
  limits: DEFAULT_LIMITS,
  request: (kind) => Promise.reject(new Error(`a replay tried to send ${String(kind.case)}: a bug in the SDK`)),
};

type Registry = Worker | ReadonlyMap<string, WorkflowFn> | Readonly<Record<string, WorkflowFn>>;

/**
 * Replays histories against registered workflow functions: a `Worker`'s, or a map (or object)
 * of workflow name to function. Nothing connects. Replays may run side by side.
 */
export class Replayer {
  private readonly workflows: ReadonlyMap<string, WorkflowFn>;

  constructor(
    workflows: Registry,
    /** @internal Tests put a recording fake here, to see that nothing is sent. */
    private readonly conn: Requests = NOWHERE,
  ) {
    const fns =
      workflows instanceof Worker
        ? workflows.registeredWorkflows()
        : workflows instanceof Map
          ? workflows
          : new Map(Object.entries(workflows));
    this.workflows = new Map(fns);
  }

  /**
   * Replays `history` with the workflow it names. Throws only when the history is malformed
   * (SerializationError) or its workflow is not registered (UnknownWorkflowError); how the code
   * fared is the result.
   */
  async replay(history: RecordedHistory): Promise<Replayed> {
    const d = dispatchOf(history);
    const fn = this.workflows.get(d.workflowName);
    if (!fn) throw new UnknownWorkflowError(d.workflowName);
    const run = new Run(d, this.conn, offlineConfig(this.workflows), true);
    // The run is interrupted only where the history ends (`Run.live`); from then on the replay
    // has its outcome, whatever the code goes on to do (swallow the error, wait on its own).
    const ended = new Promise<undefined>((resolve) => run.signal.addEventListener("abort", () => resolve(undefined), { once: true }));
    const result = (async () => fn(new WorkflowContext(run), fromPayload(d.input)))();
    const out = await Promise.race([result.then((value: unknown) => ({ value }), (error: unknown) => ({ error })), ended]);
    const reason: unknown = run.signal.reason;
    if (reason instanceof HistoryEndedError) return { outcome: "suspended", stepId: reason.stepId };
    // Offline only `Run.live` interrupts a run; were something else to, its reason is the failure.
    if (out === undefined) return failed(reason);
    if ("error" in out) {
      if (out.error instanceof HistoryEndedError) return { outcome: "suspended", stepId: out.error.stepId };
      if (out.error instanceof ContinueAsNew) {
        // As live: an input the server would not take fails the workflow instead.
        try {
          return { outcome: "continued_as_new", input: fromPayload(run.payload("the next run's input", out.error.input)) };
        } catch (e) {
          return failed(e);
        }
      }
      // The other interruptions (cancelled, parked, fenced, dropped) need a server, so cannot
      // come offline unless the code throws one itself: a failure to see, not an outcome to hide.
      return failed(out.error);
    }
    try {
      // A live run fails for an output the server would not take, and records it as JSON reads
      // it back; so does its replay.
      return { outcome: "returned", value: fromPayload(run.payload("the workflow's output", out.value)) };
    } catch (e) {
      return failed(e);
    }
  }
}

function failed(error: unknown): Replayed {
  return { outcome: "failed", kind: kindOf(error), message: messageOf(error), error };
}

/** A history as the dispatch a live run of it would get (epoch 1, never recovered). */
function dispatchOf(h: RecordedHistory): DispatchWorkflow {
  if (typeof h?.workflow_name !== "string") throw new SerializationError("a history names its workflow in workflow_name");
  if (h.steps != null && !Array.isArray(h.steps)) throw new SerializationError("a history's steps are a list");
  return create(DispatchWorkflowSchema, {
    workflowId: typeof h.workflow_id === "string" ? h.workflow_id : "replay",
    workflowName: h.workflow_name,
    epoch: 1n,
    input: toPayload(h.input ?? null),
    steps: (h.steps ?? []).map(stepOf),
  });
}

/**
 * A recorded step as a dispatch carries it: a failure, or an output (a missing one is `null`,
 * as the server records a wait that timed out).
 */
function stepOf(s: unknown): Step {
  const r = (s ?? {}) as { step_id?: unknown; name?: unknown; output?: unknown; failure?: unknown };
  if (typeof r.step_id !== "number" || !Number.isInteger(r.step_id) || r.step_id < 0 || typeof r.name !== "string") {
    throw new SerializationError(`a recorded step has a step_id (an integer from 0) and a name: ${JSON.stringify(s)}`);
  }
  if (r.failure != null) {
    const f = r.failure as { kind?: unknown; message?: unknown };
    const failure = create(FailureSchema, { kind: String(f.kind ?? ""), message: String(f.message ?? "") });
    return create(StepSchema, { stepId: r.step_id, name: r.name, failure });
  }
  return create(StepSchema, { stepId: r.step_id, name: r.name, output: toPayload(r.output ?? null) });
}

/** What a run reads of its worker's options: no parking (a replay never waits), no resending. */
function offlineConfig(workflows: ReadonlyMap<string, WorkflowFn>): WorkerConfig {
  return {
    workerId: "replay",
    appName: "",
    appVersion: "",
    queues: [],
    maxConcurrentWorkflows: 1,
    maxConcurrentSteps: 1,
    parkAfterMs: null,
    resendForMs: 0,
    workflows: new Map(workflows),
    steps: new Map(),
    logger: silentLogger,
  };
}
