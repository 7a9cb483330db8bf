// JSON values to and from the wire's `Payload`. JSON is the one encoding every SDK reads, carried
// as a google.protobuf.Value so grpcurl shows it inline.

import { create, fromJson, toJson, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { PayloadSchema, type Payload } from "./gen/waymark/v1/types_pb.js";
import { SerializationError } from "./errors.js";

/**
 * A value as the JSON text it travels as: `undefined` (and a lone function) is `null`, dates
 * become strings, functions in objects vanish.
 */
export function jsonText(value: unknown): string {
  if (value === undefined) return "null";
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (e) {
    throw new SerializationError(`value is not JSON-serializable: ${(e as Error).message}`);
  }
  return text ?? "null";
}

/**
 * Normalizes any value to plain JSON, as it will read back on replay or on another language's
 * side.
 */
export function toJsonValue(value: unknown): JsonValue {
  return JSON.parse(jsonText(value)) as JsonValue;
}

/** Wraps a value that is plain JSON already as a payload. */
export function payloadOf(json: JsonValue): Payload {
  return create(PayloadSchema, { content: { case: "json", value: fromJson(ValueSchema, json) } });
}

/** Wraps a value as a JSON payload. */
export function toPayload(value: unknown): Payload {
  return payloadOf(toJsonValue(value));
}

/** Reads a payload as JSON; an absent or empty payload is `null`. */
export function fromPayload(payload: Payload | undefined): JsonValue {
  if (payload === undefined) return null;
  switch (payload.content.case) {
    case "json":
      return toJson(ValueSchema, payload.content.value);
    case undefined:
      return null;
    case "binary":
      throw new SerializationError(
        `payload is encoded as ${JSON.stringify(payload.encoding)}, not JSON; this SDK reads JSON only`,
      );
  }
}
