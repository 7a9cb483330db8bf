// The sending half of one worker stream, shared by every workflow running on it: request/reply
// correlation by request id. When the stream ends every pending request fails with
// DisconnectedError, and so does every later one.

import { create } from "@bufbuild/protobuf";
import { WorkerMessageSchema, type Reply, type WorkerMessage } from "../gen/waymark/v1/worker_pb.js";
import { DisconnectedError } from "../errors.js";
import type { Outbox } from "../internal/outbox.js";
import { DEFAULT_LIMITS, type Limits } from "./limits.js";

export type Kind = WorkerMessage["kind"];
export type ReplyResult = Reply["result"];

/**
 * What a run needs from the stream: send a request, get its reply. A broken stream rejects
 * with DisconnectedError. (Tests put a fake here to answer as they please.)
 */
export interface Requests {
  request(kind: Kind): Promise<ReplyResult>;
  /** The sizes the server takes on this stream. */
  readonly limits: Limits;
}

export class Conn implements Requests {
  /** The server's until its Welcome says otherwise. */
  limits: Limits = { ...DEFAULT_LIMITS };
  private nextId = 0n;
  private readonly pending = new Map<bigint, { resolve: (r: ReplyResult) => void; reject: (e: Error) => void }>();
  private closed = false;

  constructor(private readonly outbox: Outbox<WorkerMessage>) {}

  /** Sends a request and resolves with the server's reply. */
  request(kind: Kind): Promise<ReplyResult> {
    if (this.closed) return Promise.reject(new DisconnectedError());
    const requestId = ++this.nextId;
    return new Promise((resolve, reject) => {
      this.pending.set(requestId, { resolve, reject });
      if (!this.outbox.push(create(WorkerMessageSchema, { requestId, kind }))) {
        this.pending.delete(requestId);
        reject(new DisconnectedError());
      }
    });
  }

  /** Sends a message that gets no reply (credit, heartbeat). */
  send(kind: Kind): boolean {
    return !this.closed && this.outbox.push(create(WorkerMessageSchema, { requestId: 0n, kind }));
  }

  resolve(reply: Reply): void {
    const p = this.pending.get(reply.requestId);
    if (p) {
      this.pending.delete(reply.requestId);
      p.resolve(reply.result);
    }
  }

  /** The stream ended: fail what waits for an answer, and everything asked from now on. */
  close(): void {
    this.closed = true;
    this.outbox.close();
    const err = new DisconnectedError();
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
  }
}
