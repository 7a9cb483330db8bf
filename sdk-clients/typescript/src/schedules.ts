// Schedules from a client: cron schedules that start a workflow at each time they name
// (waymark.v1.ScheduleService).

import { createClient, type Client as RpcClient, type Transport } from "@connectrpc/connect";
import { create, type JsonValue } from "@bufbuild/protobuf";
import { FieldMaskSchema, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { ScheduleSchema, ScheduleService, type Schedule } from "./gen/waymark/v1/schedule_pb.js";
import { fromPayload, toPayload } from "./payload.js";
import { date, workflowInfo, type WorkflowInfo } from "./types.js";
import type { CallOptions } from "./calls.js";
import { rpc } from "./calls.js";
import { repeatable } from "./repeat.js";
import { readAll } from "./pages.js";
import { SerializationError } from "./errors.js";

export interface ScheduleDef {
  name: string;
  /** 5 fields (minute first) or 6 (seconds first), e.g. "0 *\/15 * * * *"; nicknames like @daily work. */
  cron: string;
  /** IANA time zone; "UTC" when not given. */
  timezone?: string;
  workflowName: string;
  input?: unknown;
  queue?: string;
  /** Create it paused. */
  paused?: boolean;
}

export interface ScheduleInfo {
  name: string;
  cron: string;
  timezone: string;
  workflowName: string;
  input: JsonValue;
  queue: string;
  paused: boolean;
  lastFireTime?: Date;
  nextFireTime?: Date;
  createdAt?: Date;
  updatedAt?: Date;
}

/** The fields an update changes; absent ones stay as they are. */
export type ScheduleUpdate = Partial<Pick<ScheduleDef, "cron" | "timezone" | "workflowName" | "input" | "queue">>;

const PATHS: Record<keyof ScheduleUpdate, string> = {
  cron: "cron",
  timezone: "timezone",
  workflowName: "workflow_name",
  input: "input",
  queue: "queue_name",
};

function info(s: Schedule | undefined): ScheduleInfo {
  if (!s) throw new SerializationError("the server's answer carried no schedule");
  return {
    name: s.name,
    cron: s.cron,
    timezone: s.timezone,
    workflowName: s.workflowName,
    input: fromPayload(s.input),
    queue: s.queueName,
    paused: s.paused,
    lastFireTime: date(s.lastFireTime),
    nextFireTime: date(s.nextFireTime),
    createdAt: date(s.createdAt),
    updatedAt: date(s.updatedAt),
  };
}

function wire(name: string, d: ScheduleUpdate & { paused?: boolean }): Schedule {
  return create(ScheduleSchema, {
    name,
    cron: d.cron ?? "",
    timezone: d.timezone ?? "",
    workflowName: d.workflowName ?? "",
    input: toPayload(d.input),
    queueName: d.queue ?? "",
    paused: d.paused ?? false,
  });
}

export class Schedules {
  private readonly rpc: RpcClient<typeof ScheduleService>;

  constructor(
    transport: Transport,
    private readonly resendForMs = 0,
  ) {
    this.rpc = createClient(ScheduleService, transport);
  }

  async create(def: ScheduleDef, options?: CallOptions): Promise<ScheduleInfo> {
    const r = await rpc(() => this.rpc.createSchedule({ schedule: wire(def.name, def) }, options));
    return info(r.schedule);
  }

  async update(name: string, update: ScheduleUpdate, options?: CallOptions): Promise<ScheduleInfo> {
    const paths = (Object.keys(PATHS) as (keyof ScheduleUpdate)[]).filter((k) => k in update).map((k) => PATHS[k]);
    if (paths.length === 0) return this.get(name, options);
    const r = await rpc(() =>
      this.rpc.updateSchedule({ schedule: wire(name, update), updateMask: create(FieldMaskSchema, { paths }) }, options),
    );
    return info(r.schedule);
  }

  async get(name: string, options?: CallOptions): Promise<ScheduleInfo> {
    return info((await repeatable(this.resendForMs, options, (a) => this.rpc.getSchedule({ name }, a))).schedule);
  }

  /** Every schedule, by name (every page). */
  async list(options?: CallOptions): Promise<ScheduleInfo[]> {
    return readAll(
      this.resendForMs,
      options,
      (pageToken, a) => this.rpc.listSchedules({ pageToken }, a),
      (r) => r.schedules.map(info),
    );
  }

  async delete(name: string, options?: CallOptions): Promise<void> {
    await rpc(() => this.rpc.deleteSchedule({ name }, options));
  }

  async pause(name: string, options?: CallOptions): Promise<ScheduleInfo> {
    return info((await rpc(() => this.rpc.pauseSchedule({ name }, options))).schedule);
  }

  async resume(name: string, options?: CallOptions): Promise<ScheduleInfo> {
    return info((await rpc(() => this.rpc.resumeSchedule({ name }, options))).schedule);
  }

  /** Starts the schedule's workflow once, now; `requestId` makes a retried trigger start one. */
  async trigger(
    name: string,
    options: CallOptions & { requestId?: string } = {},
  ): Promise<{ workflow: WorkflowInfo; created: boolean }> {
    const r = await rpc(() => this.rpc.triggerSchedule({ name, requestId: options.requestId ?? "" }, options));
    if (!r.workflow) throw new SerializationError("the server's answer carried no workflow");
    return { workflow: workflowInfo(r.workflow), created: r.created };
  }

  /** Starts one workflow per fire time from `start` through `end` (both included). */
  async backfill(
    name: string,
    start: Date,
    end: Date,
    options?: CallOptions,
  ): Promise<{ fireTime?: Date; workflowId: string; created: boolean }[]> {
    const r = await rpc(() =>
      this.rpc.backfillSchedule({ name, startTime: timestampFromDate(start), endTime: timestampFromDate(end) }, options),
    );
    return r.runs.map((x) => ({ fireTime: date(x.fireTime), workflowId: x.workflowId, created: x.created }));
  }
}
