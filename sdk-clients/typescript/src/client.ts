// The client: start workflows, watch them, talk to them (waymark.v1.WorkflowService), and manage
// queues and schedules through `client.queues` / `client.schedules`. Every method is declared and
// documented here; the starts and reads are made here too, the messaging calls in messaging.ts,
// and cancel, resume, fork, delete, re-pinning and bulk operations in lifecycle.ts.

import { createClient, type Transport } from "@connectrpc/connect";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import type { JsonValue, MessageInitShape } from "@bufbuild/protobuf";
import { DuplicatePolicy, WorkflowService, type StartWorkflowRequestSchema } from "./gen/waymark/v1/workflow_pb.js";
import type { Workflow } from "./gen/waymark/v1/types_pb.js";
import { toPayload } from "./payload.js";
import { WorkflowFailedError } from "./errors.js";
import { ownTransport, type ConnectionOptions } from "./transport.js";
import { tracedTransport } from "./tracing.js";
import { newWorkflowId, repeatable } from "./repeat.js";
import { readAll } from "./pages.js";
import { DEFAULT_RESEND_FOR_MS } from "./internal/resend.js";
import { stepInfo, workflowInfo, type EventInfo, type MessageInfo, type StepInfo, type WorkflowInfo } from "./types.js";
import { Queues } from "./queues.js";
import { Schedules } from "./schedules.js";
import { recordedStep, type RecordedHistory } from "./recorded.js";
import { call, rpc, workflowOf, type CallOptions, type WorkflowCalls } from "./calls.js";
import * as lifecycle from "./lifecycle.js";
import { filterToWire, type BulkAction, type BulkOutcome, type ForkOptions, type WorkflowFilter } from "./lifecycle.js";
import * as messaging from "./messaging.js";
import type { StreamItem, UpdateOptions } from "./messaging.js";

/**
 * Where the server is and how to reach it (`ConnectionOptions`: `server`, `tlsCa`, `tlsCert`,
 * `tlsKey`, `apiKey`, `namespace`, `insecure`, each falling back to its `WAYMARK_*` environment
 * variable; an API key over plaintext to a host that is not loopback needs `insecure`).
 */
export interface ClientOptions extends ConnectionOptions {
  /**
   * A Connect transport of your own (e.g. `createTransport({ ..., interceptors })`); `server`
   * is then ignored, and the other connection options may not be given.
   */
  transport?: Transport;
  /**
   * Calls that are safe to repeat (reads, waits, starts, cancel, resume, sends with an
   * idempotency key) are made again with backoff (50 ms doubling to 2 s) while the server
   * answers UNAVAILABLE, for up to this long. Default 60 000 ms; 0 never repeats.
   */
  resendForMs?: number;
}

export interface StartOptions extends CallOptions {
  /** Makes the start idempotent: starting the same id again returns the existing workflow. */
  workflowId?: string;
  /** Queue name; "default" when not given. */
  queue?: string;
  /** Pin the workflow to workers of this application version. */
  appVersion?: string;
  /** Cancel the workflow (and its children) if it has not finished this long after the start. */
  workflowTimeoutMs?: number;
  /** Lower is dispatched first within the queue; FIFO within a priority. Default 0. */
  priority?: number;
  /** The partition of the queue (a queue with a partition concurrency limits each key). */
  partitionKey?: string;
  /** Unique among the queue's unfinished workflows; a second start is DEDUP_ID_TAKEN. */
  dedupId?: string;
  /** On a taken dedup id, return the workflow holding it (`created` false) instead of failing. */
  returnExisting?: boolean;
  /** Do not dispatch before this long from now. */
  delayMs?: number;
  /** Collapse repeated starts with this key onto one delayed workflow (needs `delayMs`). */
  debounceKey?: string;
  /** With `debounceKey`: the longest it may be put off in all (default ten times `delayMs`). */
  debounceMaxDelayMs?: number;
  /**
   * Enqueue it even if no worker has registered `workflowName` yet (a rolling deploy, another
   * team's workers): it waits ENQUEUED until one does, and `nameRegistered` comes back false.
   * Without it such a start fails with reason WORKFLOW_NAME_UNKNOWN.
   */
  allowUnregistered?: boolean;
  /**
   * Labels to find it by (`list({ tags })`, `bulk({ tags }, …)`): at most 16, keys 1-64
   * characters of letters, digits and `_ - . /`, values at most 256 characters. Its children
   * inherit them (a child's own tags override per key); they come back in `WorkflowInfo.tags`.
   */
  tags?: Record<string, string>;
}

