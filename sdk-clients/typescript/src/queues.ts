// Queues from a client: create, change, read, list and remove them (waymark.v1.QueueService).

import { createClient, type Client as RpcClient, type Transport } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { durationFromMs, durationMs, FieldMaskSchema } from "@bufbuild/protobuf/wkt";
import { QueueSchema, QueueService, type Queue } from "./gen/waymark/v1/queue_pb.js";
import { date } from "./types.js";
import type { CallOptions } from "./calls.js";
import { rpc } from "./calls.js";
import { repeatable } from "./repeat.js";
import { readAll } from "./pages.js";

/** A queue's limits; an absent limit is no limit. */
export interface QueueLimits {
  /** Most of the queue's workflows one worker process runs at once. */
  workerConcurrency?: number;
  /** Most of the queue's workflows running at once across the fleet. */
  globalConcurrency?: number;
  /** At most `maxStarts` starts in any window of `periodMs`. */
  rateLimit?: { maxStarts: number; periodMs: number };
  /** Most workflows of one partition key running at once. */
  partitionConcurrency?: number;
}

export interface QueueInfo {
  name: string;
  limits: QueueLimits;
  createdAt?: Date;
  updatedAt?: Date;
}

/** What an update changes: a limit given sets it, `null` removes it, absent leaves it as it is. */
export type QueueUpdate = { [K in keyof QueueLimits]?: QueueLimits[K] | null };

const PATHS: Record<keyof QueueLimits, string> = {
  workerConcurrency: "worker_concurrency",
  globalConcurrency: "global_concurrency",
  rateLimit: "rate_limit",
  partitionConcurrency: "partition_concurrency",
};

function wire(name: string, l: QueueUpdate): Queue {
  return create(QueueSchema, {
    name,
    workerConcurrency: l.workerConcurrency ?? undefined,
    globalConcurrency: l.globalConcurrency ?? undefined,
    rateLimit: l.rateLimit ? { maxStarts: l.rateLimit.maxStarts, period: durationFromMs(l.rateLimit.periodMs) } : undefined,
    partitionConcurrency: l.partitionConcurrency ?? undefined,
  });
}

function info(q: Queue | undefined): QueueInfo {
  const limits: QueueLimits = {};
  if (q?.workerConcurrency !== undefined) limits.workerConcurrency = q.workerConcurrency;
  if (q?.globalConcurrency !== undefined) limits.globalConcurrency = q.globalConcurrency;
  if (q?.rateLimit) {
    limits.rateLimit = {
      maxStarts: q.rateLimit.maxStarts,
      periodMs: q.rateLimit.period ? durationMs(q.rateLimit.period) : 0,
    };
  }
  if (q?.partitionConcurrency !== undefined) limits.partitionConcurrency = q.partitionConcurrency;
  return { name: q?.name ?? "", limits, createdAt: date(q?.createdAt), updatedAt: date(q?.updatedAt) };
}

export class Queues {
  private readonly rpc: RpcClient<typeof QueueService>;

  constructor(
    transport: Transport,
    private readonly resendForMs = 0,
  ) {
    this.rpc = createClient(QueueService, transport);
  }

  /** Creates a queue; `RpcError` reason QUEUE_EXISTS when the name is taken. */
  async create(name: string, limits: QueueLimits = {}, options?: CallOptions): Promise<QueueInfo> {
    const r = await rpc(() => this.rpc.createQueue({ queue: wire(name, limits) }, options));
    return info(r.queue);
  }

  /** Changes the limits `update` names (`null` removes one). */
  async update(name: string, update: QueueUpdate, options?: CallOptions): Promise<QueueInfo> {
    const paths = (Object.keys(PATHS) as (keyof QueueLimits)[])
      .filter((k) => update[k] !== undefined)
      .map((k) => PATHS[k]);
    if (paths.length === 0) return this.get(name, options);
    const r = await rpc(() =>
      this.rpc.updateQueue({ queue: wire(name, update), updateMask: create(FieldMaskSchema, { paths }) }, options),
    );
    return info(r.queue);
  }

  async get(name: string, options?: CallOptions): Promise<QueueInfo> {
    const r = await repeatable(this.resendForMs, options, (a) => this.rpc.getQueue({ name }, a));
    return info(r.queue);
  }

  /** Every queue, by name (every page). */
  async list(options?: CallOptions): Promise<QueueInfo[]> {
    return readAll(
      this.resendForMs,
      options,
      (pageToken, a) => this.rpc.listQueues({ pageToken }, a),
      (r) => r.queues.map(info),
    );
  }

  /** Removes a queue ("default" cannot be: QUEUE_PROTECTED). */
  async delete(name: string, options?: CallOptions): Promise<void> {
    await rpc(() => this.rpc.deleteQueue({ name }, options));
  }
}
