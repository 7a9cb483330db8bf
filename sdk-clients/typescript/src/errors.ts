// Error types. Client calls throw `RpcError` (with the server's stable reason); workflow code sees
// `StepFailedError`, `NonDeterminismError`, `ChildWorkflowError`, and the interruptions
// (`CancelledError` and friends) that end a run without failing the workflow.

import { Code, ConnectError } from "@connectrpc/connect";
import { BinaryReader } from "@bufbuild/protobuf/wire";
import type { JsonValue } from "@bufbuild/protobuf";

export { Code };

/** Base of every error this SDK throws. */
export class WaymarkError extends Error {
  override name = "WaymarkError";
}

/**
 * The server refused a call, or could not be reached. `reason` is the stable ErrorInfo reason a
 * program can match (e.g. `WORKFLOW_NOT_FOUND`, `DEDUP_ID_TAKEN`); `message` is safe to show.
 */
export class RpcError extends WaymarkError {
  override name = "RpcError";
  constructor(
    readonly code: Code,
    readonly reason: string,
    message: string,
    /** ErrorInfo metadata, e.g. `holder_workflow_id` for DEDUP_ID_TAKEN. */
    readonly metadata: Record<string, string> = {},
  ) {
    super(`${message} (${reason})`);
  }
}

/**
 * The connection options contradict each other (an `http://` address with TLS options, a client
 * certificate without its key) or name a file that cannot be read. Thrown when the Client or
 * Worker is constructed; the message names the options or environment variables at fault,
 * never an API key.
 */
export class ConfigurationError extends WaymarkError {
  override name = "ConfigurationError";
}

/** A value could not be converted to or from JSON. */
export class SerializationError extends WaymarkError {
  override name = "SerializationError";
}

/**
 * A workflow failure with a kind of your choosing. Throw it from a workflow to fail it with
 * `kind` (any other error fails it with the error's `name` as kind).
 */