export interface Started {
  workflow: WorkflowInfo;
  /** False when the id (or dedup id) was already taken and the existing workflow came back. */
  created: boolean;
  /**
   * False when no worker has registered the workflow's name yet (a start with
   * `allowUnregistered`): it waits until one does — or for ever, if the name is misspelt.
   */
  nameRegistered: boolean;
}

export interface StartAndSendOptions extends StartOptions {
  /** The message; the workflow takes it with `recv(topic)`. */
  message: unknown;
  /** Topic the receiver selects on; "" (the default topic) when not given. */
  topic?: string;
  /** Makes the send idempotent: a call again with the same `workflowId` and key delivers nothing new. */
  idempotencyKey?: string;
}

export interface StartedAndSent {
  /** The workflow that got the message, and whether this call started it. */
  started: Started;
  messageId: string;
  /** True when the idempotency key had delivered a message to it before: nothing new was sent. */
  duplicate: boolean;
}

export interface ListOptions extends CallOptions, WorkflowFilter {
  /** 1-1000; 100 when not given. */
  pageSize?: number;
  pageToken?: string;
}

export interface WorkflowPage {
  workflows: WorkflowInfo[];
  /**
   * Pass as `pageToken` for the next page; undefined on the last page. A page may hold fewer
   * than `pageSize` workflows (their payloads filled the response) and still not be the last.
   */
  nextPageToken?: string;
}

/** The wire's start of `workflowName` as `workflowId` (the caller's, or one made here). */
function startRequest(
  workflowName: string,
  workflowId: string,
  input: unknown,
  o: StartOptions,
): MessageInitShape<typeof StartWorkflowRequestSchema> {
  return {
    workflowName,
    workflowId,
    input: toPayload(input),
    queueName: o.queue ?? "",
    appVersion: o.appVersion ?? "",
    timeout: o.workflowTimeoutMs !== undefined ? durationFromMs(o.workflowTimeoutMs) : undefined,
    priority: o.priority ?? 0,
    partitionKey: o.partitionKey ?? "",
    dedupId: o.dedupId ?? "",
    onDuplicate: o.returnExisting ? DuplicatePolicy.RETURN_EXISTING : DuplicatePolicy.UNSPECIFIED,
    delay: o.delayMs !== undefined ? durationFromMs(o.delayMs) : undefined,
    debounce:
      o.debounceKey !== undefined
        ? {
            key: o.debounceKey,
            maxDelay: o.debounceMaxDelayMs !== undefined ? durationFromMs(o.debounceMaxDelayMs) : undefined,
          }
        : undefined,
    allowUnregistered: o.allowUnregistered ?? false,
    tags: { ...o.tags },
  };
}

/** A start's answer as `Started`, for a start made as `workflowId`. */
function started(
  r: { workflow?: Workflow; created: boolean; nameRegistered: boolean },
  workflowId: string,
  o: StartOptions,
): Started {
  const workflow = workflowOf(r.workflow);
  // A start sent again after the first one went through finds the workflow that one created:
  // with an id made here, nobody else could have started it, so this call did.
  const ours = !o.workflowId && workflow.workflowId === workflowId;
  return { workflow, created: r.created || ours, nameRegistered: r.nameRegistered };
}

export class Client {
  readonly queues: Queues;
  readonly schedules: Schedules;
  // The workflow service and the resend bound, which the calls in lifecycle.ts and messaging.ts
  // are made with too.
  private readonly calls: WorkflowCalls;

  constructor(options: ClientOptions = {}) {
    // Every unary call (also of `queues` and `schedules`) carries the caller's active trace
    // context, when OpenTelemetry is installed and a span is active.
    const t = tracedTransport(ownTransport(options));
    const resendForMs = Math.max(options.resendForMs ?? DEFAULT_RESEND_FOR_MS, 0);
    this.calls = { rpc: createClient(WorkflowService, t), resendForMs };
    this.queues = new Queues(t, resendForMs);
    this.schedules = new Schedules(t, resendForMs);
  }

  /**
   * Starts a workflow (or returns the one already started with `workflowId`). Without a
   * `workflowId` one is made here, so that the start can be sent again safely.
   */
  async start(workflowName: string, input?: unknown, options: StartOptions = {}): Promise<Started> {
    const workflowId = options.workflowId || newWorkflowId();
    const r = await repeatable(this.calls.resendForMs, options, (a) =>
      this.calls.rpc.startWorkflow(startRequest(workflowName, workflowId, input, options), a),
    );
    return started(r, workflowId, options);
  }

