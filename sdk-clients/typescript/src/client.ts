// The client: start workflows, watch them, talk to them (waymark.v1.WorkflowService), and manage
// queues and schedules through `client.queues` / `client.schedules`.

import { createClient, type Client as RpcClient, type Transport } from "@connectrpc/connect";
import { durationFromMs, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { create, type JsonValue } from "@bufbuild/protobuf";
import { WorkflowService } from "./gen/waymark/v1/workflow_pb.js";
import {
  BulkCancelSchema,
  BulkDeleteSchema,
  BulkResumeSchema,
  BulkSetVersionSchema,
  DuplicatePolicy,
  type BulkWorkflowsRequest,
} from "./gen/waymark/v1/workflow_pb.js";
import type { Workflow } from "./gen/waymark/v1/types_pb.js";
import { fromPayload, toPayload } from "./payload.js";
import { SerializationError, toRpcError, WorkflowFailedError } from "./errors.js";
import { ownTransport, type ConnectionOptions } from "./transport.js";
import { tracedTransport } from "./tracing.js";
import { isUnavailableError, newWorkflowId, repeatable } from "./repeat.js";
import { readAll } from "./pages.js";
import { DEFAULT_RESEND_FOR_MS, resendDelayMs } from "./internal/resend.js";
import { sleep } from "./internal/wake.js";
import {
  eventInfo,
  messageInfo,
  statusToWire,
  stepInfo,
  workflowInfo,
  type EventInfo,
  type MessageInfo,
  type StepInfo,
  type WorkflowInfo,
  type WorkflowStatus,
} from "./types.js";
import { Queues } from "./queues.js";
import { Schedules } from "./schedules.js";
import { recordedStep, type RecordedHistory } from "./recorded.js";

/**
 * Where the server is and how to reach it (`ConnectionOptions`: `server`, `tlsCa`, `tlsCert`,
 * `tlsKey`, `apiKey`, `namespace`, each falling back to its `WAYMARK_*` environment variable).
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

/** Per-call options: abort the call with `signal`, bound it with `timeoutMs`. */
export interface CallOptions {
  signal?: AbortSignal;
  timeoutMs?: number;
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

export interface ForkOptions extends CallOptions {
  /** Copy the source's recorded steps before this position; all of them when not given. */
  fromStep?: number;
  /** The fork's id; one is made here when not given, so that the fork can be sent again safely. */
  workflowId?: string;
  /** Run the fork on workers of this application version (the fixed code); the source's when not given. */
  appVersion?: string;
  /** The queue it starts on; the source's when not given. */
  queue?: string;
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

/**
 * Which workflows a listing or a bulk operation (`client.bulk`) takes: every filter given must
 * match. An empty filter matches every workflow of the namespace.
 */
export interface WorkflowFilter {
  /** In one of these statuses; any status when empty. */
  statuses?: WorkflowStatus[];
  workflowName?: string;
  queue?: string;
  /** Created at or after. */
  createdAfter?: Date;
  /** Created before. */
  createdBefore?: Date;
  /** Running on (PENDING) or last run by this worker. */
  workerId?: string;
  /** Pinned to this application version. */
  appVersion?: string;
  /** The children of this workflow. */
  parentWorkflowId?: string;
  /** Carrying every one of these tags (key and value), at most 16. */
  tags?: Record<string, string>;
}

/**
 * What a bulk operation does to each workflow its filter matches: cancel (without cascade),
 * resume, delete (without cascade), or re-pin to `setVersion` (see `client.setVersion`).
 */
export type BulkAction = "cancel" | "resume" | "delete" | { setVersion: string; allowUnserved?: boolean };

/** What a bulk operation did: to one batch (`client.bulkBatch`) or to all (`client.bulk`). */
export interface BulkOutcome {
  /** Workflows looked at (the filter matched). */
  matched: number;
  /** Of those, the ones the action changed. */
  applied: number;
  /** The others, by the reason the single-workflow call gives (e.g. WORKFLOW_FINISHED). */
  skipped: Record<string, number>;
  /** After one batch: pass as `pageToken` for the next; undefined when it was the last. */
  nextPageToken?: string;
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

export interface StreamItem<T = JsonValue> {
  offset: number;
  value: T;
}

function filterToWire(f: WorkflowFilter) {
  return {
    statuses: (f.statuses ?? []).map(statusToWire),
    workflowName: f.workflowName ?? "",
    queueName: f.queue ?? "",
    createdAfter: f.createdAfter ? timestampFromDate(f.createdAfter) : undefined,
    createdBefore: f.createdBefore ? timestampFromDate(f.createdBefore) : undefined,
    workerId: f.workerId ?? "",
    appVersion: f.appVersion ?? "",
    parentWorkflowId: f.parentWorkflowId ?? "",
    tags: { ...f.tags },
  };
}

function actionToWire(a: BulkAction): BulkWorkflowsRequest["action"] {
  switch (a) {
    case "cancel":
      return { case: "cancel", value: create(BulkCancelSchema) };
    case "resume":
      return { case: "resume", value: create(BulkResumeSchema) };
    case "delete":
      return { case: "delete", value: create(BulkDeleteSchema) };
    default:
      return {
        case: "setVersion",
        value: create(BulkSetVersionSchema, { appVersion: a.setVersion, allowUnserved: a.allowUnserved ?? false }),
      };
  }
}

function call(o: CallOptions | undefined) {
  return { signal: o?.signal, timeoutMs: o?.timeoutMs };
}

function workflowOf(w: Workflow | undefined): WorkflowInfo {
  if (!w) throw new SerializationError("the server's answer carried no workflow");
  return workflowInfo(w);
}

/** Runs a call and turns its failure into an `RpcError`. */
export async function rpc<T>(f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (e) {
    throw toRpcError(e);
  }
}

export class Client {
  readonly queues: Queues;
  readonly schedules: Schedules;
  private readonly rpc: RpcClient<typeof WorkflowService>;
  private readonly resendForMs: number;

  constructor(options: ClientOptions = {}) {
    // Every unary call (also of `queues` and `schedules`) carries the caller's active trace
    // context, when OpenTelemetry is installed and a span is active.
    const t = tracedTransport(ownTransport(options));
    this.rpc = createClient(WorkflowService, t);
    this.resendForMs = Math.max(options.resendForMs ?? DEFAULT_RESEND_FOR_MS, 0);
    this.queues = new Queues(t, this.resendForMs);
    this.schedules = new Schedules(t, this.resendForMs);
  }

  /**
   * Starts a workflow (or returns the one already started with `workflowId`). Without a
   * `workflowId` one is made here, so that the start can be sent again safely.
   */
  async start(workflowName: string, input?: unknown, options: StartOptions = {}): Promise<Started> {
    const o = options;
    const workflowId = o.workflowId || newWorkflowId();
    const r = await repeatable(this.resendForMs, o, (a) =>
      this.rpc.startWorkflow(
        {
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
        },
        a,
      ),
    );
    const workflow = workflowOf(r.workflow);
    // A start sent again after the first one went through finds the workflow that one created:
    // with an id made here, nobody else could have started it, so this call did.
    const ours = !o.workflowId && workflow.workflowId === workflowId;
    return { workflow, created: r.created || ours, nameRegistered: r.nameRegistered };
  }

  async get(workflowId: string, options?: CallOptions): Promise<WorkflowInfo> {
    const r = await repeatable(this.resendForMs, options, (a) => this.rpc.getWorkflow({ workflowId }, a));
    return workflowOf(r.workflow);
  }

  /** One page of workflows, newest first; only an undefined `nextPageToken` ends the list. */
  async list(options: ListOptions = {}): Promise<WorkflowPage> {
    const r = await repeatable(this.resendForMs, options, (a) =>
      this.rpc.listWorkflows(
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
    const r = await repeatable(this.resendForMs, options, (a) => this.rpc.awaitWorkflow({ workflowId }, a));
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
      this.resendForMs,
      options,
      (pageToken, a) => this.rpc.listSteps({ workflowId, pageToken }, a),
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
    const r = await repeatable(this.resendForMs, options, (a) =>
      this.rpc.cancelWorkflow({ workflowId, cascade: options.cascade ?? false }, a),
    );
    return workflowOf(r.workflow);
  }

  /**
   * Puts a cancelled, dead-lettered or failed (ERROR) workflow back in its queue; it replays
   * from its checkpoints. An ERROR workflow loses its failure and, when its last recorded step
   * failed, that step's record, so the step runs again on the code its workers run now.
   */
  async resume(workflowId: string, options?: CallOptions): Promise<WorkflowInfo> {
    const r = await repeatable(this.resendForMs, options, (a) => this.rpc.resumeWorkflow({ workflowId }, a));
    return workflowOf(r.workflow);
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
    const o = options;
    const forkId = o.workflowId || newWorkflowId();
    const r = await repeatable(this.resendForMs, o, (a) =>
      this.rpc.forkWorkflow(
        {
          workflowId,
          fromStep: o.fromStep,
          newWorkflowId: forkId,
          appVersion: o.appVersion ?? "",
          queueName: o.queue ?? "",
        },
        a,
      ),
    );
    return workflowOf(r.workflow);
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
    const r = await rpc(() => this.rpc.deleteWorkflow({ workflowId, cascade: options.cascade ?? false }, call(options)));
    return r.deletedWorkflowIds;
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
    const r = await repeatable(this.resendForMs, options, (a) =>
      this.rpc.setWorkflowVersion({ workflowId, appVersion, allowUnserved: options.allowUnserved ?? false }, a),
    );
    return workflowOf(r.workflow);
  }

  /** How many workflows `filter` matches: a bulk operation's dry run, which changes nothing. */
  async countMatching(filter: WorkflowFilter = {}, options?: CallOptions): Promise<number> {
    const r = await repeatable(this.resendForMs, options, (a) =>
      this.rpc.bulkWorkflows({ filter: filterToWire(filter), action: actionToWire("cancel"), dryRun: true }, a),
    );
    return Number(r.total ?? 0n);
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
    const r = await repeatable(this.resendForMs, options, (a) =>
      this.rpc.bulkWorkflows(
        {
          filter: filterToWire(filter),
          action: actionToWire(action),
          dryRun: false,
          batchSize: options.batchSize ?? 0,
          pageToken: options.pageToken ?? "",
        },
        a,
      ),
    );
    return { matched: r.matched, applied: r.applied, skipped: { ...r.skipped }, nextPageToken: r.nextPageToken || undefined };
  }

  /**
   * Applies `action` to every workflow `filter` matches, batch after batch (`batchSize` each,
   * 100 when not given), and returns the sums. Count first with `countMatching`. Safe to run
   * again: what was done is skipped the second time (e.g. WORKFLOW_FINISHED for a cancel). The
   * call's `timeoutMs` covers every batch together.
   */
  async bulk(filter: WorkflowFilter, action: BulkAction, options: CallOptions & { batchSize?: number } = {}): Promise<BulkOutcome> {
    const until = options.timeoutMs !== undefined ? Date.now() + options.timeoutMs : undefined;
    const sum: BulkOutcome = { matched: 0, applied: 0, skipped: {} };
    let pageToken: string | undefined;
    do {
      const timeoutMs = until === undefined ? undefined : Math.max(until - Date.now(), 0);
      const batch = await this.bulkBatch(filter, action, { signal: options.signal, timeoutMs, batchSize: options.batchSize, pageToken });
      sum.matched += batch.matched;
      sum.applied += batch.applied;
      for (const [reason, n] of Object.entries(batch.skipped)) sum.skipped[reason] = (sum.skipped[reason] ?? 0) + n;
      pageToken = batch.nextPageToken;
    } while (pageToken);
    return sum;
  }

  /** Moves the start of a workflow still waiting for its delayed start to `delayMs` from now. */
  async delay(workflowId: string, delayMs: number, options?: CallOptions): Promise<WorkflowInfo> {
    const r = await rpc(() => this.rpc.delayWorkflow({ workflowId, delay: durationFromMs(delayMs) }, call(options)));
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
    const req = {
      workflowId,
      topic: options.topic ?? "",
      message: toPayload(message),
      idempotencyKey: options.idempotencyKey ?? "",
    };
    const r = options.idempotencyKey
      ? await repeatable(this.resendForMs, options, (a) => this.rpc.sendMessage(req, a))
      : await rpc(() => this.rpc.sendMessage(req, call(options)));
    return { messageId: r.messageId, duplicate: r.duplicate };
  }

  /** Every message sent to a workflow, consumed or not, oldest first (every page). */
  async messages(workflowId: string, options?: CallOptions): Promise<MessageInfo[]> {
    return readAll(
      this.resendForMs,
      options,
      (pageToken, a) => this.rpc.listMessages({ workflowId, pageToken }, a),
      (r) => r.messages.map(messageInfo),
    );
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
    const until = options.waitMs !== undefined ? Date.now() + options.waitMs : undefined;
    const r = await repeatable(this.resendForMs, { signal: options.signal }, (a) => {
      // Asked again, it waits only what is left of the caller's wait.
      const wait = until !== undefined ? Math.max(until - Date.now(), 0) : undefined;
      return this.rpc.getEvent(
        { workflowId, key, timeout: wait !== undefined ? durationFromMs(wait) : undefined },
        // Room for the server to answer "not set" itself.
        { signal: a.signal, timeoutMs: wait !== undefined ? wait + 5000 : undefined },
      );
    });
    return r.found ? (fromPayload(r.value) as T) : undefined;
  }

  /** Every event of a workflow, with the history of its values (every page). */
  async events(workflowId: string, options?: CallOptions): Promise<EventInfo[]> {
    return readAll(
      this.resendForMs,
      options,
      (pageToken, a) => this.rpc.listEvents({ workflowId, pageToken }, a),
      (r) => r.events.map(eventInfo),
    );
  }

  /**
   * Follows a workflow's stream `key` from `fromOffset`: yields values as they are written and
   * ends when the stream is closed or the workflow has finished. Cut off by UNAVAILABLE, it
   * opens the stream again after the last value it yielded.
   * `for await (const { offset, value } of client.readStream(id, "progress")) …`
   */
  async *readStream<T = JsonValue>(
    workflowId: string,
    key: string,
    options: { fromOffset?: number; signal?: AbortSignal } = {},
  ): AsyncGenerator<StreamItem<T>> {
    let from = options.fromOffset ?? 0;
    let unavailableSince: number | undefined;
    for (let resends = 0; ; ) {
      try {
        const responses = this.rpc.readStream({ workflowId, key, fromOffset: BigInt(from) }, { signal: options.signal });
        for await (const item of responses) {
          unavailableSince = undefined;
          resends = 0;
          from = Number(item.offset) + 1;
          yield { offset: Number(item.offset), value: fromPayload(item.value) as T };
        }
        return;
      } catch (e) {
        if (!isUnavailableError(e)) throw toRpcError(e);
        unavailableSince ??= Date.now();
        const left = unavailableSince + this.resendForMs - Date.now();
        if (left <= 0) throw toRpcError(e);
        resends += 1;
        await sleep(Math.min(resendDelayMs(resends), left), options.signal);
        if (options.signal?.aborted) throw toRpcError(options.signal.reason);
      }
    }
  }
}
