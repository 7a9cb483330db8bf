// Waymark's TypeScript SDK: a Worker that runs durable workflows and their steps, and a Client
// that starts and watches them. Every program finds the server from WAYMARK_SERVER when no
// address is given, defaulting to http://127.0.0.1:7450; TLS, the API key and the namespace
// come from options or WAYMARK_TLS_CA / _CERT / _KEY, WAYMARK_API_KEY and WAYMARK_NAMESPACE. An
// API key goes over plaintext only to a loopback host unless `insecure` (WAYMARK_INSECURE=1).

export { Client } from "./client.js";
export type { ClientOptions, ListOptions, StartAndSendOptions, StartOptions, Started, StartedAndSent, WorkflowPage } from "./client.js";
export type { CallOptions } from "./calls.js";
export type { BulkAction, BulkOutcome, ForkOptions, WorkflowFilter } from "./lifecycle.js";
export type { StreamItem, UpdateOptions } from "./messaging.js";
export type { QueueInfo, QueueLimits, QueueUpdate, Queues } from "./queues.js";
export type { ScheduleDef, ScheduleInfo, ScheduleUpdate, Schedules } from "./schedules.js";
export { Worker, type WorkerOptions } from "./worker/worker.js";
export { WorkflowContext, type Update } from "./worker/context.js";
export { Replayer, type Replayed } from "./worker/replayer.js";
export type { RecordedFailure, RecordedHistory, RecordedStep } from "./recorded.js";
export type { StepAttempt, StepOptions } from "./worker/steps.js";
export { StepHandle, type Awaitable, type RemoteStepOptions } from "./worker/remote.js";
export type { ChildOptions } from "./worker/children.js";
export type { StepCall, StepFn, WorkflowFn } from "./worker/registry.js";
export type { RetryPolicy } from "./retry.js";
export { consoleLogger, silentLogger, type Logger } from "./logger.js";
export { isTerminal } from "./types.js";
export type { EventInfo, Failure, JsonValue, MessageInfo, StepInfo, WorkflowInfo, WorkflowStatus } from "./types.js";
export {
  CancelledError,
  ChildWorkflowError,
  Code,
  ConfigurationError,
  ContinueAsNew,
  DisconnectedError,
  FencedError,
  HistoryEndedError,
  Interruption,
  NonDeterminismError,
  ParkedError,
  PayloadTooLargeError,
  RpcError,
  RunDroppedError,
  SerializationError,
  StepFailedError,
  UnknownWorkflowError,
  WaymarkError,
  WorkflowFailedError,
  WorkflowFailure,
} from "./errors.js";
export { createTransport, defaultServer, type ConnectionOptions } from "./transport.js";