  /**
   * Starts a workflow unless one was already started under `workflowId`, and sends it
   * `message` on `topic`, in one transaction: the message is there before the workflow first
   * runs, and no workflow is started without it. The way to feed a workflow that may not have
   * begun yet (one per customer, fed by events): give it a `workflowId` to reach the same one
   * each time, and an `idempotencyKey` so that a call made again neither starts nor delivers
   * twice (`started.created` false, `duplicate` true, the first call's `messageId`). Only with a
   * key is the call made again while the server answers UNAVAILABLE (so `duplicate` can be true
   * when this call's own first attempt got through): without one, a repeat that finds the
   * workflow would deliver a second message. A debounced start is refused (INVALID_ARGUMENT); a
   * workflow under the id that ended with an outcome (SUCCESS, ERROR) takes no more messages
   * (reason WORKFLOW_NOT_RUNNING), and one of another name under the id is WORKFLOW_ID_CONFLICT.
   */
  async startAndSend(workflowName: string, input: unknown, options: StartAndSendOptions): Promise<StartedAndSent> {
    const workflowId = options.workflowId || newWorkflowId();
    const req = {
      start: startRequest(workflowName, workflowId, input, options),
      topic: options.topic ?? "",
      message: toPayload(options.message),
      idempotencyKey: options.idempotencyKey ?? "",
    };
    const r = options.idempotencyKey
      ? await repeatable(this.calls.resendForMs, options, (a) => this.calls.rpc.startAndSend(req, a))
      : await rpc(() => this.calls.rpc.startAndSend(req, call(options)));
    return { started: started(r, workflowId, options), messageId: r.messageId, duplicate: r.duplicate };
  }

  async get(workflowId: string, options?: CallOptions): Promise<WorkflowInfo> {
    const r = await repeatable(this.calls.resendForMs, options, (a) => this.calls.rpc.getWorkflow({ workflowId }, a));
    return workflowOf(r.workflow);
  }

  /** One page of workflows, newest first; only an undefined `nextPageToken` ends the list. */
  async list(options: ListOptions = {}): Promise<WorkflowPage> {
    const r = await repeatable(this.calls.resendForMs, options, (a) =>
      this.calls.rpc.listWorkflows(
        {
          ...filterToWire(options),
          pageSize: options.pageSize ?? 0,
          pageToken: options.pageToken ?? "",
        },
        a,
      ),
    );
    return { workflows: r.workflows.map(workflowInfo), nextPageToken: r.nextPageToken || undefined };
  }

  /**
   * Every workflow matching `options`, reading page after page as the iteration goes until a
   * page has no `nextPageToken`: `for await (const w of client.listAll())`.
   */
  async *listAll(options: Omit<ListOptions, "pageToken"> = {}): AsyncGenerator<WorkflowInfo> {
    let pageToken: string | undefined;
    do {
      const page = await this.list({ ...options, pageToken });
      yield* page.workflows;
      pageToken = page.nextPageToken;
    } while (pageToken);
  }

  /**
   * Waits until the workflow is terminal and returns it. With `timeoutMs` it gives up with an
   * `RpcError` of code DeadlineExceeded.
   */
  async await(workflowId: string, options?: CallOptions): Promise<WorkflowInfo> {
    const r = await repeatable(this.calls.resendForMs, options, (a) => this.calls.rpc.awaitWorkflow({ workflowId }, a));
    return workflowOf(r.workflow);
  }

  /**
   * Waits for the workflow and returns its output; throws `WorkflowFailedError` when it failed,
   * was cancelled or dead-lettered.
   */
  async result<T = JsonValue>(workflowId: string, options?: CallOptions): Promise<T> {
    const w = await this.await(workflowId, options);
    if (w.status === "SUCCESS") return w.output as T;
    throw new WorkflowFailedError(
      workflowId,
      w.status,
      w.failure?.kind ?? w.status,
      w.failure ? `${w.failure.kind}: ${w.failure.message}` : `workflow ${workflowId} ended ${w.status}`,
    );
  }

  /** The workflow's recorded steps, in order (every page). */
  async steps(workflowId: string, options?: CallOptions): Promise<StepInfo[]> {
    return readAll(
      this.calls.resendForMs,
      options,
      (pageToken, a) => this.calls.rpc.listSteps({ workflowId, pageToken }, a),
      (r) => r.steps.map(stepInfo),
    );
  }

