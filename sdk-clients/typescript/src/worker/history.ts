// A run's recorded history and its cursor: the one place that reads the steps a dispatch carries.
// Every durable primitive takes its position here, in call order, and asks what is recorded
// there; a replay is only as deterministic as this numbering and this name check, so no
// primitive reads the recorded steps, checks a name, or decodes a built-in shape on its own.
//
// Built-in steps carry the names and JSON shapes worker.proto lists: every SDK writes and reads
// the same ones, so a workflow begun by one worker replays on any other. Their names are
// defined here once, and so are the decoders of their shapes.

import type { JsonValue } from "@bufbuild/protobuf";
import type { ChildResult } from "../gen/waymark/v1/worker_pb.js";
import type { Failure, Payload, Step } from "../gen/waymark/v1/types_pb.js";
import { NonDeterminismError, SerializationError, StepFailedError } from "../errors.js";
import { fromPayload } from "../payload.js";
import { statusFromWire } from "../types.js";

/** The names of the built-in steps (worker.proto, "Recorded steps of the built-in operations"). */
export const BUILTIN = {
  sleep: "waymark.sleep",
  recvDeadline: "waymark.recv.deadline",
  recv: "waymark.recv",
  send: "waymark.send",
  setEvent: "waymark.set_event",
  getEventDeadline: "waymark.get_event.deadline",
  getEvent: "waymark.get_event",
  writeStream: "waymark.write_stream",
  closeStream: "waymark.close_stream",
  startChild: "waymark.start_child",
  awaitChild: "waymark.await_child",
  select: "waymark.select",
  waitAll: "waymark.wait_all",
  now: "waymark.now",
  uuid: "waymark.uuid",
  patch: "waymark.patch",
} as const;

/**
 * A durable wait over two positions: the deadline the SDK records first (so a recovered run
 * keeps its original timeout), then the outcome the server records, carrying the value in
 * `field`, or `null` when the deadline passed first.
 */
export interface WaitSteps {
  readonly deadline: string;
  readonly outcome: string;
  readonly field: string;
}

export const RECV_WAIT: WaitSteps = { deadline: BUILTIN.recvDeadline, outcome: BUILTIN.recv, field: "message" };
export const GET_EVENT_WAIT: WaitSteps = { deadline: BUILTIN.getEventDeadline, outcome: BUILTIN.getEvent, field: "value" };

/** What the history holds at a position for the step the workflow calls there. */
export type AtPosition =
  | { readonly kind: "live" }
  | { readonly kind: "output"; readonly value: JsonValue }
  | { readonly kind: "failure"; readonly error: StepFailedError };

/**
 * What `patched(patchId)` found at the next position: nothing recorded (`record`: the run is
 * live, the marker goes at `stepId`), this patch's marker (`replayed`), or anything else
 * (`old`: the run began under code without the change; no position taken).
 */
export type Patched =
  | { readonly kind: "record"; readonly stepId: number }
  | { readonly kind: "replayed"; readonly stepId: number }
  | { readonly kind: "old" };

/** How a recorded wait ended: with a value, or timed out (recorded `null`). */
export type Waited = { readonly timedOut: true } | { readonly timedOut: false; readonly value: JsonValue };

/** A child's end as an await_child step records it (the same in every SDK). */
export interface ChildOutcome {
  /** A WorkflowStatus name ("SUCCESS", "ERROR", "CANCELLED", ...); "" when the record has none. */
  readonly status: string;
  /** The child's output; `null` when the record has none. */
  readonly output: JsonValue;
  readonly failure: { readonly kind: string; readonly message: string };
}

export class History {
  private readonly steps = new Map<number, Step>();
  private next = 0;

  constructor(
    /** Named in the non-determinism message, so an operator knows which workflow diverged. */
    private readonly workflowId: string,
    steps: readonly Step[],
  ) {
    for (const s of steps) this.steps.set(s.stepId, s);
  }

  /** The position the next primitive will take. */
  get position(): number {
    return this.next;
  }

  /** Whether the next primitive replays (its position is already recorded). */
  get isReplaying(): boolean {
    return this.steps.has(this.next);
  }

  /**
   * Takes the next `n` positions and returns the first. Primitives call this when they are
   * called, not when awaited, so operations started together still number in call order and a
   * replay finds each where it was recorded.
   */
  take(n = 1): number {
    const id = this.next;
    this.next += n;
    return id;
  }

