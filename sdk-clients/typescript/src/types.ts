// What the client returns: workflows, steps, messages and events as plain objects with JSON values.

import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import type { JsonValue } from "@bufbuild/protobuf";
import * as pb from "./gen/waymark/v1/types_pb.js";
import { fromPayload } from "./payload.js";

export type { JsonValue };

export type WorkflowStatus =
  | "UNSPECIFIED"
  | "ENQUEUED"
  | "DELAYED"
  | "PENDING"
  | "SUCCESS"
  | "ERROR"
  | "CANCELLED"
  | "MAX_RECOVERY_ATTEMPTS_EXCEEDED"
  /** An ended run (`<id>/run-<n>`) of a workflow that continued as new; the workflow went on under its id. */
  | "CONTINUED_AS_NEW";

const TERMINAL: ReadonlySet<WorkflowStatus> = new Set([
  "SUCCESS",
  "ERROR",
  "CANCELLED",
  "MAX_RECOVERY_ATTEMPTS_EXCEEDED",
  "CONTINUED_AS_NEW",
]);

export function isTerminal(status: WorkflowStatus): boolean {
  return TERMINAL.has(status);
}

export function statusFromWire(s: pb.WorkflowStatus): WorkflowStatus {
  const name = pb.WorkflowStatus[s] as string | undefined;
  return (name ?? "UNSPECIFIED") as WorkflowStatus;
}

export function statusToWire(s: WorkflowStatus): pb.WorkflowStatus {
  return pb.WorkflowStatus[s];
}

/** Why a workflow or step failed. */
export interface Failure {
  kind: string;
  message: string;
}

export interface WorkflowInfo {
  workflowId: string;
  workflowName: string;
  status: WorkflowStatus;
  queue: string;
  appVersion: string;
  input: JsonValue;
  /** Set when status is SUCCESS. */
  output?: JsonValue;
  /** Set when status is ERROR. */
  failure?: Failure;
  createdAt?: Date;
  updatedAt?: Date;
  recoveryAttempts: number;
  epoch: number;
  workerId: string;
  parentWorkflowId: string;
  deadline?: Date;
  priority: number;
  partitionKey: string;
  dedupId: string;
  startedAt?: Date;
  wakeAt?: Date;
  /** Lineage: the workflow this one was forked from (`client.fork`); "" when not a fork. */
  forkedFromWorkflowId: string;
  /** The step position the fork ran on from (the source's steps before it were copied); 0 when not a fork. */
  forkedFromStep: number;
  /** Its tags: given at the start, or inherited from its parent; `{}` when none. */
  tags: Record<string, string>;
  /**
   * How many runs it continued as new from (0: its first run); on an ended run
   * (CONTINUED_AS_NEW), that run's number.
   */
  run: number;
  /** On an ended run (CONTINUED_AS_NEW): the workflow that went on; "" otherwise. */
  continuedAsWorkflowId: string;
}

export interface StepInfo {
  stepId: number;
  name: string;
  output?: JsonValue;
  failure?: Failure;
  attempts: number;
  epoch: number;
  recordedAt?: Date;
  /**
   * When the step began, when the server knows: steps a worker ran and said how long they took
   * (retries included), and remote steps (their call).
   */
  startedAt?: Date;
}

export interface MessageInfo {
  messageId: string;
  workflowId: string;
  topic: string;
  payload: JsonValue;
  idempotencyKey: string;
  sentAt?: Date;
  consumed: boolean;
  consumedAt?: Date;
  consumedByStep?: number;
}

export interface EventInfo {
  key: string;
  value: JsonValue;
  updatedAt?: Date;
  history: { value: JsonValue; stepId: number; setAt?: Date }[];
}

/**
 * A timestamp as a Date; undefined when unset, and when past the last Date (year 275760), which
 * means never: a worker that parks a wait with no deadline (awaiting a child or a remote step)
 * asks to be woken at the largest integer its language has, and the server gives that back as
 * the workflow's wake time.
 */
export function date(t: Timestamp | undefined): Date | undefined {
  if (!t) return undefined;
  const d = timestampDate(t);
  return Number.isNaN(d.getTime()) ? undefined : d;
}

function failure(f: pb.Failure | undefined): Failure | undefined {
  return f ? { kind: f.kind, message: f.message } : undefined;
}

export function workflowInfo(w: pb.Workflow): WorkflowInfo {
  return {
    workflowId: w.workflowId,
    workflowName: w.workflowName,
    status: statusFromWire(w.status),
    queue: w.queueName,
    appVersion: w.appVersion,
    input: fromPayload(w.input),
    output: w.output ? fromPayload(w.output) : undefined,
    failure: failure(w.failure),
    createdAt: date(w.createdAt),
    updatedAt: date(w.updatedAt),
    recoveryAttempts: w.recoveryAttempts,
    epoch: Number(w.epoch),
    workerId: w.workerId,
    parentWorkflowId: w.parentWorkflowId,
    deadline: date(w.deadline),
    priority: w.priority,
    partitionKey: w.partitionKey,
    dedupId: w.dedupId,
    startedAt: date(w.startedAt),
    wakeAt: date(w.wakeAt),
    forkedFromWorkflowId: w.forkedFromWorkflowId,
    forkedFromStep: w.forkedFromStep,
    tags: { ...w.tags },
    run: w.run,
    continuedAsWorkflowId: w.continuedAsWorkflowId,
  };
}

export function stepInfo(s: pb.Step): StepInfo {
  return {
    stepId: s.stepId,
    name: s.name,
    output: s.output ? fromPayload(s.output) : undefined,
    failure: failure(s.failure),
    attempts: s.attempts,
    epoch: Number(s.epoch),
    recordedAt: date(s.recordedAt),
    startedAt: date(s.startedAt),
  };
}

export function messageInfo(m: pb.Message): MessageInfo {
  return {
    messageId: m.messageId,
    workflowId: m.workflowId,
    topic: m.topic,
    payload: fromPayload(m.payload),
    idempotencyKey: m.idempotencyKey,
    sentAt: date(m.sentAt),
    consumed: m.consumed,
    consumedAt: date(m.consumedAt),
    consumedByStep: m.consumed ? m.consumedByStep : undefined,
  };
}

export function eventInfo(e: pb.Event): EventInfo {
  return {
    key: e.key,
    value: fromPayload(e.value),
    updatedAt: date(e.updatedAt),
    history: e.history.map((h) => ({ value: fromPayload(h.value), stepId: h.stepId, setAt: date(h.setAt) })),
  };
}