  /**
   * The workflow's history as a `Replayer` replays it (the JSON `waymark workflow export ID`
   * prints, the format of the project's golden histories): its id, name and input, and every
   * recorded step with its output or failure. Saved with JSON.stringify next to a test suite,
   * it lets CI replay changed workflow code against workflows already running before deploying.
   */
  async history(workflowId: string, options?: CallOptions): Promise<Required<RecordedHistory>> {
    const w = await this.get(workflowId, options);
    const steps = await this.steps(workflowId, options);
    return { workflow_id: w.workflowId, workflow_name: w.workflowName, input: w.input, steps: steps.map(recordedStep) };
  }

  /** Cancels a workflow (with `cascade`, its children too); it stops at its next step. */
  async cancel(workflowId: string, options: CallOptions & { cascade?: boolean } = {}): Promise<WorkflowInfo> {
    return lifecycle.cancel(this.calls, workflowId, options);
  }

  /**
   * Puts a cancelled, dead-lettered or failed (ERROR) workflow back in its queue; it replays
   * from its checkpoints. An ERROR workflow loses its failure and, when its last recorded step
   * failed, that step's record, so the step runs again on the code its workers run now.
   */
  async resume(workflowId: string, options?: CallOptions): Promise<WorkflowInfo> {
    return lifecycle.resume(this.calls, workflowId, options);
  }

  /**
   * Starts a new workflow from `workflowId`'s history: the same name and input, its recorded
   * steps before `fromStep` copied (with the events and stream values it had by then), so the
   * fork replays up to there and runs on from `fromStep` — on `appVersion`'s workers if given
   * (the way to rerun a failed workflow on fixed code). Returns the fork (ENQUEUED, its lineage
   * in `forkedFromWorkflowId` / `forkedFromStep`). Without a `workflowId` one is made here, so
   * the fork is sent again with the same id while the server answers UNAVAILABLE. An id already
   * used is refused (WORKFLOW_ID_CONFLICT); a source that does not exist is WORKFLOW_NOT_FOUND.
   */
  async fork(workflowId: string, options: ForkOptions = {}): Promise<WorkflowInfo> {
    return lifecycle.fork(this.calls, workflowId, options);
  }

  /**
   * Deletes a finished workflow and everything recorded for it (steps, messages to it, events,
   * stream values); with `cascade`, its child workflows and theirs too. Returns the ids deleted,
   * `workflowId` first. A workflow that has not finished is refused (an `RpcError` with reason
   * WORKFLOW_NOT_FINISHED: cancel it first), so is a child whose parent has not
   * (PARENT_NOT_FINISHED), and a cascade over more than 10,000 (TOO_MANY_TO_DELETE); one that
   * does not exist is WORKFLOW_NOT_FOUND. Sent once, not again on UNAVAILABLE: repeated after a
   * lost reply it would find the workflow gone.
   */
  async delete(workflowId: string, options: CallOptions & { cascade?: boolean } = {}): Promise<string[]> {
    return lifecycle.deleteWorkflow(this.calls, workflowId, options);
  }

  /**
   * Re-pins the unfinished `workflowId` to `appVersion` — the way to move work off a retired
   * version whose workers are gone: its next dispatch goes to that version's workers, which
   * replay its history (check with a `Replayer` first). One running now stays on its worker
   * until it finishes, parks or is recovered. Refused (`RpcError`, reason VERSION_NOT_SERVED)
   * when no connected worker of `appVersion` registers its name, unless `allowUnserved` (it
   * then waits for one); a finished workflow is WORKFLOW_FINISHED. Made again while the server
   * answers UNAVAILABLE: re-pinning twice is re-pinning once.
   */
  async setVersion(
    workflowId: string,
    appVersion: string,
    options: CallOptions & { allowUnserved?: boolean } = {},
  ): Promise<WorkflowInfo> {
    return lifecycle.setVersion(this.calls, workflowId, appVersion, options);
  }

  /** How many workflows `filter` matches: a bulk operation's dry run, which changes nothing. */
  async countMatching(filter: WorkflowFilter = {}, options?: CallOptions): Promise<number> {
    return lifecycle.countMatching(this.calls, filter, options);
  }

