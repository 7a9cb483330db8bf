// One dispatched run of a workflow: its recorded history (read only through `history`, the
// cursor every primitive takes its position from), the step records it holds back, and every
// request it makes to the server. The WorkflowContext methods are built on
// this; the session starts it and hears when it ends.

import { create, type JsonValue } from "@bufbuild/protobuf";
import {
  CompleteWorkflowSchema,
  ContinueAsNewSchema,
  ParkSchema,
  RecordStepSchema,
  type CompleteWorkflow,
  type ContinueAsNew as ContinueAsNewMsg,
  type DispatchWorkflow,
  type Park,
  type RecordStep,
} from "../gen/waymark/v1/worker_pb.js";
import type { Payload } from "../gen/waymark/v1/types_pb.js";
import {
  CancelledError,
  ContinueAsNew,
  DisconnectedError,
  FencedError,
  HistoryEndedError,
  Interruption,
  RunDroppedError,
  WorkflowFailure,
  SerializationError,
} from "../errors.js";
import { fromPayload, toPayload } from "../payload.js";
import { Wake } from "../internal/wake.js";
import { resending } from "../internal/resend.js";
import type { Kind, ReplyResult, Requests } from "./conn.js";
import type { WorkerConfig } from "./registry.js";
import { WorkflowContext } from "./context.js";
import { expect, isUnavailable } from "./replies.js";
import { Records } from "./records.js";
import { checkedPayload, failure, messageBytes } from "./limits.js";
import { History } from "./history.js";
import { NOOP, RunSpans, startSpan, type Attributes, type SpanKindName, type TraceSpan } from "../tracing.js";

/** Far enough to mean "no deadline", and still an exact integer in every language's JSON. */
export const NEVER_MS = Number.MAX_SAFE_INTEGER;

type Outcome =
  | { case: "output"; value: Payload }
  | { case: "failure"; value: ReturnType<typeof failure> }
  | { case: "continueAsNew"; value: ContinueAsNewMsg };

export class Run {
  readonly workflowId: string;
  readonly workflowName: string;
  readonly epoch: bigint;
  readonly recoveryAttempts: number;
  /** The recorded steps and the position cursor: every primitive replays through it. */
  readonly history: History;
  /** Aborted on cancel (reason CancelledError) or when the run stops (Fenced, dropped). */
  readonly controller = new AbortController();
  readonly wake = new Wake();
  /** Receives the server completed itself and pushed with the wakeup, by step position. */
  readonly delivered = new Map<number, Payload>();
  /** Aborted (reason the RunDroppedError) when the run is dropped: from then on it sends nothing. */
  private readonly dropping = new AbortController();
  private readonly records: Records;
  /**
   * The workflow span and the spans opened under it. All NOOP until `execute` opens the
   * workflow span, and so for a replay offline (a `Replayer`), which does no work now.
   */
  private spans = new RunSpans();

