// The sizes the server takes, told in its Welcome: the largest JSON payload and the largest
// message a worker may send. The worker checks them before sending. A value over the limit
// fails what made it (the step, the workflow, the ctx call) with PAYLOAD_TOO_LARGE; sent
// anyway, the server would refuse it or end the stream, and a stream ended over a workflow's
// message gets that workflow dispatched again to hit the same wall, over and over.

import { create, toBinary } from "@bufbuild/protobuf";
import { FailureSchema, PayloadSchema, type Failure, type Payload } from "../gen/waymark/v1/types_pb.js";
import { WorkerMessageSchema, type Welcome } from "../gen/waymark/v1/worker_pb.js";
import { PayloadTooLargeError } from "../errors.js";
import { jsonText, payloadOf } from "../payload.js";
import type { Kind } from "./conn.js";

const MiB = 1024 * 1024;

export interface Limits {
  /** The largest payload, in UTF-8 bytes of its JSON text. */
  maxPayloadBytes: number;
  /** The largest message the worker may send, in bytes of its encoding. */
  maxMessageBytes: number;
}

/** The server's defaults: what a server too old to say (it sends 0) takes. */
export const DEFAULT_LIMITS: Readonly<Limits> = { maxPayloadBytes: 4 * MiB, maxMessageBytes: 9 * MiB };

export function limitsFrom(w: Welcome): Limits {
  return {
    maxPayloadBytes: Number(w.maxPayloadBytes) || DEFAULT_LIMITS.maxPayloadBytes,
    maxMessageBytes: Number(w.maxMessageBytes) || DEFAULT_LIMITS.maxMessageBytes,
  };
}

/** Room in a message for what it carries besides its one payload: ids and names (256 characters at most). */
const ENVELOPE_BYTES = 16 * 1024;

/**
 * The longest failure message sent, in UTF-8 bytes. A thrown error's message is the program's
 * (it may quote a whole response body); the server does not bound it, so a message sent whole
 * could push a record or a completion over the message limit.
 */
export const MAX_FAILURE_MESSAGE_BYTES = 64 * 1024;

/** `message` cut to MAX_FAILURE_MESSAGE_BYTES, saying so. */
export function boundedMessage(message: string): string {
  const bytes = Buffer.byteLength(message, "utf8");
  if (bytes <= MAX_FAILURE_MESSAGE_BYTES) return message;
  const note = ` … (cut: ${bytes} bytes in all)`;
  const keep = Buffer.from(message, "utf8").subarray(0, MAX_FAILURE_MESSAGE_BYTES - Buffer.byteLength(note));
  // A character cut in half decodes as U+FFFD: drop it rather than record a broken character.
  return keep.toString("utf8").replace(/\uFFFD+$/, "") + note;
}

/** A failure as sent: its message bounded, so no record or completion outgrows a message. */
export function failure(kind: string, message: string): Failure {
  return create(FailureSchema, { kind, message: boundedMessage(message) });
}

/** The size of the worker message carrying `kind`, encoded (its request id at the largest). */
export function messageBytes(kind: Kind): number {
  return toBinary(WorkerMessageSchema, create(WorkerMessageSchema, { requestId: 2n ** 64n - 1n, kind })).length;
}

/**
 * `value` as the payload of `what` (e.g. "the output of step \"fetch\""), or PayloadTooLargeError
 * when the server would not take it. Two sizes count: the JSON text (the server's payload
 * limit), and the encoding, which for arrays of small numbers runs to five times the text and
 * must leave the message it travels in under the message limit.
 */
export function checkedPayload(what: string, value: unknown, limits: Limits): Payload {
  const text = jsonText(value);
  const bytes = Buffer.byteLength(text, "utf8");
  if (bytes > limits.maxPayloadBytes) {
    throw new PayloadTooLargeError(`${what} is ${bytes} bytes of JSON; the server takes at most ${limits.maxPayloadBytes}`);
  }
  const payload = payloadOf(JSON.parse(text));
  const encoded = toBinary(PayloadSchema, payload).length;
  const room = limits.maxMessageBytes - ENVELOPE_BYTES;
  if (encoded > room) {
    throw new PayloadTooLargeError(
      `${what} is ${bytes} bytes of JSON but ${encoded} bytes encoded; a worker message may carry at most ${room}`,
    );
  }
  return payload;
}
