// A client's messages, events and streams: send to a workflow, read what it was sent, read (and
// wait for) its events, follow its streams, and send it updates (a message whose answer is an
// event). `Client` has these methods (documented there); it hands them to the functions here to
// keep client.ts to one concern.

import { durationFromMs } from "@bufbuild/protobuf/wkt";
import type { JsonValue } from "@bufbuild/protobuf";
import { fromPayload, toPayload } from "./payload.js";
import { toRpcError } from "./errors.js";
import { isUnavailableError, newWorkflowId, repeatable } from "./repeat.js";
import { readAll } from "./pages.js";
import { resendDelayMs } from "./internal/resend.js";
import { sleep } from "./internal/wake.js";
import { eventInfo, messageInfo, type EventInfo, type MessageInfo } from "./types.js";
import { call, rpc, type CallOptions, type WorkflowCalls } from "./calls.js";

export interface StreamItem<T = JsonValue> {
  offset: number;
  value: T;
}

/** `Client.send`. */
export async function send(
  c: WorkflowCalls,
  workflowId: string,
  message: unknown,
  options: CallOptions & { topic?: string; idempotencyKey?: string },
): Promise<{ messageId: string; duplicate: boolean }> {
  const req = {
    workflowId,
    topic: options.topic ?? "",
    message: toPayload(message),
    idempotencyKey: options.idempotencyKey ?? "",
  };
  const r = options.idempotencyKey
    ? await repeatable(c.resendForMs, options, (a) => c.rpc.sendMessage(req, a))
    : await rpc(() => c.rpc.sendMessage(req, call(options)));
  return { messageId: r.messageId, duplicate: r.duplicate };
}

/** `Client.messages`. */
export async function messages(c: WorkflowCalls, workflowId: string, options?: CallOptions): Promise<MessageInfo[]> {
  return readAll(
    c.resendForMs,
    options,
    (pageToken, a) => c.rpc.listMessages({ workflowId, pageToken }, a),
    (r) => r.messages.map(messageInfo),
  );
}

/** `Client.getEvent`. */
export async function getEvent<T>(
  c: WorkflowCalls,
  workflowId: string,
  key: string,
  options: { waitMs?: number; signal?: AbortSignal },
): Promise<T | undefined> {
  const until = options.waitMs !== undefined ? Date.now() + options.waitMs : undefined;
  const r = await repeatable(c.resendForMs, { signal: options.signal }, (a) => {
    // Asked again, it waits only what is left of the caller's wait.
    const wait = until !== undefined ? Math.max(until - Date.now(), 0) : undefined;
    return c.rpc.getEvent(
      { workflowId, key, timeout: wait !== undefined ? durationFromMs(wait) : undefined },
      // Room for the server to answer "not set" itself.
      { signal: a.signal, timeoutMs: wait !== undefined ? wait + 5000 : undefined },
    );
  });
  return r.found ? (fromPayload(r.value) as T) : undefined;
}

/** `Client.updateWorkflow`'s options. */
export interface UpdateOptions {
  /**
   * The same id is the same update: delivered once, answered once, and a call again with it
   * returns the answer (or waits on for it). Made here when not given (a UUID v7), so the call's
   * own resends on UNAVAILABLE are the same update.
   */
  updateId?: string;
  /** How long to wait for the answer (the server's default, 60 000 ms, when not given); more than 0. */
  waitMs?: number;
  signal?: AbortSignal;
}

/** `Client.updateWorkflow`. */
export async function updateWorkflow<T>(
  c: WorkflowCalls,
  workflowId: string,
  name: string,
  args: unknown,
  options: UpdateOptions,
): Promise<T> {
  // Chosen before the first attempt, so a resend is the same update, never a second one.
  const updateId = options.updateId || newWorkflowId();
  const payload = toPayload(args);
  const until = options.waitMs !== undefined ? Date.now() + options.waitMs : undefined;
  let first = true;
  const r = await repeatable(c.resendForMs, { signal: options.signal }, (a) => {
    // Asked again, it waits only what is left of the caller's wait: at least 1 ms, as the server
    // refuses a zero wait, and that still returns an answer given meanwhile. The first attempt
    // sends the caller's own wait, so the server judges it.
    const wait = until === undefined ? undefined : first ? options.waitMs! : Math.max(until - Date.now(), 1);
    first = false;
    return c.rpc.updateWorkflow(
      { workflowId, name, args: payload, updateId, timeout: wait !== undefined ? durationFromMs(wait) : undefined },
      // Room for the server to answer UPDATE_PENDING itself.
      { signal: a.signal, timeoutMs: wait !== undefined ? wait + 5000 : undefined },
    );
  });
  return fromPayload(r.result) as T;
}

/** `Client.events`. */
export async function events(c: WorkflowCalls, workflowId: string, options?: CallOptions): Promise<EventInfo[]> {
  return readAll(
    c.resendForMs,
    options,
    (pageToken, a) => c.rpc.listEvents({ workflowId, pageToken }, a),
    (r) => r.events.map(eventInfo),
  );
}

/** `Client.readStream`. */
export async function* readStream<T>(
  c: WorkflowCalls,
  workflowId: string,
  key: string,
  options: { fromOffset?: number; signal?: AbortSignal },
): AsyncGenerator<StreamItem<T>> {
  let from = options.fromOffset ?? 0;
  let unavailableSince: number | undefined;
  for (let resends = 0; ; ) {
    try {
      const responses = c.rpc.readStream({ workflowId, key, fromOffset: BigInt(from) }, { signal: options.signal });
      for await (const item of responses) {
        unavailableSince = undefined;
        resends = 0;
        from = Number(item.offset) + 1;
        yield { offset: Number(item.offset), value: fromPayload(item.value) as T };
      }
      return;
    } catch (e) {
      if (!isUnavailableError(e)) throw toRpcError(e);
      unavailableSince ??= Date.now();
      const left = unavailableSince + c.resendForMs - Date.now();
      if (left <= 0) throw toRpcError(e);
      resends += 1;
      await sleep(Math.min(resendDelayMs(resends), left), options.signal);
      if (options.signal?.aborted) throw toRpcError(options.signal.reason);
    }
  }
}
