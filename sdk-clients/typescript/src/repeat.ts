// Client calls that are safe to repeat, made again while the server answers UNAVAILABLE (its
// database restarting, a replica shutting down, the server not reachable for a moment). Calls
// that could do something twice are never repeated here: the caller decides about those.

import { Code, ConnectError } from "@connectrpc/connect";
import { randomBytes } from "node:crypto";
import { toRpcError } from "./errors.js";
import { resending } from "./internal/resend.js";

/** What each attempt is given: the caller's signal, and what is left of the caller's timeout. */
export interface Attempt {
  signal?: AbortSignal;
  timeoutMs?: number;
}

export function isUnavailableError(e: unknown): boolean {
  return e instanceof ConnectError && e.code === Code.Unavailable;
}

/**
 * Calls `f` until the server answers something other than UNAVAILABLE, for up to `forMs` after
 * the first such answer, and never past the caller's `timeoutMs` or `signal`. Errors come out
 * as `RpcError`.
 */
export async function repeatable<T>(
  forMs: number,
  o: { signal?: AbortSignal; timeoutMs?: number } | undefined,
  f: (a: Attempt) => Promise<T>,
): Promise<T> {
  const until = o?.timeoutMs !== undefined ? Date.now() + o.timeoutMs : undefined;
  try {
    return await resending(
      () => {
        const left = until === undefined ? undefined : until - Date.now();
        // The caller's timeout covers every attempt together, as it would one call.
        if (left !== undefined && left <= 0) throw new ConnectError("the call's timeout passed", Code.DeadlineExceeded);
        return f({ signal: o?.signal, timeoutMs: left });
      },
      { forMs, until, unavailable: (a) => !a.ok && isUnavailableError(a.error), signal: o?.signal },
    );
  } catch (e) {
    throw toRpcError(e);
  }
}

/**
 * A workflow id made here when the caller gave none, so that a start sent again is the same
 * start: UUID version 7 (time-ordered, like the ids the server makes).
 */
export function newWorkflowId(now = Date.now()): string {
  const b = randomBytes(16);
  b.writeUIntBE(now, 0, 6);
  b[6] = 0x70 | (b[6]! & 0x0f);
  b[8] = 0x80 | (b[8]! & 0x3f);
  const h = b.toString("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
