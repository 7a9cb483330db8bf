// Reading the server's replies to worker requests: the answer of the kind asked for, or the
// refusal as the error the workflow sees.

import type { ReplyError } from "../gen/waymark/v1/worker_pb.js";
import { CancelledError, Code, DisconnectedError, FencedError, NonDeterminismError, WorkflowFailure } from "../errors.js";
import type { ReplyResult } from "./conn.js";

type ReplyValue<K> = Extract<ReplyResult, { case: K }> extends { value: infer V } ? V : never;

/** The reply's answer of the expected kind, or the error it carries. */
export function expect<K extends NonNullable<ReplyResult["case"]>>(r: ReplyResult, kind: K): ReplyValue<K> {
  if ((r.case as string) === kind) return (r as { value: unknown }).value as ReplyValue<K>;
  if (r.case === "error") throw refused(r.value);
  throw new DisconnectedError(`unexpected reply ${String(r.case)} where ${kind} was due`);
}

/**
 * Whether the server turned the request away for now (code UNAVAILABLE, whatever the reason):
 * never the workflow's failure; the request is sent again.
 */
export function isUnavailable(r: ReplyResult): r is { case: "error"; value: ReplyError } {
  return r.case === "error" && r.value.code === Code.Unavailable;
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
