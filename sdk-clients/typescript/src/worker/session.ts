// One stream to the server: hello, credits, heartbeats, dispatches, wakeups and cancels. When it
// ends, every workflow it was running is abandoned; the server hands them out again (to this
// worker when it reconnects, or to another).

import { create } from "@bufbuild/protobuf";
import { createClient, type Transport } from "@connectrpc/connect";
import {
  CreditSchema,
  HeartbeatSchema,
  HelloSchema,
  RecvResult_Outcome,
  WorkerMessageSchema,
  WorkerService,
  type DispatchWorkflow,
  type ServerMessage,
  type WorkerMessage,
} from "../gen/waymark/v1/worker_pb.js";
import { CancelledError, DisconnectedError, FencedError, toRpcError } from "../errors.js";
import { Outbox } from "../internal/outbox.js";
import { Conn } from "./conn.js";
import type { WorkerConfig } from "./registry.js";
import { Run } from "./run.js";
import { serveStep } from "./serve-steps.js";

export const SDK_VERSION = "0.1.0";

/** Runs one session until its stream ends (throws why) or `stop` aborts (resolves). */
export async function runSession(
  config: WorkerConfig,
  transport: Transport,
  stop: AbortSignal,
  onConnected: (sessionId: string) => void,
): Promise<void> {
  const outbox = new Outbox<WorkerMessage>();
  const conn = new Conn(outbox);
  const ended = new AbortController();
  const onStop = () => ended.abort();
  stop.addEventListener("abort", onStop, { once: true });
  const running = new Map<string, Run>();
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
    config.logger.info("connected to Waymark", { workerId: config.workerId, session: welcome.sessionId });
    onConnected(welcome.sessionId);
    credit(conn, config.maxConcurrentWorkflows, config.steps.size > 0 ? config.maxConcurrentSteps : 0);
    heartbeat = setInterval(
      () => conn.send({ case: "heartbeat", value: create(HeartbeatSchema) }),
      Math.max(welcome.heartbeatIntervalMs, 100),
    );

    const start = (d: DispatchWorkflow) => {
      running.get(d.workflowId)?.interrupt(new FencedError("dispatched again"));
      const run = new Run(d, conn, config);
      running.set(d.workflowId, run);
      run
        .execute()
        .catch((e) => config.logger.error("workflow run crashed", { workflowId: d.workflowId, error: String(e) }))
        .finally(() => {
          if (running.get(d.workflowId) !== run) return;
          running.delete(d.workflowId);
          credit(conn, 1, 0);
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
          running.get(k.value.workflowId)?.interrupt(new CancelledError());
          break;
        case "wakeup": {
          const run = running.get(k.value.workflowId);
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
    throw e instanceof DisconnectedError ? e : toRpcError(e);
  } finally {
    stop.removeEventListener("abort", onStop);
    if (heartbeat) clearInterval(heartbeat);
    conn.close();
    ended.abort();
    for (const run of running.values()) run.interrupt(new DisconnectedError());
    running.clear();
  }
}

/** Grants the server room for more workflows or remote step attempts. */
function credit(conn: Conn, workflows: number, steps: number): void {
  conn.send({ case: "credit", value: create(CreditSchema, { workflows, steps }) });
}
