// How values are shown: times (local, with the age and the ISO time), durations, JSON payloads.

import { toJson, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema, timestampDate, type Timestamp, type Duration } from "@bufbuild/protobuf/wkt";
import type { Payload } from "./gen/waymark/v1/types_pb.js";
import { WorkflowStatus } from "./gen/waymark/v1/types_pb.js";

/** A time in ms; unset, or the Unix epoch itself (a zero value standing for "unknown"), is undefined. */
export function tsMs(ts: Timestamp | undefined): number | undefined {
  if (!ts || (ts.seconds === 0n && ts.nanos === 0)) return undefined;
  return timestampDate(ts).getTime();
}

export function durationMs(d: Duration | undefined): number | undefined {
  if (!d) return undefined;
  return Number(d.seconds) * 1000 + Math.round(d.nanos / 1e6);
}

/** "340 ms", "4.2 s", "3 min 12 s", "2 h 5 min", "3 d 4 h". */
export function humanDuration(ms: number): string {
  if (!Number.isFinite(ms)) return "—";
  const neg = ms < 0;
  ms = Math.abs(ms);
  let s: string;
  if (ms < 1000) s = `${Math.round(ms)} ms`;
  else if (ms < 10_000) s = `${(ms / 1000).toFixed(2)} s`;
  else if (ms < 60_000) s = `${(ms / 1000).toFixed(1)} s`;
  else if (ms < 3_600_000) {
    const m = Math.floor(ms / 60_000);
    const sec = Math.floor((ms % 60_000) / 1000);
    s = sec ? `${m} min ${sec} s` : `${m} min`;
  } else if (ms < 86_400_000) {
    const h = Math.floor(ms / 3_600_000);
    const m = Math.floor((ms % 3_600_000) / 60_000);
    s = m ? `${h} h ${m} min` : `${h} h`;
  } else {
    const d = Math.floor(ms / 86_400_000);
    const h = Math.floor((ms % 86_400_000) / 3_600_000);
    s = h ? `${d} d ${h} h` : `${d} d`;
  }
  return neg ? `-${s}` : s;
}

/** "3 min ago", "in 2 h", "just now". */
export function relative(ms: number, now = Date.now()): string {
  const diff = ms - now;
  const abs = Math.abs(diff);
  if (abs < 5000) return "just now";
  let text: string;
  if (abs < 60_000) text = `${Math.round(abs / 1000)} s`;
  else if (abs < 3_600_000) text = `${Math.round(abs / 60_000)} min`;
  else if (abs < 86_400_000) text = `${Math.round(abs / 3_600_000)} h`;
  else if (abs < 60 * 86_400_000) text = `${Math.round(abs / 86_400_000)} d`;
  else if (abs < 730 * 86_400_000) text = `${Math.round(abs / (30 * 86_400_000))} mo`;
  else text = `${Math.round(abs / (365 * 86_400_000))} y`;
  return diff < 0 ? `${text} ago` : `in ${text}`;
}

const dateFmt = new Intl.DateTimeFormat(undefined, {
  year: "numeric",
  month: "short",
  day: "numeric",
  hour: "2-digit",
  minute: "2-digit",
  second: "2-digit",
});
const timeFmt = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit" });

/** Local time: the time alone for today, the date too otherwise. */
export function localTime(ms: number, now = Date.now()): string {
  const d = new Date(ms);
  const today = new Date(now);
  const sameDay = d.getFullYear() === today.getFullYear() && d.getMonth() === today.getMonth() && d.getDate() === today.getDate();
  return sameDay ? timeFmt.format(d) : dateFmt.format(d);
}

export function isoTime(ms: number): string {
  return new Date(ms).toISOString();
}

/** An ISO time as a datetime-local input's value (local time, to the second). */
export function toLocalInput(iso: string): string {
  const ms = Date.parse(iso);
  if (Number.isNaN(ms)) return "";
  const d = new Date(ms);
  const p = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

/** A datetime-local input's value as an ISO time (UTC); empty when not a time. */
export function fromLocalInput(value: string): string {
  if (!value) return "";
  const ms = new Date(value).getTime();
  return Number.isNaN(ms) ? "" : new Date(ms).toISOString();
}

/** A payload as JSON text (pretty), or a description of a binary one. */
export function payloadText(p: Payload | undefined): string {
  if (!p) return "null";
  switch (p.content.case) {
    case "json":
      return JSON.stringify(toJson(ValueSchema, p.content.value), null, 2);
    case "binary": {
      const bytes = p.content.value;
      return `<${bytes.length} bytes, encoding ${JSON.stringify(p.encoding || "binary")}>`;
    }
    default:
      return "null";
  }
}

export function payloadJson(p: Payload | undefined): JsonValue | undefined {
  if (!p || p.content.case !== "json") return undefined;
  return toJson(ValueSchema, p.content.value);
}

/** The same value, compactly, for comparisons. */
export function payloadKey(p: Payload | undefined): string {
  if (!p) return "null";
  if (p.content.case === "json") return JSON.stringify(toJson(ValueSchema, p.content.value));
  if (p.content.case === "binary") return `${p.encoding}:${Array.from(p.content.value).join(",")}`;
  return "null";
}

export const statusName = (s: WorkflowStatus): string => WorkflowStatus[s] ?? String(s);

export const TERMINAL = new Set([
  WorkflowStatus.SUCCESS,
  WorkflowStatus.ERROR,
  WorkflowStatus.CANCELLED,
  WorkflowStatus.MAX_RECOVERY_ATTEMPTS_EXCEEDED,
  WorkflowStatus.CONTINUED_AS_NEW,
]);

export const STATUS_HELP: Record<number, string> = {
  [WorkflowStatus.ENQUEUED]: "Waiting in its queue for a worker",
  [WorkflowStatus.DELAYED]: "Waiting for its start time, a timer or a parked wait",
  [WorkflowStatus.PENDING]: "Running on a worker",
  [WorkflowStatus.SUCCESS]: "Finished with an output",
  [WorkflowStatus.ERROR]: "Finished with an error",
  [WorkflowStatus.CANCELLED]: "Cancelled; Resume puts it back in its queue",
  [WorkflowStatus.MAX_RECOVERY_ATTEMPTS_EXCEEDED]: "Dead-lettered: recovered more times than the server allows",
  [WorkflowStatus.CONTINUED_AS_NEW]: "A run that ended by continuing as new",
};

/** Statuses offered in filters, in lifecycle order. */
export const STATUSES: WorkflowStatus[] = [
  WorkflowStatus.ENQUEUED,
  WorkflowStatus.DELAYED,
  WorkflowStatus.PENDING,
  WorkflowStatus.SUCCESS,
  WorkflowStatus.ERROR,
  WorkflowStatus.CANCELLED,
  WorkflowStatus.MAX_RECOVERY_ATTEMPTS_EXCEEDED,
  WorkflowStatus.CONTINUED_AS_NEW,
];

export function parseStatus(name: string | null): WorkflowStatus | undefined {
  if (!name) return undefined;
  const v = (WorkflowStatus as unknown as Record<string, number>)[name.toUpperCase()];
  return typeof v === "number" && v !== 0 ? v : undefined;
}

export function plural(n: number | bigint, one: string, many = `${one}s`): string {
  return `${n.toLocaleString()} ${n === 1 || n === 1n ? one : many}`;
}
