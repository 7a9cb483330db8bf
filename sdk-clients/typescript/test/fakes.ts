// Fakes for tests without a server: a connection that answers each request as the test says
// (at once, later, or never), and what a Run needs around it.

import { create } from "@bufbuild/protobuf";
import {
  DispatchWorkflowSchema,
  ReplyErrorSchema,
  StepRecordedSchema,
  WorkflowCompletedSchema,
  type DispatchWorkflow,
} from "../src/gen/waymark/v1/worker_pb.js";
import { WorkflowStatus } from "../src/gen/waymark/v1/types_pb.js";
import { DisconnectedError, silentLogger, type WorkflowFn } from "../src/index.js";
import { toPayload } from "../src/payload.js";
import type { Kind, ReplyResult, Requests } from "../src/worker/conn.js";
import { DEFAULT_LIMITS, type Limits } from "../src/worker/limits.js";
import type { WorkerConfig } from "../src/worker/registry.js";
import { Run } from "../src/worker/run.js";

/** How the fake answers one request: a reply now, or a promise of one. */
export type Answer = (kind: Kind) => ReplyResult | Promise<ReplyResult>;

export const recorded: ReplyResult = { case: "stepRecorded", value: create(StepRecordedSchema) };

export const unavailable: ReplyResult = {
  case: "error",
  value: create(ReplyErrorSchema, { code: 14, reason: "STORE_UNAVAILABLE", message: "the database is restarting" }),
};

/** The usual answer: records are durable, completions stand, anything else is the test's business. */
export function ordinary(kind: Kind): ReplyResult {
  switch (kind.case) {
    case "recordStep":
    case "setEvent":
      return recorded;
    case "completeWorkflow":
      return { case: "workflowCompleted", value: create(WorkflowCompletedSchema, { status: WorkflowStatus.SUCCESS }) };
    default:
      throw new Error(`the fake has no answer for ${String(kind.case)}`);
  }
}

export class FakeConn implements Requests {
  /** Every request the run sent, in order. */
  readonly sent: Kind[] = [];
  private broken = false;
  private readonly pending = new Set<(e: Error) => void>();

  constructor(
    private readonly answer: Answer = ordinary,
    /** The sizes the fake server takes: the real server's defaults unless a test says. */
    readonly limits: Limits = { ...DEFAULT_LIMITS },
  ) {}

  request(kind: Kind): Promise<ReplyResult> {
    this.sent.push(kind);
    if (this.broken) return Promise.reject(new DisconnectedError());
    return new Promise((resolve, reject) => {
      this.pending.add(reject);
      Promise.resolve()
        .then(() => this.answer(kind))
        .then(resolve, reject)
        .finally(() => this.pending.delete(reject));
    });
  }

  /** The stream breaks: what waits for an answer fails as a real stream's close fails it. */
  break(): void {
    this.broken = true;
    for (const reject of this.pending) reject(new DisconnectedError());
    this.pending.clear();
  }

  /** The kinds sent so far, with the step position where there is one: "recordStep:0". */
  kinds(): string[] {
    return this.sent.map((k) => {
      const v = k.value as { stepId?: number } | undefined;
      return v?.stepId !== undefined && k.case !== "completeWorkflow" ? `${k.case}:${v.stepId}` : String(k.case);
    });
  }
}

export function workerConfig(workflows: Record<string, WorkflowFn>, o: Partial<WorkerConfig> = {}): WorkerConfig {
  return {
    workerId: "test-worker",
    appName: "",
    appVersion: "",
    queues: [],
    maxConcurrentWorkflows: 10,
    maxConcurrentSteps: 1,
    parkAfterMs: null,
    resendForMs: 60_000,
    workflows: new Map(Object.entries(workflows)),
    steps: new Map(),
    logger: silentLogger,
    ...o,
  };
}

export function dispatch(workflowName: string, input: unknown = null, workflowId = "wf-1"): DispatchWorkflow {
  return create(DispatchWorkflowSchema, { workflowId, workflowName, epoch: 1n, input: toPayload(input) });
}

/** A run of `fn` on `conn`, ready to execute. */
export function runOf(fn: WorkflowFn, conn: Requests, o: Partial<WorkerConfig> = {}): Run {
  return new Run(dispatch("wf"), conn, workerConfig({ wf: fn }, o));
}

/** Lets everything queued run: microtasks, and then `n` rounds of the macrotask queue. */
export async function drain(n = 5): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
}

export function deferred<T>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}
