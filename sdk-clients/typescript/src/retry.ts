// Retry policies: for local steps (the SDK retries) and remote steps (the server retries).

import { create } from "@bufbuild/protobuf";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { RetryPolicySchema, type RetryPolicy as WireRetryPolicy } from "./gen/waymark/v1/worker_pb.js";

/** How a step is retried when it throws. Every field is optional. */
export interface RetryPolicy {
  /** Attempts in all, the first included. Local steps default to 1 (no retry). */
  maxAttempts?: number;
  /** Wait before the second attempt. Default 100 ms. */
  initialIntervalMs?: number;
  /** Each wait is the previous one times this. Default 2. */
  backoffCoefficient?: number;
  /** No wait is longer than this. Default 30 s. */
  maxIntervalMs?: number;
}

/** The wait after failed attempt number `attempt` (1-based). */
export function retryDelayMs(policy: RetryPolicy, attempt: number): number {
  const initial = policy.initialIntervalMs ?? 100;
  const factor = Math.max(policy.backoffCoefficient ?? 2, 1);
  const max = policy.maxIntervalMs ?? 30_000;
  return Math.min(initial * factor ** Math.min(Math.max(attempt - 1, 0), 64), max);
}

export function maxAttempts(policy: RetryPolicy | undefined): number {
  return Math.max(Math.floor(policy?.maxAttempts ?? 1), 1);
}

/** The policy as a remote step carries it; unset fields take the server's defaults. */
export function wireRetryPolicy(policy: RetryPolicy): WireRetryPolicy {
  return create(RetryPolicySchema, {
    maxAttempts: policy.maxAttempts ?? 0,
    initialInterval: policy.initialIntervalMs !== undefined ? durationFromMs(policy.initialIntervalMs) : undefined,
    backoffCoefficient: policy.backoffCoefficient ?? 0,
    maxInterval: policy.maxIntervalMs !== undefined ? durationFromMs(policy.maxIntervalMs) : undefined,
  });
}
