// Writes a workflow makes that others read: messages to other workflows, events, and streams.
// The server records each as this workflow's step in the same transaction as the write, so a
// replay never writes twice.

import { create } from "@bufbuild/protobuf";
import { SendMessageStepSchema, SetEventSchema, WriteStreamSchema } from "../gen/waymark/v1/worker_pb.js";
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
    message: run.payload(`the message to workflow ${JSON.stringify(destination)}`, message),
  });
  return expect(await run.request({ case: "sendMessage", value: req }), "messageSent").messageId;
}

export async function setEvent(run: Run, stepId: number, key: string, value: unknown): Promise<void> {
  if (run.recordedJson(stepId, SET_EVENT_STEP) !== undefined) return;
  run.checkCancelled();
  const payload = run.payload(`the value of event ${JSON.stringify(key)}`, value);
  const req = create(SetEventSchema, { workflowId: run.workflowId, epoch: run.epoch, stepId, key, value: payload });
  expect(await run.request({ case: "setEvent", value: req }), "stepRecorded");
}

/** Appends `value` to stream `key`, or closes it when `close`; returns the offset. */
export async function streamStep(run: Run, stepId: number, key: string, value: unknown, close: boolean): Promise<number> {
  const name = close ? CLOSE_STREAM_STEP : WRITE_STREAM_STEP;
  const recorded = run.recordedJson(stepId, name);
  if (recorded !== undefined) return numberField(recorded, "offset");
  run.checkCancelled();
  const payload = close ? undefined : run.payload(`the value written to stream ${JSON.stringify(key)}`, value);
  const req = create(WriteStreamSchema, { workflowId: run.workflowId, epoch: run.epoch, stepId, key, value: payload, close });
  return Number(expect(await run.request({ case: "writeStream", value: req }), "streamWritten").offset);
}