  /**
   * What is recorded at `stepId` for step `name`: its output, its failure, or nothing (the
   * primitive runs live). Throws NonDeterminismError when another step is recorded there.
   */
  at(stepId: number, name: string): AtPosition {
    const rec = this.checked(stepId, name);
    if (!rec) return { kind: "live" };
    if (rec.failure) return { kind: "failure", error: failedStep(name, rec.failure) };
    return { kind: "output", value: fromPayload(rec.output) };
  }

  /**
   * The JSON recorded at `stepId` for `name`; throws the StepFailedError it recorded (or
   * non-determinism). Undefined when nothing is recorded there.
   */
  json(stepId: number, name: string): JsonValue | undefined {
    const r = this.at(stepId, name);
    if (r.kind === "failure") throw r.error;
    return r.kind === "output" ? r.value : undefined;
  }

  /**
   * Whether `stepId` is recorded, checking only that it is `name` there: for a remote step's
   * call, whose outcome is read later (by the await), not when it is started.
   */
  isRecorded(stepId: number, name: string): boolean {
    return this.checked(stepId, name) !== undefined;
  }

  /** A sleep's recorded wake time (`{"wake_at_ms": N}`). */
  wakeAt(stepId: number): number | undefined {
    return numberAt(this.json(stepId, BUILTIN.sleep), "wake_at_ms");
  }

  /** A wait's recorded deadline (`{"deadline_ms": N}`), at the wait's first position. */
  deadline(stepId: number, wait: WaitSteps): number | undefined {
    return numberAt(this.json(stepId, wait.deadline), "deadline_ms");
  }

  /** A wait's recorded outcome (`{field: V} | null`), at the position after its deadline. */
  waited(stepId: number, wait: WaitSteps): Waited | undefined {
    const v = this.json(stepId, wait.outcome);
    if (v === undefined) return undefined;
    return v === null ? { timedOut: true } : { timedOut: false, value: field(v, wait.field) ?? null };
  }

  /** A sent message's id (`{"message_id": "…"}`). */
  messageId(stepId: number): string | undefined {
    return stringAt(this.json(stepId, BUILTIN.send), "message_id");
  }

  /** Whether the event set at `stepId` is recorded (`{"key": "…"}`; the key is not read back). */
  eventSet(stepId: number): boolean {
    return this.json(stepId, BUILTIN.setEvent) !== undefined;
  }

  /** A stream write's (or, with `close`, a close's) recorded offset (`{"offset": N}`). */
  offset(stepId: number, close: boolean): number | undefined {
    return numberAt(this.json(stepId, close ? BUILTIN.closeStream : BUILTIN.writeStream), "offset");
  }

  /** A started child's id (`{"workflow_id": "…"}`). */
  childId(stepId: number): string | undefined {
    return stringAt(this.json(stepId, BUILTIN.startChild), "workflow_id");
  }

  /** An awaited child's recorded end. */
  childOutcome(stepId: number): ChildOutcome | undefined {
    const v = this.json(stepId, BUILTIN.awaitChild);
    return v === undefined ? undefined : decodeChildOutcome(v);
  }

  /** The index a wait for the first (or, with `all`, every one) of several recorded (`{"index": N}`). */
  index(stepId: number, all: boolean): number | undefined {
    return numberAt(this.json(stepId, all ? BUILTIN.waitAll : BUILTIN.select), "index");
  }

  /** The clock as a `now()` read it (`{"now_ms": N}`, Unix ms). */
  nowMs(stepId: number): number | undefined {
    return numberAt(this.json(stepId, BUILTIN.now), "now_ms");
  }

  /** The UUID a `uuid()` drew (`{"uuid": "…"}`). */
  uuid(stepId: number): string | undefined {
    return stringAt(this.json(stepId, BUILTIN.uuid), "uuid");
  }

  /**
   * Whether the run takes the branch of the code change `patchId` (worker.proto's `patched`).
   * Looks at the next position without taking it: nothing recorded there — the run is live,
   * the position is taken for the marker (`record`); this patch's marker — taken (`replayed`);
   * anything else, another step or another patch's marker — a run begun before the change
   * (`old`), the position left to the next call. The look and the take are one synchronous
   * step, so no other call can take the position in between.
   *
   * Unlike the other built-in shapes, a marker without its `patch_id` string does not read as
   * empty (which would quietly pick the old branch): it is a malformed history, SerializationError.
   */
  patched(patchId: string): Patched {
    const at = this.next;
    const rec = this.steps.get(at);
    if (rec === undefined) {
      this.next += 1;
      return { kind: "record", stepId: at };
    }
    if (rec.name !== BUILTIN.patch) return { kind: "old" };
    const recorded = rec.failure ? undefined : field(fromPayload(rec.output), "patch_id");
    if (typeof recorded !== "string") {
      throw new SerializationError(
        `workflow ${JSON.stringify(this.workflowId)} has a malformed ${BUILTIN.patch} record at position ${at}: ` +
          `its output is not {"patch_id": "…"}`,
      );
    }
    if (recorded !== patchId) return { kind: "old" };
    this.next += 1;
    return { kind: "replayed", stepId: at };
  }

