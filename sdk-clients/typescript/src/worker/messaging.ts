// Writes a workflow makes that others read: messages to other workflows, events, and streams.
// The server records each as this workflow's step in the same transaction as the write, so a
// replay never writes twice.

import { create } from "@bufbuild/protobuf";
import { SendMessageStepSchema, SetEventSchema, WriteStreamSchema } from "../gen/waymark/v1/worker_pb.js";
import type { Run } from "./run.js";
import { expect } from "./replies.js";

export async function send(run: Run, stepId: number, destination: string, topic: string, message: unknown): Promise<string> {
  const recorded = run.history.messageId(stepId);
  if (recorded !== undefined) return recorded;
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
  if (run.history.eventSet(stepId)) return;
  run.checkCancelled();
  const payload = run.payload(`the value of event ${JSON.stringify(key)}`, value);
  const req = create(SetEventSchema, { workflowId: run.workflowId, epoch: run.epoch, stepId, key, value: payload });
  expect(await run.request({ case: "setEvent", value: req }), "stepRecorded");
}

/** Appends `value` to stream `key`, or closes it when `close`; returns the offset. */
export async function streamStep(run: Run, stepId: number, key: string, value: unknown, close: boolean): Promise<number> {
  const recorded = run.history.offset(stepId, close);
  if (recorded !== undefined) return recorded;
  run.checkCancelled();
  const payload = close ? undefined : run.payload(`the value written to stream ${JSON.stringify(key)}`, value);
  const req = create(WriteStreamSchema, { workflowId: run.workflowId, epoch: run.epoch, stepId, key, value: payload, close });
  return Number(expect(await run.request({ case: "writeStream", value: req }), "streamWritten").offset);
}
