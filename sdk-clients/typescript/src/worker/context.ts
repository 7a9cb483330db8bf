// What a workflow function gets: its identity, a cancellation signal, and the durable operations.
// Every method takes its step position from the run's history cursor when it is called (not when
// awaited), so steps started together still number in call order and a replay finds them where
// they were.

import type { JsonValue } from "@bufbuild/protobuf";
import type { Run } from "./run.js";
import { drawUuid, readClock, runStep, type StepAttempt, type StepOptions } from "./steps.js";
import * as waits from "./waits.js";
import * as messaging from "./messaging.js";
import * as children from "./children.js";
import * as remote from "./remote.js";
import { patched } from "./patch.js";
import { ContinueAsNew } from "../errors.js";
import { toJsonValue } from "../payload.js";

/** What every update's topic and answer's event key begin with (the server's updates.rs says the same). */
const UPDATE_PREFIX = "waymark.update/";

/** An update a client sent (`client.updateWorkflow`): its id, which the answer is for, and its arguments. */
export interface Update<A = JsonValue> {
  id: string;
  args: A;
}

export class WorkflowContext {
  /** @internal */
  constructor(private readonly run: Run) {}

  get workflowId(): string {
    return this.run.workflowId;
  }
  get workflowName(): string {
    return this.run.workflowName;
  }
  /** The fencing epoch of this run: it rises each time the workflow is dispatched. */
  get epoch(): number {
    return Number(this.run.epoch);
  }
  /** How many times this workflow was recovered from a worker that died. */
  get recoveryAttempts(): number {
    return this.run.recoveryAttempts;
  }
  /**
   * Aborted when the workflow is cancelled (or this run is abandoned); its reason is the
   * `Interruption` that every later ctx call throws. Pass it to fetch() and friends.
   */
  get signal(): AbortSignal {
    return this.run.signal;
  }
  /** Whether this call is replaying history (the next step is already recorded). */
  get isReplaying(): boolean {
    return this.run.history.isReplaying;
  }

  private position(n = 1): number {
    return this.run.history.take(n);
  }

  /**
   * Runs `fn` once as step `name` and checkpoints its JSON result; on replay returns the recorded
   * result without calling `fn`. A throw fails the step (after `options.retry` attempts) with a
   * `StepFailedError`, which a replay raises again. The result comes back as JSON would read it.
   */
  step<T>(name: string, fn: (attempt: StepAttempt) => Promise<T> | T, options: StepOptions = {}): Promise<T> {
    return runStep(this.run, this.position(), name, fn, options);
  }

  /**
   * The time, read from this worker's clock once and recorded (`waymark.now`); every replay
   * reads the recorded time. Workflow code takes the time from here, never from `Date.now()` or
   * `new Date()`: code outside steps runs again on each replay, later, and would see another
   * time (and may take another branch than the one recorded). A new `Date` each call.
   */
  now(): Promise<Date> {
    return readClock(this.run, this.position());
  }

  /**
   * A random UUID (v4, lowercase, hyphenated), drawn once and recorded (`waymark.uuid`); every
   * replay gets the recorded one. Workflow code draws randomness here, never with
   * `crypto.randomUUID()` or `Math.random()`, which draw another value on each replay.
   */
  uuid(): Promise<string> {
    return drawUuid(this.run, this.position());
  }

  /**
   * Whether this run takes the branch of the code change `patchId`, so that changed workflow
   * code can still replay the runs begun before the change:
   *
   * ```ts
   * if (ctx.patched("charge-in-cents")) await chargeCents(ctx); else await chargeDollars(ctx);
   * ```
   *
   * True for a run that gets here under this code (a marker, `waymark.patch`, is recorded at
   * the next position, held back like a step's result: no round trip of its own) and for every
   * replay of such a run; false for a run whose history was made here by code without the
   * change: it replays the old branch, and the position stays for the old branch's next call.
   * Synchronous: it never waits. Once no run begun before the change is left, the old branch
   * can go; the call stays as long as histories with the marker may still be replayed.
   */
  patched(patchId: string): boolean {
    return patched(this.run, patchId);
  }

  /**
   * Ends this run and starts the workflow again under its id with `input` and an empty history
   * — for a workflow that loops for ever (polling, its own schedule), so its history stays
   * short. Return it from the workflow function:
   *
   * ```ts
   * if (n < until) return ctx.continueAsNew({ n: n + 1, until });
   * ```
   *
   * It throws `ContinueAsNew` (an `Interruption`: code that catches errors lets it propagate),
   * which the worker turns into the run's completion; typed `never`, so it fits any return
   * type. Not a failure. The steps this run recorded are kept with the ended run
   * (`<id>/run-<n>`, status CONTINUED_AS_NEW); awaiters, parents and senders keep using the
   * workflow's id. Nothing is recorded at a position, so a replay of this run reaches the same
   * call and ends the same way. An input the server would not take fails the workflow
   * (PAYLOAD_TOO_LARGE), as an oversized output does.
   */
  continueAsNew(input: unknown): never {
    this.run.checkCancelled();
    throw new ContinueAsNew(toJsonValue(input));
  }

  /** Sleeps durably: a workflow recovered mid-sleep sleeps only what is left. */
  sleep(ms: number): Promise<void> {
    return waits.sleep(this.run, this.position(), ms);
  }

  /** Sends `message` to workflow `destination` on `topic` ("" by default). Returns the message id. */
  send(destination: string, message: unknown, options: { topic?: string } = {}): Promise<string> {
    return messaging.send(this.run, this.position(), destination, options.topic ?? "", message);
  }

