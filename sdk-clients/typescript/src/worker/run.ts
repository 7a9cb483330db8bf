// One dispatched run of a workflow: its recorded history, its step counter, the step records it
// holds back, and every request it makes to the server. The WorkflowContext methods are built on
// this; the session starts it and hears when it ends.

import { create, type JsonValue } from "@bufbuild/protobuf";
import {
  CompleteWorkflowSchema,
  ParkSchema,
  RecordStepSchema,
  type DispatchWorkflow,
  type Park,
  type RecordStep,
  type ReplyError,
} from "../gen/waymark/v1/worker_pb.js";
import { FailureSchema, type Payload, type Step } from "../gen/waymark/v1/types_pb.js";
import {
  CancelledError,
  DisconnectedError,
  FencedError,
  Interruption,
  NonDeterminismError,
  StepFailedError,
  WorkflowFailure,
  SerializationError,
} from "../errors.js";
import { fromPayload, toPayload } from "../payload.js";
import { Wake } from "../internal/wake.js";
import type { Conn, Kind, ReplyResult } from "./conn.js";
import type { WorkerConfig } from "./registry.js";
import { WorkflowContext } from "./context.js";

/** Far enough to mean "no deadline", and still an exact integer in every language's JSON. */
export const NEVER_MS = Number.MAX_SAFE_INTEGER;

type Outcome = { case: "output"; value: Payload } | { case: "failure"; value: ReturnType<typeof failure> };

function failure(kind: string, message: string) {
  return create(FailureSchema, { kind, message });
}

export class Run {
  readonly workflowId: string;
  readonly workflowName: string;
  readonly epoch: bigint;
  readonly recoveryAttempts: number;
  readonly recorded = new Map<number, Step>();
  nextStep = 0;
  /** Aborted on cancel (reason CancelledError) or when the run is abandoned (Disconnected, Fenced). */
  readonly controller = new AbortController();
  readonly wake = new Wake();
  /** Receives the server completed itself and pushed with the wakeup, by step position. */
  readonly delivered = new Map<number, Payload>();
  /** Step records held back until the next request or the completion. */
  private deferred: RecordStep[] = [];