  /** The step recorded at `stepId`, after checking it is `name`; undefined when none is. */
  private checked(stepId: number, name: string): Step | undefined {
    const rec = this.steps.get(stepId);
    if (rec && rec.name !== name) {
      throw new NonDeterminismError(
        `workflow ${JSON.stringify(this.workflowId)} called step ${JSON.stringify(name)} at position ${stepId}, ` +
          `where its history records ${JSON.stringify(rec.name)}`,
      );
    }
    return rec;
  }
}

/**
 * A step's outcome as the workflow sees it: its JSON output, or the StepFailedError its failure
 * raises. For an outcome that arrives live in the recorded form (a remote step's result), so
 * this run sees exactly what a replay will.
 */
export function stepOutcome(name: string, outcome: { output?: Payload; failure?: Failure }): JsonValue {
  if (outcome.failure) throw failedStep(name, outcome.failure);
  return fromPayload(outcome.output);
}

/** The JSON a sleep records: the wake time, recorded before the sleep begins. */
export function sleepRecord(wakeAtMs: number): JsonValue {
  return { wake_at_ms: wakeAtMs };
}

/** The JSON a wait's deadline step records. */
export function deadlineRecord(deadlineMs: number): JsonValue {
  return { deadline_ms: deadlineMs };
}

/** The JSON a `now()` records: the clock it read, so every replay reads the same time. */
export function nowRecord(nowMs: number): JsonValue {
  return { now_ms: nowMs };
}

/** The JSON a `uuid()` records: the UUID it drew, so every replay gets the same one. */
export function uuidRecord(uuid: string): JsonValue {
  return { uuid };
}

/** The JSON a `patched(patchId)` records where the run takes the new branch live. */
export function patchRecord(patchId: string): JsonValue {
  return { patch_id: patchId };
}

/**
 * A child's result as received live, in the form await_child records it, then decoded as a
 * replay decodes the record: this run and every replay read the same outcome.
 */
export function liveChildOutcome(r: ChildResult): ChildOutcome {
  const m: Record<string, JsonValue> = { status: statusFromWire(r.status) };
  if (r.output) m.output = fromPayload(r.output);
  if (r.failure) m.failure = { kind: r.failure.kind, message: r.failure.message };
  return decodeChildOutcome(m);
}

/**
 * An await_child record: `{"status": "SUCCESS", "output": V}` or
 * `{"status": S, "failure": {"kind": "…", "message": "…"}}`. Missing fields read as empty, so a
 * record written by another SDK that leaves one out still decodes.
 */
function decodeChildOutcome(v: JsonValue): ChildOutcome {
  const status = field(v, "status");
  const f = field(v, "failure");
  return {
    status: typeof status === "string" ? status : "",
    output: field(v, "output") ?? null,
    failure: { kind: String(field(f, "kind") ?? ""), message: String(field(f, "message") ?? "") },
  };
}

function failedStep(name: string, f: Failure): StepFailedError {
  // A failure recorded without a kind is a thrown function's: StepFailed, as every SDK records it.
  return new StepFailedError(name, f.message, f.kind || "StepFailed");
}

function field(v: JsonValue | undefined, key: string): JsonValue | undefined {
  return v !== null && typeof v === "object" && !Array.isArray(v) ? v[key] : undefined;
}

// A recorded shape missing its field reads as 0 / "" instead of failing the replay: the server
// always writes the field, and every SDK reads a missing one the same lenient way.
function numberAt(v: JsonValue | undefined, key: string): number | undefined {
  if (v === undefined) return undefined;
  const n = field(v, key);
  return typeof n === "number" ? n : 0;
}

function stringAt(v: JsonValue | undefined, key: string): string | undefined {
  if (v === undefined) return undefined;
  const s = field(v, key);
  return typeof s === "string" ? s : "";
}
