// What the client's calls share: their per-call options, the workflow service they are made on,
// and the turning of a failed call into an `RpcError`. The client's methods are in client.ts,
// lifecycle.ts and messaging.ts; `client.queues` and `client.schedules` use these too.

import type { Client as RpcClient } from "@connectrpc/connect";
import type { WorkflowService } from "./gen/waymark/v1/workflow_pb.js";
import type { Workflow } from "./gen/waymark/v1/types_pb.js";
import { SerializationError, toRpcError } from "./errors.js";
import { workflowInfo, type WorkflowInfo } from "./types.js";

/** Per-call options: abort the call with `signal`, bound it with `timeoutMs`. */
export interface CallOptions {
  signal?: AbortSignal;
  timeoutMs?: number;
}

/** A client's workflow service and how long its calls that are safe to repeat are repeated. */
export interface WorkflowCalls {
  readonly rpc: RpcClient<typeof WorkflowService>;
  readonly resendForMs: number;
}

export function call(o: CallOptions | undefined) {
  return { signal: o?.signal, timeoutMs: o?.timeoutMs };
}

export function workflowOf(w: Workflow | undefined): WorkflowInfo {
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
