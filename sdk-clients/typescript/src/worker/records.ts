// A run's step records. A local step's record is held back until something could depend on it
// (the next step's function, any request, the completion), so the last steps of a run cost no
// commit of their own and steps finished together are sent together.
//
// What "durable first" must mean: everything that starts after a record was taken waits until
// that record is acknowledged — also when another operation already sent it and is still
// waiting for the answer. Emptying the held list is not enough: with
// `await step(a); await Promise.all([step(c), step(d)])`, c's flush sends a's record and d then
// finds nothing held; d must still wait for a. So every flush chains on the flushes before it,
// and `durable()` is the chain's end.

import { create } from "@bufbuild/protobuf";
import { DurationSchema, type Duration } from "@bufbuild/protobuf/wkt";
import { RecordStepSchema, type RecordStep } from "../gen/waymark/v1/worker_pb.js";
import type { Kind, ReplyResult } from "./conn.js";
import { expect } from "./replies.js";

export class Records {
  private held: RecordStep[] = [];
  /** Settles when every record sent so far is acknowledged (rejects as the first refusal). */
  private acked: Promise<void> = Promise.resolve();

  constructor(
    private readonly workflowId: string,
    private readonly epoch: bigint,
    private readonly send: (kind: Kind) => Promise<ReplyResult>,
  ) {}

  /**
   * Holds back a step's record until the next flush or the completion. `tookMs` is how long the
   * step ran, retries included (for a step whose function this worker ran): the server dates
   * the step's start from it.
   */
  hold(stepId: number, name: string, outcome: RecordStep["outcome"], attempts: number, tookMs?: number): void {
    const duration = tookMs === undefined ? undefined : durationOf(tookMs);
    this.held.push(create(RecordStepSchema, { workflowId: this.workflowId, epoch: this.epoch, stepId, name, outcome, attempts, duration }));
  }

  /**
   * Sends the held records (all at once) and resolves when they and every record taken before
   * them are durable.
   */
  flush(): Promise<void> {
    if (this.held.length > 0) {
      const batch = this.held;
      this.held = [];
      const sent = Promise.all(batch.map((r) => this.send({ case: "recordStep", value: r }))).then((replies) => {
        for (const r of replies) expect(r, "stepRecorded");
      });
      const chained = Promise.all([this.acked, sent]).then(() => undefined);
      // Whoever awaits a flush sees a refusal; a chain nobody awaits (the run ended) must not
      // crash the process as an unhandled rejection.
      chained.catch(() => undefined);
      this.acked = chained;
    }
    return this.acked;
  }

  /** Resolves when every record already sent is durable; sends nothing. */
  durable(): Promise<void> {
    return this.acked;
  }

  /** The records held now, still held. */
  peek(): readonly RecordStep[] {
    return this.held;
  }

  /** Takes the held records out (the completion carries them). */
  take(): RecordStep[] {
    const batch = this.held;
    this.held = [];
    return batch;
  }
}

/**
 * A duration of (fractional) milliseconds, to the nanosecond: whole nanos, as the wire wants
 * (`durationFromMs` would carry a fraction of one). Negative reads as zero.
 */
function durationOf(ms: number): Duration {
  const whole = Math.max(ms, 0);
  const seconds = Math.floor(whole / 1000);
  const nanos = Math.min(Math.round((whole - seconds * 1000) * 1e6), 999_999_999);
  return create(DurationSchema, { seconds: BigInt(seconds), nanos });
}
