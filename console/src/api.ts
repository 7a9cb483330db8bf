// The console is one more client of the public API: gRPC-web on its own origin, with the same
// keys and namespaces every client passes. Every call carries `authorization` (when signed in)
// and `waymark-namespace` (the namespace in the URL), set here by one interceptor.

import { Code, ConnectError, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-web";
import { BinaryReader } from "@bufbuild/protobuf/wire";
import { AdminService } from "./gen/waymark/v1/admin_pb.js";
import { QueueService } from "./gen/waymark/v1/queue_pb.js";
import { ScheduleService } from "./gen/waymark/v1/schedule_pb.js";
import { WorkerService } from "./gen/waymark/v1/worker_pb.js";
import { WorkflowService } from "./gen/waymark/v1/workflow_pb.js";

const KEY_STORAGE = "waymark.console.key";

/** The API key of this tab (sessionStorage only: it dies with the tab). */
export function apiKey(): string {
  try {
    return sessionStorage.getItem(KEY_STORAGE) ?? "";
  } catch {
    return "";
  }
}

export function setApiKey(key: string): void {
  try {
    if (key) sessionStorage.setItem(KEY_STORAGE, key);
    else sessionStorage.removeItem(KEY_STORAGE);
  } catch {
    // Storage refused (private mode): the key lives as long as the page.
  }
  memoryKey = key;
}

let memoryKey = "";
let namespace = "";

/** The namespace calls act in: the one in the URL (empty: the server's choice). */
export function setNamespace(ns: string): void {
  namespace = ns;
}

export function currentNamespace(): string {
  return namespace;
}

const unauthenticatedListeners = new Set<() => void>();

/** Called whenever a call is answered UNAUTHENTICATED (no key, or one that stopped working). */
export function onUnauthenticated(f: () => void): () => void {
  unauthenticatedListeners.add(f);
  return () => unauthenticatedListeners.delete(f);
}

/** WhoAmI names no namespace unless asked to (see session.ts). */
let whoAmINamespace = "";

export function setWhoAmINamespace(ns: string): void {
  whoAmINamespace = ns;
}

const headers: Interceptor = (next) => async (req) => {
  const key = apiKey() || memoryKey;
  if (key) req.header.set("authorization", `Bearer ${key}`);
  const ns = req.method.name === "WhoAmI" ? whoAmINamespace : namespace;
  if (ns) req.header.set("waymark-namespace", ns);
  try {
    return await next(req);
  } catch (e) {
    if (e instanceof ConnectError && e.code === Code.Unauthenticated) unauthenticatedListeners.forEach((f) => f());
    throw e;
  }
};

export const transport = createGrpcWebTransport({ baseUrl: location.origin, interceptors: [headers] });

export interface Clients {
  workflows: Client<typeof WorkflowService>;
  queues: Client<typeof QueueService>;
  schedules: Client<typeof ScheduleService>;
  workers: Client<typeof WorkerService>;
  admin: Client<typeof AdminService>;
}

export const clients: Clients = {
  workflows: createClient(WorkflowService, transport),
  queues: createClient(QueueService, transport),
  schedules: createClient(ScheduleService, transport),
  workers: createClient(WorkerService, transport),
  admin: createClient(AdminService, transport),
};


/** What a refused call says: its gRPC code, message and ErrorInfo reason. */
export interface ApiErrorInfo {
  code: Code | undefined;
  codeName: string;
  message: string;
  reason: string;
  metadata: Record<string, string>;
}

const CODE_NAMES: Record<number, string> = {
  1: "CANCELLED",
  2: "UNKNOWN",
  3: "INVALID_ARGUMENT",
  4: "DEADLINE_EXCEEDED",
  5: "NOT_FOUND",
  6: "ALREADY_EXISTS",
  7: "PERMISSION_DENIED",
  8: "RESOURCE_EXHAUSTED",
  9: "FAILED_PRECONDITION",
  10: "ABORTED",
  11: "OUT_OF_RANGE",
  12: "UNIMPLEMENTED",
  13: "INTERNAL",
  14: "UNAVAILABLE",
  15: "DATA_LOSS",
  16: "UNAUTHENTICATED",
};

export function describeError(e: unknown): ApiErrorInfo {
  if (e instanceof ConnectError) {
    let reason = "";
    let metadata: Record<string, string> = {};
    for (const d of e.details) {
      if ("type" in d && d.type === "google.rpc.ErrorInfo") {
        ({ reason, metadata } = decodeErrorInfo(d.value));
        break;
      }
    }
    return { code: e.code, codeName: CODE_NAMES[e.code] ?? String(e.code), message: e.rawMessage, reason, metadata };
  }
  const message = e instanceof Error ? e.message : String(e);
  return { code: undefined, codeName: "ERROR", message, reason: "", metadata: {} };
}

export function isCode(e: unknown, code: Code): boolean {
  return e instanceof ConnectError && e.code === code;
}

/** google.rpc.ErrorInfo { string reason = 1; string domain = 2; map<string, string> metadata = 3; } */
export function decodeErrorInfo(bytes: Uint8Array): { reason: string; domain: string; metadata: Record<string, string> } {
  const r = new BinaryReader(bytes);
  let reason = "";
  let domain = "";
  const metadata: Record<string, string> = {};
  try {
    while (r.pos < r.len) {
      const [field, wire] = r.tag();
      if (field === 1) reason = r.string();
      else if (field === 2) domain = r.string();
      else if (field === 3) {
        const entry = new BinaryReader(r.bytes());
        let k = "";
        let v = "";
        while (entry.pos < entry.len) {
          const [f, w] = entry.tag();
          if (f === 1) k = entry.string();
          else if (f === 2) v = entry.string();
          else entry.skip(w);
        }
        metadata[k] = v;
      } else r.skip(wire);
    }
  } catch {
    // A malformed detail: keep what was read.
  }
  return { reason, domain, metadata };
}

export { Code, ConnectError };

// Tests (and curious operators) reach the page's own clients from the devtools: the same
// transport, key and namespace as the page.
(globalThis as unknown as { __waymark: unknown }).__waymark = { clients, transport, Code, ConnectError, describeError };
