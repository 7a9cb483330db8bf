// An in-process stand-in for the server's worker stream (Connect's router transport): the test
// sends server messages when it likes and waits for what the worker sends. Each connect is one
// FakeStream; a reconnecting worker opens the next.

import { create } from "@bufbuild/protobuf";
import { createRouterTransport, type Transport } from "@connectrpc/connect";
import {
  ReplySchema,
  ServerMessageSchema,
  WelcomeSchema,
  WorkerService,
  type Reply,
  type ServerMessage,
  type WorkerMessage,
} from "../src/gen/waymark/v1/worker_pb.js";
import { Outbox } from "../src/internal/outbox.js";

/** Long enough for a slow machine, short enough that a broken test fails instead of hanging. */
const PATIENCE_MS = 10_000;

export class FakeStream {
  /** What the worker sent on this stream, in order. */
  readonly received: WorkerMessage[] = [];
  readonly outbox = new Outbox<ServerMessage>();
  private waiters: (() => void)[] = [];

  /** @internal */
  take(m: WorkerMessage): void {
    this.received.push(m);
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  send(kind: ServerMessage["kind"]): void {
    this.outbox.push(create(ServerMessageSchema, { kind }));
  }

  /** Welcomes the worker; sizes left out are sent as 0, as a server that does not tell them. */
  welcome(heartbeatIntervalMs: number, sizes: { maxPayloadBytes?: number; maxMessageBytes?: number } = {}): void {
    this.send({
      case: "welcome",
      value: create(WelcomeSchema, {
        sessionId: "fake",
        heartbeatIntervalMs,
        maxPayloadBytes: BigInt(sizes.maxPayloadBytes ?? 0),
        maxMessageBytes: BigInt(sizes.maxMessageBytes ?? 0),
      }),
    });
  }

  reply(requestId: bigint, result: Reply["result"]): void {
    this.send({ case: "reply", value: create(ReplySchema, { requestId, result }) });
  }

  /** Ends the stream from the server's side. */
  end(): void {
    this.outbox.close();
  }

  /** The first message at index `from` or later that `pred` accepts, waiting for it. */
  async next(pred: (m: WorkerMessage) => boolean, from = 0, what = "a message"): Promise<{ m: WorkerMessage; at: number }> {
    const deadline = Date.now() + PATIENCE_MS;
    for (;;) {
      const at = this.received.findIndex((m, i) => i >= from && pred(m));
      if (at >= 0) return { m: this.received[at]!, at };
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`the worker sent no ${what}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }
}

export class FakeServer {
  readonly streams: FakeStream[] = [];
  private waiters: (() => void)[] = [];
  readonly transport: Transport;

  constructor() {
    this.transport = createRouterTransport(({ service }) => {
      service(WorkerService, {
        connect: (requests) => {
          const s = new FakeStream();
          this.streams.push(s);
          const w = this.waiters;
          this.waiters = [];
          for (const f of w) f();
          void (async () => {
            try {
              for await (const m of requests) s.take(m);
            } catch {
              // The worker went away; the test reads what arrived.
            }
          })();
          return s.outbox;
        },
      });
    });
  }

  /** Stream number `n` (0 for the first connect), waiting for the worker to open it. */
  async stream(n: number): Promise<FakeStream> {
    const deadline = Date.now() + PATIENCE_MS;
    while (this.streams.length <= n) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`the worker did not open stream ${n}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    return this.streams[n]!;
  }
}