export class WorkflowFailure extends WaymarkError {
  override name = "WorkflowFailure";
  constructor(
    readonly kind: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * A step failed for good (its retries exhausted, or its output too large to record). Recorded,
 * so a replay fails the same way. `stepKind` is the recorded failure's kind: `StepFailed` when
 * the function threw, `PAYLOAD_TOO_LARGE` when its output was over the server's limit.
 */
export class StepFailedError extends WorkflowFailure {
  override name = "StepFailedError";
  constructor(
    readonly stepName: string,
    readonly stepMessage: string,
    readonly stepKind: string = "StepFailed",
  ) {
    super("StepFailed", `step ${JSON.stringify(stepName)} failed: ${stepMessage}`);
  }
}

/**
 * A value is larger than the server takes (its `maxPayloadBytes` of JSON text, or a message
 * over its `maxMessageBytes` once encoded). Thrown by `ctx.send`, `setEvent`, `writeStream`,
 * `startChild` and `startStep` before anything is sent; uncaught, it fails the workflow with
 * kind `PAYLOAD_TOO_LARGE`, the server's reason for the same refusal.
 */
export class PayloadTooLargeError extends WorkflowFailure {
  override name = "PayloadTooLargeError";
  readonly reason = "PAYLOAD_TOO_LARGE";
  constructor(message: string) {
    super("PAYLOAD_TOO_LARGE", message);
  }
}

/** The workflow called another step than its history records at that position. */
export class NonDeterminismError extends WorkflowFailure {
  override name = "NonDeterminismError";
  constructor(message: string) {
    super("NonDeterminism", message);
  }
}

/** A child (or awaited) workflow did not succeed: kind ChildFailed, ChildCancelled or ChildDeadLettered. */
export class ChildWorkflowError extends WorkflowFailure {
  override name = "ChildWorkflowError";
  constructor(
    kind: "ChildFailed" | "ChildCancelled" | "ChildDeadLettered",
    readonly childWorkflowId: string,
    message: string,
  ) {
    super(kind, message);
  }
}

/** A finished workflow did not succeed; thrown by `Client.result`. */
export class WorkflowFailedError extends WaymarkError {
  override name = "WorkflowFailedError";
  constructor(
    readonly workflowId: string,
    readonly status: string,
    readonly kind: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Ends a run without failing the workflow: someone else is (or will be) responsible for it.
 * Workflow code should let these propagate.
 */
export class Interruption extends WaymarkError {
  override name = "Interruption";
}

/** The workflow was cancelled; it stops at its next await point. */
export class CancelledError extends Interruption {
  override name = "CancelledError";
  constructor(message = "workflow cancelled") {
    super(message);
  }
}

/** Another dispatch owns the workflow now (this worker was presumed dead). */
export class FencedError extends Interruption {
  override name = "FencedError";
}

/**
 * This run of the workflow was let go without an outcome: the server stayed unavailable past
 * the worker's resend bound, or the stream broke. Nothing more is sent for the run — not even
 * a completion, whatever the function goes on to return — and the server dispatches the
 * workflow again. Every later ctx call of the run throws it.
 */
export class RunDroppedError extends Interruption {
  override name = "RunDroppedError";
}

/** The stream to the server broke: the run was dropped, and the server gives the workflow out again. */
export class DisconnectedError extends RunDroppedError {
  override name = "DisconnectedError";
  constructor(message = "disconnected from the server") {
    super(message);
  }
}

/** The workflow was parked while it waits; the server dispatches it again when the wait resolves. */
export class ParkedError extends Interruption {
  override name = "ParkedError";
  constructor() {
    super("workflow parked until its wait resolves");
  }
}

/**
 * Thrown by `ctx.continueAsNew(input)`: ends this run, and the workflow goes on under its id with
 * `input` and an empty history. Not a failure: the worker completes the run with
 * `continue_as_new`, and a `Replayer` reports `continued_as_new`. Workflow code that catches
 * errors lets it propagate, like every `Interruption`.
 */
export class ContinueAsNew extends Interruption {
  override name = "ContinueAsNew";
  constructor(
    /** The next run's input, as JSON (as the next run will read it). */
    readonly input: JsonValue,
  ) {
    super("the workflow continues as new");
  }
}

/**
 * Only in an offline replay (`Replayer`): the workflow made a call at `stepId`, a position its
 * history does not record, where a live run would go on (ask the server, run a step, read the
 * clock, sleep on). An interruption like a cancel, not a step's failure: the replay ends there
 * (`suspended`) having sent and run nothing, and code that catches it does not change that —
 * every later ctx call throws it again.
 */
export class HistoryEndedError extends Interruption {
  override name = "HistoryEndedError";
  constructor(readonly stepId: number) {
    super(`the history ends at step ${stepId}`);
  }
}

/** A `Replayer` was given a history of a workflow that is not registered with it. */
export class UnknownWorkflowError extends WaymarkError {
  override name = "UnknownWorkflowError";
  constructor(readonly workflowName: string) {
    super(`no workflow named ${JSON.stringify(workflowName)} is registered`);
  }
}

/**
 * Converts a Connect error (or anything thrown by a call) into an `RpcError`; `context`, when
 * given, goes before the server's message ("the server refused the worker stream: …").
 */
export function toRpcError(e: unknown, context?: string): unknown {
  if (e instanceof WaymarkError) return e;
  const ce = ConnectError.from(e);
  let reason = Code[ce.code]
    .replace(/([a-z])([A-Z])/g, "$1_$2")
    .toUpperCase();
  let metadata: Record<string, string> = {};
  for (const d of ce.details) {
    if ("type" in d && d.type === "google.rpc.ErrorInfo") {
      const info = decodeErrorInfo(d.value);
      reason = info.reason || reason;
      metadata = info.metadata;
    }
  }
  return new RpcError(ce.code, reason, context ? `${context}: ${ce.rawMessage}` : ce.rawMessage, metadata);
}

/**
 * Decodes google.rpc.ErrorInfo by hand: its three fields are all this SDK needs, and the
 * google/rpc protos are not part of Waymark's contract to generate from.
 */
function decodeErrorInfo(bytes: Uint8Array): { reason: string; metadata: Record<string, string> } {
  const r = new BinaryReader(bytes);
  let reason = "";
  const metadata: Record<string, string> = {};
  while (r.pos < r.len) {
    const [field, wire] = r.tag();
    if (field === 1) reason = r.string();
    else if (field === 3) {
      const entry = new BinaryReader(r.bytes());
      let k = "";
      let v = "";
      while (entry.pos < entry.len) {
        const [f, w] = entry.tag();
        if (f === 1) k = entry.string();
        else if (f === 2) v = entry.string();
        else entry.skip(w);
      }
      metadata[k] = v;
    } else r.skip(wire);
  }
  return { reason, metadata };
}
