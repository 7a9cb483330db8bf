// A workflow's course once started, one at a time or by filter: cancel, resume, fork, delete,
// re-pin to another application version, and the bulk operations that do these to every
// workflow a filter matches. `Client` has these methods (documented there); it hands them to
// the functions here to keep client.ts to one concern.

import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { create } from "@bufbuild/protobuf";
import {
  BulkCancelSchema,
  BulkDeleteSchema,
  BulkResumeSchema,
  BulkSetVersionSchema,
  type BulkWorkflowsRequest,
} from "./gen/waymark/v1/workflow_pb.js";
import { newWorkflowId, repeatable } from "./repeat.js";
import { statusToWire, type WorkflowInfo, type WorkflowStatus } from "./types.js";
import { call, rpc, workflowOf, type CallOptions, type WorkflowCalls } from "./calls.js";

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

export function filterToWire(f: WorkflowFilter) {
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


/** `Client.cancel`. */
export async function cancel(
  c: WorkflowCalls,
  workflowId: string,
  options: CallOptions & { cascade?: boolean },
): Promise<WorkflowInfo> {
  const r = await repeatable(c.resendForMs, options, (a) =>
    c.rpc.cancelWorkflow({ workflowId, cascade: options.cascade ?? false }, a),
  );
  return workflowOf(r.workflow);
}

/** `Client.resume`. */
export async function resume(c: WorkflowCalls, workflowId: string, options?: CallOptions): Promise<WorkflowInfo> {
  const r = await repeatable(c.resendForMs, options, (a) => c.rpc.resumeWorkflow({ workflowId }, a));
  return workflowOf(r.workflow);
}

/** `Client.fork`. */
export async function fork(c: WorkflowCalls, workflowId: string, options: ForkOptions): Promise<WorkflowInfo> {
  const o = options;
  const forkId = o.workflowId || newWorkflowId();
  const r = await repeatable(c.resendForMs, o, (a) =>
    c.rpc.forkWorkflow(
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

/** `Client.delete`. */
export async function deleteWorkflow(
  c: WorkflowCalls,
  workflowId: string,
  options: CallOptions & { cascade?: boolean },
): Promise<string[]> {
  const r = await rpc(() => c.rpc.deleteWorkflow({ workflowId, cascade: options.cascade ?? false }, call(options)));
  return r.deletedWorkflowIds;
}

/** `Client.setVersion`. */
export async function setVersion(
  c: WorkflowCalls,
  workflowId: string,
  appVersion: string,
  options: CallOptions & { allowUnserved?: boolean },
): Promise<WorkflowInfo> {
  const r = await repeatable(c.resendForMs, options, (a) =>
    c.rpc.setWorkflowVersion({ workflowId, appVersion, allowUnserved: options.allowUnserved ?? false }, a),
  );
  return workflowOf(r.workflow);
}

/** `Client.countMatching`. */
export async function countMatching(c: WorkflowCalls, filter: WorkflowFilter, options?: CallOptions): Promise<number> {
  const r = await repeatable(c.resendForMs, options, (a) =>
    c.rpc.bulkWorkflows({ filter: filterToWire(filter), action: actionToWire("cancel"), dryRun: true }, a),
  );
  return Number(r.total ?? 0n);
}

/** `Client.bulkBatch`. */
export async function bulkBatch(
  c: WorkflowCalls,
  filter: WorkflowFilter,
  action: BulkAction,
  options: CallOptions & { batchSize?: number; pageToken?: string },
): Promise<BulkOutcome> {
  const r = await repeatable(c.resendForMs, options, (a) =>
    c.rpc.bulkWorkflows(
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

/** `Client.bulk`: the batches `batch` applies, one after another, summed. */
export async function bulk(
  batch: (options: CallOptions & { batchSize?: number; pageToken?: string }) => Promise<BulkOutcome>,
  options: CallOptions & { batchSize?: number },
): Promise<BulkOutcome> {
  const until = options.timeoutMs !== undefined ? Date.now() + options.timeoutMs : undefined;
  const sum: BulkOutcome = { matched: 0, applied: 0, skipped: {} };
  let pageToken: string | undefined;
  do {
    const timeoutMs = until === undefined ? undefined : Math.max(until - Date.now(), 0);
    const b = await batch({ signal: options.signal, timeoutMs, batchSize: options.batchSize, pageToken });
    sum.matched += b.matched;
    sum.applied += b.applied;
    for (const [reason, n] of Object.entries(b.skipped)) sum.skipped[reason] = (sum.skipped[reason] ?? 0) + n;
    pageToken = b.nextPageToken;
  } while (pageToken);
  return sum;
}
