// The runs a worker holds on one stream, and how many dispatches it has taken off that stream:
// what every heartbeat reports, so the server puts back in its queue at once a workflow this
// worker lost track of (instead of leaving it PENDING on a healthy worker).

import { create } from "@bufbuild/protobuf";
import { HeartbeatSchema, type Heartbeat } from "../gen/waymark/v1/worker_pb.js";
import type { Run } from "./run.js";
import { messageBytes } from "./limits.js";

/** The most ids one heartbeat may list (the contract's limit). */
const MAX_LISTED = 100_000;
/** What one listed id may take in a heartbeat: 256 characters of UTF-8 and its framing. */
const ID_BYTES_AT_MOST = 256 * 4 + 4;

export class HeldRuns {
  private readonly runs = new Map<string, Run>();
  private dispatches = 0n;

  /**
   * Takes a dispatch off the stream: counted and held in one synchronous step, so no heartbeat
   * counts a dispatch it does not list. Returns the run it replaces (an earlier dispatch of the
   * same workflow), if any.
   */
  take(run: Run): Run | undefined {
    const earlier = this.runs.get(run.workflowId);
    this.dispatches += 1n;
    this.runs.set(run.workflowId, run);
    return earlier;
  }

  get(workflowId: string): Run | undefined {
    return this.runs.get(workflowId);
  }

  /** Lets go of `run`; false when it was no longer held (replaced, released or lost before). */
  release(run: Run): boolean {
    if (this.runs.get(run.workflowId) !== run) return false;
    this.runs.delete(run.workflowId);
    return true;
  }

  /** Lets go of every run, returning them (the stream ended). */
  releaseAll(): Run[] {
    const all = [...this.runs.values()];
    this.runs.clear();
    return all;
  }

  /** The heartbeat to send now, in a message of at most `maxMessageBytes`. */
  heartbeat(maxMessageBytes: number): Heartbeat {
    // Past the contract's limit the list would be refused: report nothing rather than a part,
    // which would make the server take back workflows this worker holds.
    if (this.runs.size > MAX_LISTED) return create(HeartbeatSchema);
    const listed = create(HeartbeatSchema, {
      reportsHeld: true,
      heldWorkflowIds: [...this.runs.keys()],
      dispatchesReceived: this.dispatches,
    });
    // Too long a list may end the stream: report nothing then too. Measured only when the ids
    // could add up to that (256 characters of up to 4 bytes each, and their framing).
    const couldBeTooLong = this.runs.size * ID_BYTES_AT_MOST + 64 > maxMessageBytes;
    if (couldBeTooLong && messageBytes({ case: "heartbeat", value: listed }) > maxMessageBytes) return create(HeartbeatSchema);
    return listed;
  }
}
