// One stream to the server: hello, credits, heartbeats, dispatches, wakeups and cancels. When it
// ends, every workflow it was running is dropped (nothing more is sent for it); the server hands
// them out again (to this worker when it reconnects, or to another).

import { create } from "@bufbuild/protobuf";
import { createClient, type Transport } from "@connectrpc/connect";
import {
  CreditSchema,
  HelloSchema,
  RecvResult_Outcome,
  WorkerMessageSchema,
  WorkerService,
  type DispatchWorkflow,
  type ServerMessage,
  type WorkerMessage,
} from "../gen/waymark/v1/worker_pb.js";
import { CancelledError, DisconnectedError, FencedError, RunDroppedError, toRpcError } from "../errors.js";
import { Outbox } from "../internal/outbox.js";
import { Conn } from "./conn.js";
import type { WorkerConfig } from "./registry.js";
import { Run } from "./run.js";
import { HeldRuns } from "./held.js";
import { limitsFrom } from "./limits.js";
import { serveStep } from "./serve-steps.js";

export const SDK_VERSION = "0.1.0";

/** What the worker can reach of a connected session. */
export interface SessionHandle {
  sessionId: string;
  /**
   * For tests: forgets a running workflow as if its run had died unnoticed. Nothing is sent for
   * it and its credit is not granted back; only the next heartbeat's held list, which no longer
   * names it, tells the server. False when no such run is held.
   */
  loseRun(workflowId: string): boolean;
}

/** Runs one session until its stream ends (throws why) or `stop` aborts (resolves). */
export async function runSession(
  config: WorkerConfig,
  transport: Transport,
  stop: AbortSignal,
  onConnected: (session: SessionHandle) => void,
): Promise<void> {
  const outbox = new Outbox<WorkerMessage>();
  const conn = new Conn(outbox);
  const ended = new AbortController();
  const onStop = () => ended.abort();
  stop.addEventListener("abort", onStop, { once: true });
  const held = new HeldRuns();
  let heartbeat: NodeJS.Timeout | undefined;
  outbox.push(
    create(WorkerMessageSchema, {
      kind: {
        case: "hello",
        value: create(HelloSchema, {
          workerId: config.workerId,
          appName: config.appName,
          appVersion: config.appVersion,
          workflowNames: [...config.workflows.keys()],
          stepNames: [...config.steps.keys()],
          queues: config.queues,
          sdk: `typescript/${SDK_VERSION}`,
        }),
      },
    }),
  );
  try {
    const inbound = createClient(WorkerService, transport).connect(outbox, { signal: ended.signal })[Symbol.asyncIterator]();
    const first = await inbound.next();
    if (first.done || first.value.kind.case !== "welcome") {
      throw new DisconnectedError("the server did not welcome this worker");
    }
    const welcome = first.value.kind.value;
    conn.limits = limitsFrom(welcome);
    config.logger.info("connected to Waymark", { workerId: config.workerId, session: welcome.sessionId });
    onConnected({
      sessionId: welcome.sessionId,
      loseRun(workflowId) {
        const run = held.get(workflowId);
        if (!run || !held.release(run)) return false;
        run.drop(new RunDroppedError("lost on purpose (a test)"));
        return true;
      },
    });
    credit(conn, config.maxConcurrentWorkflows, config.steps.size > 0 ? config.maxConcurrentSteps : 0);
    heartbeat = setInterval(
      () => conn.send({ case: "heartbeat", value: held.heartbeat(conn.limits.maxMessageBytes) }),
      Math.max(welcome.heartbeatIntervalMs, 100),
    );

    const start = (d: DispatchWorkflow) => {
      const run = new Run(d, conn, config);
      const replaced = held.take(run);
      if (replaced) {
        // Dispatched again while its earlier run is still here (the server took the workflow
        // back meanwhile, say after a database outage): the earlier run is stale and stops
        // without sending anything more. Each dispatch spent a credit; the earlier run's is
        // granted back now, as it is no longer held (its end grants nothing). Else every
        // dispatch again would shrink this worker's room for good.
        replaced.interrupt(new FencedError("dispatched again"));
        credit(conn, 1, 0);
      }
      run
        .execute()
        .catch((e) => config.logger.error("workflow run crashed", { workflowId: d.workflowId, error: String(e) }))
        .finally(() => {
          // Held until its completion or park was answered, or it was dropped or cancelled.
          // Only the run still held grants its credit back here: a replaced one did when it
          // was replaced (and the newer run stays held), a lost one never does.
          if (held.release(run)) credit(conn, 1, 0);
        });
    };

    const handle = (m: ServerMessage) => {
      const k = m.kind;
      switch (k.case) {
        case "reply":
          conn.resolve(k.value);
          break;
        case "dispatchWorkflow":
          start(k.value);
          break;
        case "cancel":
          held.get(k.value.workflowId)?.interrupt(new CancelledError());
          break;
        case "wakeup": {
          const run = held.get(k.value.workflowId);
          if (!run) break;
          const recv = k.value.recv;
          if (recv && recv.outcome === RecvResult_Outcome.DELIVERED && recv.message) {
            run.delivered.set(k.value.stepId, recv.message);
          }
          run.wake.ring();
          break;
        }
        case "dispatchStep":
          void serveStep(config, conn, k.value, ended.signal).finally(() =>
            credit(conn, 0, 1),
          );
          break;
        case "drain":
          config.logger.info("server is draining; will reconnect when it closes the stream");
          break;
        default:
          break;
      }
    };

    for (;;) {
      const next = await inbound.next();
      if (next.done) throw new DisconnectedError("the server closed the worker stream");
      handle(next.value);
    }
  } catch (e) {
    if (stop.aborted) return;
    throw e instanceof DisconnectedError ? e : toRpcError(e, "worker stream");
  } finally {
    stop.removeEventListener("abort", onStop);
    if (heartbeat) clearInterval(heartbeat);
    conn.close();
    ended.abort();
    for (const run of held.releaseAll()) run.drop(new DisconnectedError());
  }
}

/** Grants the server room for more workflows or remote step attempts. */
function credit(conn: Conn, workflows: number, steps: number): void {
  conn.send({ case: "credit", value: create(CreditSchema, { workflows, steps }) });
}
