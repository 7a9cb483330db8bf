// The worker: registers workflow and step functions, holds one stream to the server, and runs
// what the server dispatches. It reconnects with backoff whenever the stream breaks.

import { randomUUID } from "node:crypto";
import { EventEmitter } from "node:events";
import { Code, type Transport } from "@connectrpc/connect";
import { consoleLogger, type Logger } from "../logger.js";
import { ownTransport, type ConnectionOptions } from "../transport.js";
import { RpcError } from "../errors.js";
import { sleep } from "../internal/wake.js";
import { DEFAULT_RESEND_FOR_MS } from "../internal/resend.js";
import type { StepFn, WorkerConfig, WorkflowFn } from "./registry.js";
import { runSession, type SessionHandle } from "./session.js";

/**
 * Where the server is and how to reach it (`ConnectionOptions`: `server`, `tlsCa`, `tlsCert`,
 * `tlsKey`, `apiKey`, `namespace`, `insecure`, each falling back to its `WAYMARK_*` environment
 * variable; an API key over plaintext to a host that is not loopback needs `insecure`),
 * and how the worker runs.
 */
export interface WorkerOptions extends ConnectionOptions {
  /**
   * A Connect transport of your own (e.g. `createTransport({ ..., interceptors })`); `server`
   * is then ignored, and the other connection options may not be given.
   */
  transport?: Transport;
  /** Stable id of this worker process (generated when not given). */
  workerId?: string;
  appName?: string;
  /** Workflows are pinned to the version of the worker that first runs them. */
  appVersion?: string;
  /** Queues to take workflows from; ["default"] when not given. */
  queues?: string[];
  /** How many workflows run at once here (the credits granted to the server). Default 100. */
  maxConcurrentWorkflows?: number;
  /** How many remote step attempts run at once here. Default 16. */
  maxConcurrentSteps?: number;
  /**
   * A workflow that will wait (sleep, recv, getEvent, a child, a remote step) longer than this
   * is parked: released from memory and dispatched again when the wait resolves. `null` keeps
   * every waiting workflow in memory. Default 60 000 ms.
   */
  parkAfterMs?: number | null;
  /**
   * While the server answers a request UNAVAILABLE (its database restarting, a replica shutting
   * down), the request is sent again with backoff (50 ms doubling to 2 s) for up to this long.
   * Past it the run is dropped — never failed — and the server dispatches the workflow again.
   * Default 60 000 ms.
   */
  resendForMs?: number;
  /** Where the worker logs; a stderr logger at WAYMARK_LOG's level (default info) when not given. */
  logger?: Logger;
}

/** Events a worker emits: `connected` (with the session id) and `disconnected` (with the error). */
export interface WorkerEvents {
  connected: [sessionId: string];
  disconnected: [error: Error];
}

export class Worker extends EventEmitter<WorkerEvents> {
  readonly workerId: string;
  private readonly config: WorkerConfig;
  private readonly transport: Transport;
  /** The session connected now (the last one, after a disconnect). */
  private session?: SessionHandle;

  constructor(options: WorkerOptions = {}) {
    super();
    this.workerId = options.workerId ?? randomUUID();
    this.config = {
      workerId: this.workerId,
      appName: options.appName ?? "",
      appVersion: options.appVersion ?? "",
      queues: options.queues ?? [],
      maxConcurrentWorkflows: Math.max(options.maxConcurrentWorkflows ?? 100, 1),
      maxConcurrentSteps: Math.max(options.maxConcurrentSteps ?? 16, 1),
      parkAfterMs: options.parkAfterMs === undefined ? 60_000 : options.parkAfterMs,
      resendForMs: Math.max(options.resendForMs ?? DEFAULT_RESEND_FOR_MS, 0),
      workflows: new Map(),
      steps: new Map(),
      logger: options.logger ?? consoleLogger(),
    };
    this.transport = ownTransport(options);
  }

  /** Registers a workflow function under `name`. Returns the worker, for chaining. */
  workflow<I = unknown, O = unknown>(name: string, fn: WorkflowFn<I, O>): this {
    this.config.workflows.set(name, fn as WorkflowFn);
    return this;
  }

  /**
   * Registers a remote step under `name`: any workflow, in any language, can call it with
   * `callStep(name, input)`. A throw fails the attempt; the caller's retry policy decides next.
   */
  step<I = unknown, O = unknown>(name: string, fn: StepFn<I, O>): this {
    this.config.steps.set(name, fn as StepFn);
    return this;
  }

  /** @internal The workflow functions registered here, by name: what a `Replayer` replays. */
  registeredWorkflows(): ReadonlyMap<string, WorkflowFn> {
    return this.config.workflows;
  }

  /**
   * @internal For tests only: forgets the run of `workflowId` as if it had died unnoticed —
   * nothing is sent for it and its credit is not granted back — so that only the held list of
   * the next heartbeat tells the server. False when this worker holds no such run.
   */
  loseRunSilently(workflowId: string): boolean {
    return this.session?.loseRun(workflowId) ?? false;
  }

  /**
   * Serves until `signal` aborts (or, without one, until SIGINT/SIGTERM). Reconnects with
   * backoff whenever the stream breaks; what was running then is dropped here and the server
   * gives it out again. Rejects with an `RpcError` (code Unauthenticated or PermissionDenied)
   * when the server refuses the stream for its API key — missing, unknown, revoked, expired, or
   * of a role that may not run a worker — whether at connect or later: trying again would not help.
   */
  async run(options: { signal?: AbortSignal } = {}): Promise<void> {
    const signal = options.signal ?? terminationSignal();
    let failures = 0;
    while (!signal.aborted) {
      try {
        await runSession(this.config, this.transport, signal, (session) => {
          this.session = session;
          this.emit("connected", session.sessionId);
        });
        failures = 0;
      } catch (e) {
        failures += 1;
        this.emit("disconnected", e instanceof Error ? e : new Error(String(e)));
        if (isRefusal(e)) {
          this.config.logger.error("the server refused this worker's stream for its API key; the worker stops", {
            code: Code[e.code],
            reason: e.reason,
            error: e.message,
          });
          throw e;
        }
        this.config.logger.warn("worker stream ended; reconnecting", { error: e instanceof Error ? e.message : String(e) });
      }
      if (!signal.aborted) await sleep(backoffMs(failures), signal);
    }
  }
}

/** The server will not take this worker's stream with its credentials, now or on a retry. */
function isRefusal(e: unknown): e is RpcError {
  return e instanceof RpcError && (e.code === Code.Unauthenticated || e.code === Code.PermissionDenied);
}

/** 50 ms doubling to 5 s, with jitter so a fleet does not reconnect in lockstep. */
export function backoffMs(failures: number): number {
  const base = Math.min(50 * 2 ** Math.min(failures, 7), 5000);
  return base / 2 + Math.random() * (base / 2);
}

function terminationSignal(): AbortSignal {
  const ac = new AbortController();
  const stop = () => ac.abort();
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  return ac.signal;
}
