// JSON values to and from the wire's `Payload`. JSON is the one encoding every SDK reads, carried
// as a google.protobuf.Value so grpcurl shows it inline.

import { create, fromJson, toJson, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { PayloadSchema, type Payload } from "./gen/waymark/v1/types_pb.js";
import { SerializationError } from "./errors.js";

/**
 * Normalizes any value to plain JSON, as it will read back on replay or on another language's
 * side: `undefined` becomes `null`, dates become strings, functions vanish.
 */
export function toJsonValue(value: unknown): JsonValue {
  if (value === undefined) return null;
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (e) {
    throw new SerializationError(`value is not JSON-serializable: ${(e as Error).message}`);
  }
  return text === undefined ? null : (JSON.parse(text) as JsonValue);
}

/** Wraps a value as a JSON payload. */
export function toPayload(value: unknown): Payload {
  return create(PayloadSchema, {
    content: { case: "json", value: fromJson(ValueSchema, toJsonValue(value)) },
  });
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
