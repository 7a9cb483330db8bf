// A workflow's recorded history as JSON: what `waymark workflow export ID` prints, what
// `Client.history` returns, what a `Replayer` replays, and the `history` of the project's golden
// files (contract/histories/). The keys are snake_case as in those files, so a history saved
// with JSON.stringify replays in every SDK, and one exported by any of them replays here.

import type { JsonValue } from "@bufbuild/protobuf";
import type { StepInfo } from "./types.js";

/** How a recorded step failed. */
export interface RecordedFailure {
  kind: string;
  message: string;
}

/** One recorded step: its position, its name, and its output or its failure. */
export interface RecordedStep {
  step_id: number;
  name: string;
  /** The step's JSON output; a step recorded with neither output nor failure read as `null`. */
  output?: JsonValue;
  failure?: RecordedFailure;
}

/** A workflow's history: what it was started with and the steps it recorded. */
export interface RecordedHistory {
  /** Default "replay". */
  workflow_id?: string;
  workflow_name: string;
  /** Default `null`. */
  input?: JsonValue;
  /** Default none. */
  steps?: RecordedStep[];
}

/**
 * A step as the client lists it, in the recorded form: a failure, or else an output (`null`
 * included: a wait that timed out records a null output, which must stay in the file).
 */
export function recordedStep(s: StepInfo): RecordedStep {
  if (s.failure) return { step_id: s.stepId, name: s.name, failure: { kind: s.failure.kind, message: s.failure.message } };
  return { step_id: s.stepId, name: s.name, output: s.output ?? null };
}