  constructor(
    readonly dispatch: DispatchWorkflow,
    readonly conn: Requests,
    readonly config: WorkerConfig,
    /**
     * Replaying offline (a `Replayer`): a call the history does not record ends the run with
     * HistoryEndedError instead of going live, and nothing waits.
     */
    readonly offline = false,
  ) {
    this.workflowId = dispatch.workflowId;
    this.workflowName = dispatch.workflowName;
    this.epoch = dispatch.epoch;
    this.recoveryAttempts = dispatch.recoveryAttempts;
    this.history = new History(this.workflowId, dispatch.steps);
    this.records = new Records(this.workflowId, this.epoch, (kind) => this.send(kind));
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  get logger() {
    return this.config.logger;
  }

  get dropped(): boolean {
    return this.dropping.signal.aborted;
  }

  /** Stops the run at its next await point with `reason` (what the workflow code sees). */
  interrupt(reason: Interruption): void {
    if (!this.signal.aborted) this.controller.abort(reason);
    this.wake.ring();
  }

  /**
   * Lets the run go without an outcome: nothing more is sent for it (no record, no completion),
   * every later ctx call throws the returned error, and `execute` ends at once. The server
   * dispatches the workflow again. The first reason given stands.
   */
  drop(reason: RunDroppedError): RunDroppedError {
    if (!this.dropped) {
      this.dropping.abort(reason);
      this.logger.info("workflow run dropped; the server will dispatch it again", { workflowId: this.workflowId, reason: reason.message });
    }
    this.interrupt(this.dropping.signal.reason);
    return this.dropping.signal.reason;
  }

  /**
   * A call at `stepId` is about to go live (ask the server, run a step's function, read the
   * clock, wait): offline, where the history ends here, the run is interrupted instead. The
   * first position stands, so code that swallows the error cannot move the end of the replay.
   */
  live(stepId: number): void {
    if (!this.offline) return;
    this.interrupt(new HistoryEndedError(stepId));
    throw this.signal.reason;
  }

  /** Throws the interruption if the run was dropped, cancelled or fenced. */
  checkCancelled(): void {
    if (this.dropped) throw this.dropping.signal.reason;
    if (this.signal.aborted) throw this.signal.reason instanceof Error ? this.signal.reason : new CancelledError();
  }

  /**
   * Sends one request for this run, again and again while the server answers UNAVAILABLE (a
   * resend is safe: every write is fenced and idempotent). Past the resend bound, or when the
   * stream breaks, the run is dropped and this throws its RunDroppedError.
   */
  private async send(kind: Kind): Promise<ReplyResult> {
    if (this.dropped) throw this.dropping.signal.reason;
    // Every request and step record goes out here: this one check keeps a replay off the wire.
    this.live(stepOf(kind));
    let r: ReplyResult;
    try {
      r = await resending(() => this.conn.request(kind), {
        forMs: this.config.resendForMs,
        unavailable: (a) => a.ok && isUnavailable(a.value),
        signal: this.dropping.signal,
        onResend: (n, a) =>
          this.logger.debug("server unavailable; sending the request again", {
            workflowId: this.workflowId,
            request: kind.case,
            resend: n,
            reason: a.ok && a.value.case === "error" ? a.value.value.reason : "",
          }),
      });
    } catch (e) {
      if (e instanceof DisconnectedError) throw this.drop(e);
      throw e;
    }
    // Dropped while the request was out (the stream broke, the run was lost): act on nothing.
    if (this.dropped) throw this.dropping.signal.reason;
    if (isUnavailable(r)) {
      throw this.drop(
        new RunDroppedError(`the server stayed unavailable for ${this.config.resendForMs} ms (${r.value.reason}: ${r.value.message})`),
      );
    }
    return r;
  }

  /**
   * `value` as the payload of `what`; PayloadTooLargeError (before anything is sent) when the
   * server would not take it.
   */
  payload(what: string, value: unknown): Payload {
    return checkedPayload(what, value, this.conn.limits);
  }

  /** Sends a request for this workflow once every step record taken before it is durable. */
  async request(kind: Kind): Promise<ReplyResult> {
    // Checked before anything is awaited, so of several calls started together offline the
    // first in call order is where the history ends.
    this.live(stepOf(kind));
    await this.flush();
    return this.send(kind);
  }

  /**
   * Holds back a step's record until the next request or the completion; `tookMs`, how long a
   * step whose function this worker ran took (retries included), dates its start.
   */
  defer(stepId: number, name: string, outcome: RecordStep["outcome"], attempts: number, tookMs?: number): void {
    if (this.dropped) throw this.dropping.signal.reason;
    this.records.hold(stepId, name, outcome, attempts, tookMs);
  }

  /** Makes the held-back step records durable; resolves once every record taken so far is. */
  flush(): Promise<void> {
    return this.records.flush();
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
    // A replay never waits: what the wait led to is recorded, or the history ends at the
    // request (or `live` check) every wait makes first.
    if (this.offline) return;
    await this.wake.wait(untilMs >= NEVER_MS ? Infinity : untilMs - nowMs, this.signal);
    this.checkCancelled();
  }

  /**
   * Opens span `name` under the workflow span for an operation done now (never for one read
   * back from the history). It ends when the caller ends it or, at the latest, with the run.
   */
  span(name: string, kind: SpanKindName, stepId: number, attributes: Attributes = {}): TraceSpan {
    if (this.spans.root === NOOP) return NOOP;
    return this.spans.child(name, kind, { "waymark.workflow.id": this.workflowId, "waymark.step.id": stepId, ...attributes });
  }

  /** Runs the workflow function and reports its outcome; resolves when the run is over. */
  async execute(): Promise<void> {
    const d = this.dispatch;
    const root = startSpan(
      `workflow ${this.workflowName}`,
      "consumer",
      { wire: d.traceContext },
      {
        "waymark.workflow.id": this.workflowId,
        "waymark.workflow.name": this.workflowName,
        "waymark.epoch": Number(this.epoch),
        "waymark.replay": d.steps.length > 0 || this.recoveryAttempts > 0,
        "waymark.recovery_attempts": this.recoveryAttempts,
      },
    );
    this.spans = new RunSpans(root);
    let outcome: Outcome | undefined;
    try {
      outcome = await root.within(() => this.outcome());
      await this.report(outcome);
    } finally {
      // A failed workflow's span is ERROR; an interrupted one (cancelled, parked, dropped,
      // fenced) or one that continued as new stays UNSET. What is still open under it (a wait, a remote call) ends first.
      if (outcome?.case === "failure") root.fail(outcome.value.message);
      this.spans.endChildren();
      root.end();
    }
  }

  /** Sends the run's outcome, unless it has none to send or may send nothing. */
  private async report(outcome: Outcome | undefined): Promise<void> {
    // A dropped run sends nothing, whatever its function returned or threw; nor does one a
    // newer dispatch of its workflow replaced (its epoch is stale: the server would refuse it).
    if (this.dropped || this.signal.reason instanceof FencedError) return;
    try {
      if (!outcome) {
        // Stopped without an outcome (cancelled, parked): the steps it finished are still
        // recorded, so none of them runs again.
        await this.flush().catch(() => undefined);
        return;
      }
      // The completion depends on every step: records still on their way are durable first.
      await this.records.durable().catch(() => undefined);
      if (this.dropped) return;
      const req = await this.completion(outcome);
      if (!req) return;
      const r = await this.send({ case: "completeWorkflow", value: req });
      if (r.case === "error") {
        this.logger.info("completion refused", { workflowId: this.workflowId, reason: r.value.reason, message: r.value.message });
      }
    } catch (e) {
      // Dropped on the way: the server hands the workflow out again.
      if (!(e instanceof RunDroppedError)) throw e;
    }
  }

  /**
   * The completion to send, carrying the held step records when that message stays within the
   * server's limit. Otherwise the records go first on their own (a message each) and the
   * completion follows once they are durable, as it depends on them. Undefined when they were
   * refused: carried with the completion, they would have had it refused as a whole.
   */
  private async completion(outcome: Outcome): Promise<CompleteWorkflow | undefined> {
    const complete = (steps: RecordStep[]) =>
      create(CompleteWorkflowSchema, { workflowId: this.workflowId, epoch: this.epoch, outcome, steps });
    const held = this.records.peek();
    if (held.length === 0 || messageBytes({ case: "completeWorkflow", value: complete([...held]) }) <= this.conn.limits.maxMessageBytes) {
      return complete(this.records.take());
    }
    try {
      await this.flush();
    } catch (e) {
      if (e instanceof RunDroppedError) throw e;
      this.logger.info("step records refused; the workflow is not completed", { workflowId: this.workflowId, error: messageOf(e) });
      return undefined;
    }
    return complete([]);
  }

  /**
   * Runs the workflow function: its output, failure or next run's input (continued as new), or undefined when the run stopped
   * without one (interrupted, dropped). A drop ends the wait at once, so a dropped run leaves
   * the worker even if its function goes on (every ctx call it makes throws).
   */
  private async outcome(): Promise<Outcome | undefined> {
    const dropped = new Promise<undefined>((resolve) => {
      if (this.dropped) resolve(undefined);
      this.dropping.signal.addEventListener("abort", () => resolve(undefined), { once: true });
    });
    try {
      const fn = this.config.workflows.get(this.workflowName);
      if (!fn) {
        throw new WorkflowFailure("UnknownWorkflow", `this worker has no workflow named ${JSON.stringify(this.workflowName)}`);
      }
      const result = Promise.resolve(fn(new WorkflowContext(this), fromPayload(this.dispatch.input)));
      const out = await Promise.race([result.then((value) => ({ value })), dropped]);
      if (!out || this.dropped) return undefined;
      // Over the server's limit, the workflow fails with PAYLOAD_TOO_LARGE (thrown here and
      // caught below), as the server itself would fail it.
      return { case: "output", value: this.payload("the workflow's output", out.value) };
    } catch (e) {
      if (e instanceof RunDroppedError) this.drop(e);
      if (e instanceof ContinueAsNew && !this.dropped) return this.continued(e);
      if (e instanceof Interruption || this.signal.aborted) {
        const reason = e instanceof Interruption ? e : this.signal.reason;
        this.logger.info("workflow run stopped", { workflowId: this.workflowId, reason: String(reason?.message ?? reason) });
        return undefined;
      }
      return { case: "failure", value: failure(kindOf(e), messageOf(e)) };
    }
  }

  /**
   * The completion of a run that continued as new with `e.input`; over the server's limit, a
   * failure (PAYLOAD_TOO_LARGE), as for an oversized output.
   */
  private continued(e: ContinueAsNew): Outcome {
    try {
      const input = this.payload("the next run's input", e.input);
      return { case: "continueAsNew", value: create(ContinueAsNewSchema, { input }) };
    } catch (err) {
      return { case: "failure", value: failure(kindOf(err), messageOf(err)) };
    }
  }
}

/** The step position a request is for (0 for one that names none). */
function stepOf(kind: Kind): number {
  const v = kind.value as { stepId?: unknown } | undefined;
  return typeof v?.stepId === "number" ? v.stepId : 0;
}

/** The kind a thrown error fails its workflow with. */
export function kindOf(e: unknown): string {
  if (e instanceof WorkflowFailure) return e.kind;
  if (e instanceof SerializationError) return "Serialization";
  if (e instanceof Error) return e.name || "Error";
  return "Error";
}

export function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
