// Sending a request again while the server answers UNAVAILABLE (its database restarting or
// failing over, a replica shutting down). Only for requests that are safe to repeat: the worker's
// writes are fenced and idempotent, and the client retries only the calls that are.

import { sleep } from "./wake.js";

/** How long a request is sent again, by default, before the caller gives up on it. */
export const DEFAULT_RESEND_FOR_MS = 60_000;

/**
 * The pause before resend number `n` (1-based): 50 ms doubling to 2 s, jittered down to half
 * so that every worker and client a restart turned away does not come back in the same instant.
 */
export function resendDelayMs(n: number): number {
  const base = Math.min(50 * 2 ** Math.min(Math.max(n - 1, 0), 10), 2000);
  return base / 2 + Math.random() * (base / 2);
}

export type Attempt<T> = { ok: true; value: T } | { ok: false; error: unknown };

export interface ResendOptions<T> {
  /**
   * How long after the first "unavailable" outcome a new attempt may still start. Counted from
   * that outcome, not the first attempt, so a long call (an await) that meets a restart late
   * still gets the whole bound.
   */
  forMs: number;
  /** A time (ms since the epoch) no pause reaches past: the caller's own deadline. */
  until?: number;
  /** Whether this attempt's outcome says "unavailable, ask again". */
  unavailable: (a: Attempt<T>) => boolean;
  /** Ends the pauses between attempts: the loop then throws the signal's reason. */
  signal?: AbortSignal;
  /** Told before each pause (for logging). */
  onResend?: (n: number, a: Attempt<T>) => void;
}

/**
 * Calls `attempt` until its outcome is not "unavailable" or `forMs` has passed, and settles as
 * the last attempt did: its value (which may still be an unavailable answer, for a caller that
 * reads errors from values), or its error.
 */
export async function resending<T>(attempt: () => Promise<T>, o: ResendOptions<T>): Promise<T> {
  let deadline: number | undefined;
  for (let n = 1; ; n++) {
    let a: Attempt<T>;
    try {
      a = { ok: true, value: await attempt() };
    } catch (error) {
      a = { ok: false, error };
    }
    const unavailable = o.unavailable(a);
    if (unavailable) deadline ??= Math.min(Date.now() + o.forMs, o.until ?? Infinity);
    const left = (deadline ?? 0) - Date.now();
    if (!unavailable || left <= 0) {
      if (a.ok) return a.value;
      throw a.error;
    }
    o.onResend?.(n, a);
    await sleep(Math.min(resendDelayMs(n), left), o.signal);
    if (o.signal?.aborted) throw o.signal.reason;
  }
}
