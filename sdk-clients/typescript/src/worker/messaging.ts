// Writes a workflow makes that others read: messages to other workflows, events, and streams.
// The server records each as this workflow's step in the same transaction as the write, so a
// replay never writes twice.

import { create } from "@bufbuild/protobuf";
import { SendMessageStepSchema, SetEventSchema, WriteStreamSchema } from "../gen/waymark/v1/worker_pb.js";
import type { Payload } from "../gen/waymark/v1/types_pb.js";
import { toPayload } from "../payload.js";
import type { Run } from "./run.js";
import { expect } from "./replies.js";
import { numberField, stringField } from "./waits.js";

const SEND_STEP = "waymark.send";
const SET_EVENT_STEP = "waymark.set_event";
const WRITE_STREAM_STEP = "waymark.write_stream";
const CLOSE_STREAM_STEP = "waymark.close_stream";

export async function send(run: Run, stepId: number, destination: string, topic: string, message: unknown): Promise<string> {
  const recorded = run.recordedJson(stepId, SEND_STEP);
  if (recorded !== undefined) return stringField(recorded, "message_id");
  run.checkCancelled();
  const req = create(SendMessageStepSchema, {
    workflowId: run.workflowId,
    epoch: run.epoch,
    stepId,
    destinationId: destination,
    topic,
    message: toPayload(message),
  });
  return expect(await run.request({ case: "sendMessage", value: req }), "messageSent").messageId;
}

export async function setEvent(run: Run, stepId: number, key: string, value: unknown): Promise<void> {
  if (run.recordedJson(stepId, SET_EVENT_STEP) !== undefined) return;
  run.checkCancelled();
  const req = create(SetEventSchema, { workflowId: run.workflowId, epoch: run.epoch, stepId, key, value: toPayload(value) });
  expect(await run.request({ case: "setEvent", value: req }), "stepRecorded");
}

/** Appends `value` to stream `key`, or closes it when `value` is undefined; returns the offset. */
export async function streamStep(run: Run, stepId: number, key: string, value: Payload | undefined): Promise<number> {
  const name = value ? WRITE_STREAM_STEP : CLOSE_STREAM_STEP;
  const recorded = run.recordedJson(stepId, name);
  if (recorded !== undefined) return numberField(recorded, "offset");
  run.checkCancelled();
  const req = create(WriteStreamSchema, { workflowId: run.workflowId, epoch: run.epoch, stepId, key, value, close: !value });
  return Number(expect(await run.request({ case: "writeStream", value: req }), "streamWritten").offset);
}
