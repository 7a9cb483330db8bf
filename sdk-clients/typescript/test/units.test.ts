// Pure pieces, no server: JSON payloads, retry backoff, reconnect backoff, error decoding.

import { test } from "node:test";
import assert from "node:assert/strict";
import { create, toBinary } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";
import { fromPayload, toJsonValue, toPayload } from "../src/payload.js";
import { retryDelayMs, maxAttempts } from "../src/retry.js";
import { backoffMs } from "../src/worker/worker.js";
import { toRpcError } from "../src/errors.js";
import { Code, RpcError } from "../src/index.js";
import { PayloadSchema } from "../src/gen/waymark/v1/types_pb.js";

test("payloads carry JSON, normalized as a replay reads it", () => {
  for (const v of [null, 1, "s", true, [1, "a"], { a: { b: [null] } }]) assert.deepEqual(fromPayload(toPayload(v)), v);
  assert.equal(fromPayload(toPayload(undefined)), null);
  assert.equal(fromPayload(undefined), null);
  assert.equal(fromPayload(create(PayloadSchema)), null);
  assert.deepEqual(toJsonValue({ at: new Date(0), gone: undefined }), { at: "1970-01-01T00:00:00.000Z" });
  assert.throws(() => toJsonValue({ n: 1n }), { name: "SerializationError" });
  assert.throws(() => fromPayload(create(PayloadSchema, { content: { case: "binary", value: new Uint8Array([1]) }, encoding: "msgpack" })), {
    name: "SerializationError",
  });
});

test("step retry backoff grows and is capped; attempts default to one", () => {
  const p = { maxAttempts: 5, initialIntervalMs: 100, backoffCoefficient: 2, maxIntervalMs: 350 };
  assert.deepEqual([1, 2, 3, 60].map((n) => retryDelayMs(p, n)), [100, 200, 350, 350]);
  assert.equal(maxAttempts(undefined), 1);
  assert.equal(maxAttempts({ maxAttempts: 0 }), 1);
});

test("reconnect backoff: 50 ms doubling to 5 s, jittered down to half", () => {
  for (let i = 0; i < 50; i++) {
    const first = backoffMs(0);
    assert.ok(first >= 25 && first <= 50);
    const late = backoffMs(20);
    assert.ok(late >= 2500 && late <= 5000);
  }
});

test("an ErrorInfo detail becomes the error's reason and metadata", () => {
  // google.rpc.ErrorInfo{reason: "DEDUP_ID_TAKEN", domain: "waymark.dev", metadata: {holder_workflow_id: "w1"}}
  const entry = [...bytes(1, "holder_workflow_id"), ...bytes(2, "w1")];
  const info = new Uint8Array([...bytes(1, "DEDUP_ID_TAKEN"), ...bytes(2, "waymark.dev"), 0x1a, entry.length, ...entry]);
  const ce = new ConnectError("taken", Code.AlreadyExists, undefined, [{ type: "google.rpc.ErrorInfo", value: info } as never]);
  const e = toRpcError(ce);
  assert.ok(e instanceof RpcError);
  assert.deepEqual([e.code, e.reason, e.metadata], [Code.AlreadyExists, "DEDUP_ID_TAKEN", { holder_workflow_id: "w1" }]);
  const plain = toRpcError(new ConnectError("down", Code.Unavailable));
  assert.ok(plain instanceof RpcError && plain.reason === "UNAVAILABLE");
  assert.ok(toBinary(PayloadSchema, toPayload(1)).length > 0);
});

function bytes(field: number, s: string): number[] {
  const b = [...Buffer.from(s)];
  return [(field << 3) | 2, b.length, ...b];
}