  /**
   * Applies `action` to one batch of the workflows `filter` matches (at most `batchSize`, 1-1000,
   * 100 when not given), in the order `list` returns them, from `pageToken` (the first batch
   * when not given). A workflow the action does not apply to (a delete of one still running, a
   * cancel of one finished) is skipped and counted by reason. Made again with the same token
   * while the server answers UNAVAILABLE: a repeated batch changes nothing twice.
   */
  async bulkBatch(
    filter: WorkflowFilter,
    action: BulkAction,
    options: CallOptions & { batchSize?: number; pageToken?: string } = {},
  ): Promise<BulkOutcome> {
    return lifecycle.bulkBatch(this.calls, filter, action, options);
  }

  /**
   * Applies `action` to every workflow `filter` matches, batch after batch (`batchSize` each,
   * 100 when not given), and returns the sums. Count first with `countMatching`. Safe to run
   * again: what was done is skipped the second time (e.g. WORKFLOW_FINISHED for a cancel). The
   * call's `timeoutMs` covers every batch together.
   */
  async bulk(filter: WorkflowFilter, action: BulkAction, options: CallOptions & { batchSize?: number } = {}): Promise<BulkOutcome> {
    return lifecycle.bulk((o) => this.bulkBatch(filter, action, o), options);
  }

  /** Moves the start of a workflow still waiting for its delayed start to `delayMs` from now. */
  async delay(workflowId: string, delayMs: number, options?: CallOptions): Promise<WorkflowInfo> {
    const r = await rpc(() => this.calls.rpc.delayWorkflow({ workflowId, delay: durationFromMs(delayMs) }, call(options)));
    return workflowOf(r.workflow);
  }

  /**
   * Sends a message to a workflow on `topic` ("" is the default topic). With an idempotency
   * key a retried send is delivered once (`duplicate` true the second time), and only then is
   * the send made again while the server answers UNAVAILABLE (so `duplicate` can be true when
   * this call's own first attempt got through).
   */
  async send(
    workflowId: string,
    message: unknown,
    options: CallOptions & { topic?: string; idempotencyKey?: string } = {},
  ): Promise<{ messageId: string; duplicate: boolean }> {
    return messaging.send(this.calls, workflowId, message, options);
  }

  /** Every message sent to a workflow, consumed or not, oldest first (every page). */
  async messages(workflowId: string, options?: CallOptions): Promise<MessageInfo[]> {
    return messaging.messages(this.calls, workflowId, options);
  }

  /**
   * The current value of a workflow's event; with `waitMs`, waits up to that long for it to be
   * set. `undefined` when it is not set (in time).
   */
  async getEvent<T = JsonValue>(
    workflowId: string,
    key: string,
    options: { waitMs?: number; signal?: AbortSignal } = {},
  ): Promise<T | undefined> {
    return messaging.getEvent<T>(this.calls, workflowId, key, options);
  }

  /**
   * Sends update `name` with `args` to the running workflow `workflowId` and waits for its
   * answer, which it returns: the workflow takes it with `ctx.recvUpdate(name)` and answers with
   * `ctx.answerUpdate`. The same `updateId` is the same update (delivered once, answered once;
   * made here when not given), so the call is made again while the server answers UNAVAILABLE,
   * and a call again with the id returns the answer. Refused (`RpcError`) with reason
   * UPDATE_REJECTED when the workflow rejects it (the message says why), UPDATE_PENDING
   * (DeadlineExceeded) when it has not answered within `waitMs` (call again with the same
   * `updateId` to keep waiting; it is in `metadata.update_id`), UPDATE_NOT_ANSWERED when it ended
   * without answering, WORKFLOW_NOT_RUNNING when it had already ended, WORKFLOW_NOT_FOUND.
   */
  async updateWorkflow<T = JsonValue>(workflowId: string, name: string, args: unknown, options: UpdateOptions = {}): Promise<T> {
    return messaging.updateWorkflow<T>(this.calls, workflowId, name, args, options);
  }

  /** Every event of a workflow, with the history of its values (every page). */
  async events(workflowId: string, options?: CallOptions): Promise<EventInfo[]> {
    return messaging.events(this.calls, workflowId, options);
  }

  /**
   * Follows a workflow's stream `key` from `fromOffset`: yields values as they are written and
   * ends when the stream is closed or the workflow has finished. Cut off by UNAVAILABLE, it
   * opens the stream again after the last value it yielded.
   * `for await (const { offset, value } of client.readStream(id, "progress")) …`
   */
  readStream<T = JsonValue>(
    workflowId: string,
    key: string,
    options: { fromOffset?: number; signal?: AbortSignal } = {},
  ): AsyncGenerator<StreamItem<T>> {
    return messaging.readStream<T>(this.calls, workflowId, key, options);
  }
}