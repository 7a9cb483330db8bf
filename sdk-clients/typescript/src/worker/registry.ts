// What a worker runs, and the options it runs with, shared by its sessions.

import type { JsonValue } from "@bufbuild/protobuf";
import type { Logger } from "../logger.js";
import type { WorkflowContext } from "./context.js";

/** A workflow function: plain async code; its input and output travel as JSON. */
export type WorkflowFn<I = any, O = unknown> = (ctx: WorkflowContext, input: I) => Promise<O>;

/** What a remote step function gets besides its input. */
export interface StepCall {
  /** The calling workflow and the position its result is recorded at. */
  workflowId: string;
  stepId: number;
  /** 1 for the first attempt. */
  attempt: number;
  /** Aborted when the attempt's deadline passes (its result would be refused) or the stream breaks. */
  signal: AbortSignal;
}

/** A remote step: any workflow in any language calls it by name; its input and output are JSON. */
export type StepFn<I = any, O = unknown> = (input: I, call: StepCall) => Promise<O> | O;

export interface WorkerConfig {
  workerId: string;
  appName: string;
  appVersion: string;
  queues: string[];
  maxConcurrentWorkflows: number;
  maxConcurrentSteps: number;
  /** Waits longer than this (ms) park the workflow; null keeps every waiting workflow in memory. */
  parkAfterMs: number | null;
  /** How long a request the server answers UNAVAILABLE is sent again before its run is dropped. */
  resendForMs: number;
  workflows: Map<string, WorkflowFn>;
  steps: Map<string, StepFn>;
  logger: Logger;
}

export type { JsonValue };