  /**
   * Takes the oldest message sent to this workflow on `topic` ("" by default), waiting up to
   * `timeoutMs` (nine years, the longest the server allows, when not given). Undefined when none came in time. Exactly once: the
   * message is consumed and recorded in one transaction.
   */
  async recv<T = JsonValue>(topic = "", options: { timeoutMs?: number } = {}): Promise<T | undefined> {
    return (await waits.recv(this.run, this.position(2), topic, options.timeoutMs)) as T | undefined;
  }

  /** Sets this workflow's event `key`; readers waiting on it are woken. */
  setEvent(key: string, value: unknown): Promise<void> {
    return messaging.setEvent(this.run, this.position(), key, value);
  }

  /**
   * Takes the next update named `name` a client sent (`client.updateWorkflow`), waiting up to
   * `timeoutMs` as `recv` does; undefined when none came in time. It is a `recv` on topic
   * `waymark.update/<name>` and is recorded as one, so a replay takes the same update. Answer it
   * with `answerUpdate` or `rejectUpdate`: the client's call waits for that. What runs between
   * is ordinary workflow code (steps, waits, sends), recorded as always. `A` is what you take the
   * arguments to be: they are the JSON the client sent, unchecked (so check them before you rely
   * on them, and reject an update whose arguments do not fit).
   */
  async recvUpdate<A = JsonValue>(name: string, options: { timeoutMs?: number } = {}): Promise<Update<A> | undefined> {
    const topic = `${UPDATE_PREFIX}${name}`;
    // Called before any await, so the receive takes its place in the history in call order.
    let receive = this.recv(topic, options);
    for (;;) {
      const m = await receive;
      if (m === undefined) return undefined;
      const delivered = m !== null && typeof m === "object" && !Array.isArray(m) ? m : {};
      if (typeof delivered.update_id === "string") return { id: delivered.update_id, args: (delivered.args ?? null) as A };
      // The server sends nothing else on an update topic; from an older one, a message that is
      // no update has no id to answer, and is passed over (as the Rust SDK does).
      receive = this.recv(topic, options);
    }
  }

  /**
   * Answers update `updateId`: the client's call returns `result` (taken as JSON). It sets the
   * event `waymark.update/<updateId>`, recorded like any `setEvent`, so a replay does not answer
   * again. Answer (or reject) each update once: a call made again with its id reads the event's
   * latest value.
   */
  answerUpdate(updateId: string, result: unknown): Promise<void> {
    // An undefined result would vanish from the object, leaving no answer the server knows.
    return this.setEvent(`${UPDATE_PREFIX}${updateId}`, { result: result ?? null });
  }

  /** Refuses update `updateId`: the client's call fails with reason UPDATE_REJECTED and `why`. */
  rejectUpdate(updateId: string, why: string): Promise<void> {
    return this.setEvent(`${UPDATE_PREFIX}${updateId}`, { rejected: why });
  }

  /** Reads workflow `workflowId`'s event `key`, waiting up to `timeoutMs` for it to be set. */
  async getEvent<T = JsonValue>(workflowId: string, key: string, options: { timeoutMs?: number } = {}): Promise<T | undefined> {
    return (await waits.getEvent(this.run, this.position(2), workflowId, key, options.timeoutMs)) as T | undefined;
  }

  /** Appends `value` to this workflow's stream `key`; returns its offset. */
  writeStream(key: string, value: unknown): Promise<number> {
    return messaging.streamStep(this.run, this.position(), key, value, false);
  }

  /** Closes this workflow's stream `key`: readers end after the values written before. */
  async closeStream(key: string): Promise<void> {
    await messaging.streamStep(this.run, this.position(), key, undefined, true);
  }

  /**
   * Starts a child workflow and returns its id (re-joined, not restarted, on replay). It
   * inherits this workflow's tags; `options.tags` replace or add keys.
   */
  startChild(workflowName: string, input?: unknown, options: children.ChildOptions = {}): Promise<string> {
    return children.startChild(this.run, this.position(), workflowName, input, options);
  }

  /**
   * Waits for workflow `workflowId` (a child, or any) to finish and returns its output; a child
   * that did not succeed throws `ChildWorkflowError`.
   */
  async awaitChild<T = JsonValue>(workflowId: string): Promise<T> {
    return (await children.awaitChild(this.run, this.position(), workflowId)) as T;
  }

  /** Starts a child workflow and waits for its output. */
  async runChild<T = JsonValue>(workflowName: string, input?: unknown, options: children.ChildOptions = {}): Promise<T> {
    const id = await this.startChild(workflowName, input, options);
    return this.awaitChild<T>(id);
  }

  /** Calls remote step `name` (run by any worker that registered it) and waits for its result. */
  async callStep<T = JsonValue>(name: string, input?: unknown, options: remote.RemoteStepOptions = {}): Promise<T> {
    const handle = await this.startStep(name, input, options);
    return this.stepResult<T>(handle);
  }

  /** Calls remote step `name` without waiting; the call is durable when this resolves. */
  startStep(name: string, input?: unknown, options: remote.RemoteStepOptions = {}): Promise<remote.StepHandle> {
    return remote.startStep(this.run, this.position(), name, input, options);
  }

  /** The result of a remote step started with `startStep`, waiting for it. */
  async stepResult<T = JsonValue>(handle: remote.StepHandle): Promise<T> {
    return (await remote.stepResult(this.run, handle)) as T;
  }

  /**
   * Waits until the first of `targets` (workflow ids, step handles) finishes; returns its index.
   * The winner is recorded, so a replay takes the same branch.
   */
  waitFirst(targets: remote.Awaitable[]): Promise<number> {
    return remote.waitSeveral(this.run, this.position(), targets, false);
  }

  /** Waits until every one of `targets` has finished. */
  async waitAll(targets: remote.Awaitable[]): Promise<void> {
    await remote.waitSeveral(this.run, this.position(), targets, true);
  }
}