  constructor(
    readonly dispatch: DispatchWorkflow,
    readonly conn: Conn,
    readonly config: WorkerConfig,
  ) {
    this.workflowId = dispatch.workflowId;
    this.workflowName = dispatch.workflowName;
    this.epoch = dispatch.epoch;
    this.recoveryAttempts = dispatch.recoveryAttempts;
    for (const s of dispatch.steps) this.recorded.set(s.stepId, s);
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  get logger() {
    return this.config.logger;
  }

  /** Stops the run at its next await point with `reason` (what the workflow code sees). */
  interrupt(reason: Interruption): void {
    if (!this.signal.aborted) this.controller.abort(reason);
    this.wake.ring();
  }

  /** Throws the interruption if the run was cancelled or abandoned. */
  checkCancelled(): void {
    if (this.signal.aborted) throw this.signal.reason instanceof Error ? this.signal.reason : new CancelledError();
  }

  /** Sends a request for this workflow after the step records it holds back. */
  async request(kind: Kind): Promise<ReplyResult> {
    await this.flush();
    return this.conn.request(kind);
  }

  /** Holds back a step's record until the next request or the completion. */
  defer(stepId: number, name: string, outcome: RecordStep["outcome"], attempts: number): void {
    this.deferred.push(
      create(RecordStepSchema, { workflowId: this.workflowId, epoch: this.epoch, stepId, name, outcome, attempts }),
    );
  }

  /** Makes the held-back step records durable, all at once. */
  async flush(): Promise<void> {
    const held = this.deferred;
    if (held.length === 0) return;
    this.deferred = [];
    const replies = await Promise.all(held.map((r) => this.conn.request({ case: "recordStep", value: r })));
    for (const r of replies) expect(r, "stepRecorded");
  }

  /** Checkpoints a step with a JSON result and waits until it is durable. */
  async record(stepId: number, name: string, value: JsonValue): Promise<void> {
    const value_ = create(RecordStepSchema, {
      workflowId: this.workflowId,
      epoch: this.epoch,
      stepId,
      name,
      outcome: { case: "output", value: toPayload(value) },
      attempts: 1,
    });
    expect(await this.request({ case: "recordStep", value: value_ }), "stepRecorded");
  }

  /**
   * The recorded result at `stepId`, raising what it recorded (a failure, or non-determinism
   * when another step is recorded there).
   */
  replay(stepId: number, name: string, rec: Step): JsonValue {
    if (rec.name !== name) {
      throw new NonDeterminismError(
        `workflow ${JSON.stringify(this.workflowId)} called step ${JSON.stringify(name)} at position ${stepId}, ` +
          `where its history records ${JSON.stringify(rec.name)}`,
      );
    }
    if (rec.failure) throw new StepFailedError(name, rec.failure.message);
    return fromPayload(rec.output);
  }

  /** The JSON recorded at `stepId` under `name`; undefined when nothing is recorded there. */
  recordedJson(stepId: number, name: string): JsonValue | undefined {
    const rec = this.recorded.get(stepId);
    return rec ? this.replay(stepId, name, rec) : undefined;
  }

  /** Whether a wait until `untilMs` (by a clock now at `nowMs`) is long enough to park for. */
  shouldPark(untilMs: number, nowMs: number): boolean {
    return this.config.parkAfterMs !== null && untilMs - nowMs > this.config.parkAfterMs;
  }

  /** Asks the server to park this workflow; true when it did (the run must end now). */
  async park(stepId: number, wakeAtMs: number, on: Park["on"]): Promise<boolean> {
    const req = create(ParkSchema, {
      workflowId: this.workflowId,
      epoch: this.epoch,
      stepId,
      wakeAtMs: BigInt(Math.min(wakeAtMs, NEVER_MS)),
      on,
    });
    return expect(await this.request({ case: "park", value: req }), "parked").parked;
  }

  /** Waits until `untilMs` (by a clock now at `nowMs`), a wakeup, or a cancel. */
  async waitUntil(untilMs: number, nowMs: number): Promise<void> {
    await this.wake.wait(untilMs >= NEVER_MS ? Infinity : untilMs - nowMs, this.signal);
    this.checkCancelled();
  }

  /** Runs the workflow function and reports its outcome; resolves when the run is over. */
  async execute(): Promise<void> {
    let outcome: Outcome | undefined;
    try {
      const fn = this.config.workflows.get(this.workflowName);
      if (!fn) {
        throw new WorkflowFailure("UnknownWorkflow", `this worker has no workflow named ${JSON.stringify(this.workflowName)}`);
      }
      const out = await fn(new WorkflowContext(this), fromPayload(this.dispatch.input));
      outcome = { case: "output", value: toPayload(out) };
    } catch (e) {
      if (e instanceof Interruption || this.signal.aborted) {
        const reason = e instanceof Interruption ? e : this.signal.reason;
        this.logger.info("workflow run stopped", { workflowId: this.workflowId, reason: String(reason?.message ?? reason) });
      } else {
        outcome = { case: "failure", value: failure(kindOf(e), messageOf(e)) };
      }
    }
    const held = this.deferred;
    this.deferred = [];
    try {
      if (!outcome) {
        // Stopped without an outcome (cancelled, parked): the steps it finished are still
        // recorded, so none of them runs again.
        await Promise.all(held.map((r) => this.conn.request({ case: "recordStep", value: r }).catch(() => undefined)));
        return;
      }
      const req = create(CompleteWorkflowSchema, {
        workflowId: this.workflowId,
        epoch: this.epoch,
        outcome,
        steps: held,
      });
      const r = await this.conn.request({ case: "completeWorkflow", value: req });
      if (r.case === "error") {
        this.logger.info("completion refused", { workflowId: this.workflowId, reason: r.value.reason, message: r.value.message });
      }
    } catch (e) {
      if (!(e instanceof DisconnectedError)) throw e;
      // The stream broke: the server hands the workflow out again.
    }
  }
}

/** The kind a thrown error fails its workflow with. */
function kindOf(e: unknown): string {
  if (e instanceof WorkflowFailure) return e.kind;
  if (e instanceof SerializationError) return "Serialization";
  if (e instanceof Error) return e.name || "Error";
  return "Error";
}

function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

type ReplyValue<K> = Extract<ReplyResult, { case: K }> extends { value: infer V } ? V : never;

/** The reply's answer of the expected kind, or the error it carries. */
export function expect<K extends NonNullable<ReplyResult["case"]>>(r: ReplyResult, kind: K): ReplyValue<K> {
  if ((r.case as string) === kind) return (r as { value: unknown }).value as ReplyValue<K>;
  if (r.case === "error") throw refused(r.value);
  throw new DisconnectedError(`unexpected reply ${String(r.case)} where ${kind} was due`);
}

/** A refused write as the error the workflow sees. */
export function refused(e: ReplyError): Error {
  switch (e.reason) {
    case "STALE_EPOCH":
      return new FencedError(e.message);
    case "WORKFLOW_NOT_RUNNING":
      return new CancelledError(e.message);
    case "NON_DETERMINISM":
      return new NonDeterminismError(e.message);
    default:
      return new WorkflowFailure(e.reason, e.message);
  }
}
