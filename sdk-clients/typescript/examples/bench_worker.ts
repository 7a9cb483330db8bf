// The `make bench` worker: registers workflow "bench", whose input is {"steps": K}; it runs K
// trivial checkpointed steps and returns K. It serves the queue in WAYMARK_QUEUE with
// WAYMARK_CAPACITY workflows at once, against WAYMARK_SERVER (waymark-bench's polyglot
// workload starts it and measures steps per second next to the Rust worker's).
import { Worker, WorkflowFailure } from "../src/index.js";

const worker = new Worker({
  appName: "waymark-bench",
  appVersion: "bench-1",
  queues: [process.env.WAYMARK_QUEUE ?? "default"],
  maxConcurrentWorkflows: Number(process.env.WAYMARK_CAPACITY ?? "1000"),
});

worker.workflow("bench", async (ctx, input: { steps: number }) => {
  for (let i = 0; i < input.steps; i++) {
    const got = await ctx.step(`s${i}`, async () => i);
    if (got !== i) throw new WorkflowFailure("WrongReplay", `step ${i} replayed as ${got}`);
  }
  return input.steps;
});

const stop = new AbortController();
process.on("SIGTERM", () => stop.abort());
await worker.run({ signal: stop.signal });
