// The history cursor on its own, no server and no fake connection: positions in call order, what
// a recorded position replays (output, failure, non-determinism), and the built-in shapes as
// worker.proto lists them. The last tests run WorkflowContext primitives over a history that
// records everything, so they never send a request.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { FailureSchema, StepSchema, WorkflowStatus, type Step } from "../src/gen/waymark/v1/types_pb.js";
import { ChildResultSchema } from "../src/gen/waymark/v1/worker_pb.js";
import { NonDeterminismError, SerializationError, StepFailedError } from "../src/index.js";
import { toPayload } from "../src/payload.js";
import {
  BUILTIN,
  deadlineRecord,
  GET_EVENT_WAIT,
  History,
  liveChildOutcome,
  nowRecord,
  patchRecord,
  RECV_WAIT,
  sleepRecord,
  stepOutcome,
  uuidRecord,
} from "../src/worker/history.js";
import { WorkflowContext } from "../src/worker/context.js";
import { DEFAULT_LIMITS } from "../src/worker/limits.js";
import { Run } from "../src/worker/run.js";
import { dispatch, workerConfig } from "./fakes.js";

/** A recorded step: its JSON output (`null` is recorded JSON null), or a failure when given. */
function rec(stepId: number, name: string, output?: unknown, failure?: { kind: string; message: string }): Step {
  return create(StepSchema, {
    stepId,
    name,
    output: failure || output === undefined ? undefined : toPayload(output),
    failure: failure ? create(FailureSchema, failure) : undefined,
  });
}

const history = (...steps: Step[]) => new History("wf-1", steps);

/** The one message the SDK fails a diverging replay with. */
const diverged = (name: string, at: number, recorded: string) =>
  `workflow "wf-1" called step ${JSON.stringify(name)} at position ${at}, where its history records ${JSON.stringify(recorded)}`;

test("positions are taken in call order, several at once for a two-step wait", () => {
  const h = history();
  assert.deepEqual([h.take(), h.take(2), h.take(), h.position], [0, 1, 3, 4]);
});

test("isReplaying says whether the next position is recorded", () => {
  const h = history(rec(0, "a", 1), rec(1, "b", 2));
  const seen: boolean[] = [];
  for (let i = 0; i < 3; i++) {
    seen.push(h.isReplaying);
    h.take();
  }
  assert.deepEqual(seen, [true, true, false]);
});

test("a recorded output replays as JSON; an absent output is null", () => {
  const h = history(rec(0, "a", { n: [1, "x"] }), create(StepSchema, { stepId: 1, name: "b" }));
  assert.deepEqual(h.at(0, "a"), { kind: "output", value: { n: [1, "x"] } });
  assert.deepEqual(h.json(0, "a"), { n: [1, "x"] });
  assert.equal(h.json(1, "b"), null);
  assert.equal(h.isRecorded(0, "a"), true);
});

test("a recorded failure replays as the StepFailedError it raised, its kind StepFailed when none was recorded", () => {
  const h = history(rec(0, "a", undefined, { kind: "PAYLOAD_TOO_LARGE", message: "too big" }), rec(1, "b", undefined, { kind: "", message: "it broke" }));
  const r = h.at(0, "a");
  assert.equal(r.kind, "failure");
  assert.ok(r.kind === "failure" && r.error instanceof StepFailedError);
  assert.deepEqual([r.error.stepName, r.error.stepMessage, r.error.stepKind, r.error.kind], ["a", "too big", "PAYLOAD_TOO_LARGE", "StepFailed"]);
  assert.throws(() => h.json(1, "b"), (e: unknown) => {
    assert.ok(e instanceof StepFailedError);
    assert.deepEqual([e.message, e.stepKind], ['step "b" failed: it broke', "StepFailed"]);
    return true;
  });
  // Starting a remote step reads no outcome: its failure is raised by the await, not here.
  assert.equal(h.isRecorded(0, "a"), true);
});

test("a position not recorded goes live", () => {
  const h = history(rec(0, "a", 1));
  assert.deepEqual(h.at(1, "a"), { kind: "live" });
  assert.equal(h.json(1, "a"), undefined);
  assert.equal(h.isRecorded(1, "a"), false);
  const decoded = [h.wakeAt(1), h.deadline(1, RECV_WAIT), h.waited(1, RECV_WAIT), h.messageId(1), h.offset(1, false)];
  const more = [h.childId(1), h.childOutcome(1), h.index(1, false), h.nowMs(1), h.uuid(1)];
  assert.deepEqual([...decoded, ...more, h.eventSet(1)], [...Array(10).fill(undefined), false]);
});

test("another name at a recorded position is non-determinism, with the standard message", () => {
  const h = history(rec(0, "a", 1), rec(1, BUILTIN.recv, null), rec(2, "c", undefined, { kind: "", message: "x" }));
  const nonDeterminism = (at: number, name: string, recorded: string) => (e: unknown) => {
    assert.ok(e instanceof NonDeterminismError);
    assert.equal(e.kind, "NonDeterminism");
    assert.equal(e.message, diverged(name, at, recorded));
    return true;
  };
  assert.throws(() => h.at(0, "b"), nonDeterminism(0, "b", "a"));
  assert.throws(() => h.isRecorded(0, "b"), nonDeterminism(0, "b", "a"));
  assert.throws(() => h.wakeAt(0), nonDeterminism(0, BUILTIN.sleep, "a"));
  // A recv outcome where a get_event outcome is called: the built-ins are checked by name too.
  assert.throws(() => h.waited(1, GET_EVENT_WAIT), nonDeterminism(1, BUILTIN.getEvent, BUILTIN.recv));
  // The name is checked before the failure recorded there is raised.
  assert.throws(() => h.json(2, "d"), nonDeterminism(2, "d", "c"));
});

test("a wait recorded null timed out; a recorded outcome carries its field", () => {
  const h = history(
    rec(0, BUILTIN.recvDeadline, { deadline_ms: 1234 }),
    rec(1, BUILTIN.recv, null),
    rec(2, BUILTIN.recv, { message: { hello: "there" } }),
    rec(3, BUILTIN.recv, { message: null }),
    rec(4, BUILTIN.recv, {}),
    rec(5, BUILTIN.getEventDeadline, { deadline_ms: 99 }),
    rec(6, BUILTIN.getEvent, { value: 7 }),
    rec(7, BUILTIN.getEvent, null),
  );
  assert.equal(h.deadline(0, RECV_WAIT), 1234);
  assert.deepEqual(h.waited(1, RECV_WAIT), { timedOut: true });
  assert.deepEqual(h.waited(2, RECV_WAIT), { timedOut: false, value: { hello: "there" } });
  // A message that is JSON null was delivered: it is not a timeout.
  assert.deepEqual(h.waited(3, RECV_WAIT), { timedOut: false, value: null });
  assert.deepEqual(h.waited(4, RECV_WAIT), { timedOut: false, value: null });
  assert.equal(h.deadline(5, GET_EVENT_WAIT), 99);
  assert.deepEqual(h.waited(6, GET_EVENT_WAIT), { timedOut: false, value: 7 });
  assert.deepEqual(h.waited(7, GET_EVENT_WAIT), { timedOut: true });
});

test("the built-in shapes decode; a missing field reads as 0 or empty", () => {
  const h = history(
    rec(0, BUILTIN.sleep, sleepRecord(1_700_000_000_000)),
    rec(1, BUILTIN.recvDeadline, deadlineRecord(42)),
    rec(2, BUILTIN.send, { message_id: "m-1" }),
    rec(3, BUILTIN.setEvent, { key: "k" }),
    rec(4, BUILTIN.writeStream, { offset: 3 }),
    rec(5, BUILTIN.closeStream, { offset: 4 }),
    rec(6, BUILTIN.startChild, { workflow_id: "child-1" }),
    rec(7, BUILTIN.select, { index: 1 }),
    rec(8, BUILTIN.waitAll, { index: 2 }),
    rec(9, BUILTIN.sleep, {}),
    rec(10, BUILTIN.send, { message_id: 5 }),
    rec(11, BUILTIN.now, nowRecord(1_700_000_000_123)),
    rec(12, BUILTIN.uuid, uuidRecord("0b8e4c1e-3f55-4c1a-9d3e-2a7f6d1c9b20")),
    rec(13, BUILTIN.now, {}),
    rec(14, BUILTIN.uuid, { uuid: 7 }),
  );
  assert.equal(h.wakeAt(0), 1_700_000_000_000);
  assert.equal(h.deadline(1, RECV_WAIT), 42);
  assert.equal(h.messageId(2), "m-1");
  assert.equal(h.eventSet(3), true);
  assert.deepEqual([h.offset(4, false), h.offset(5, true)], [3, 4]);
  assert.equal(h.childId(6), "child-1");
  assert.deepEqual([h.index(7, false), h.index(8, true)], [1, 2]);
  assert.deepEqual([h.wakeAt(9), h.messageId(10)], [0, ""]);
  assert.deepEqual([h.nowMs(11), h.uuid(12)], [1_700_000_000_123, "0b8e4c1e-3f55-4c1a-9d3e-2a7f6d1c9b20"]);
  assert.deepEqual([h.nowMs(13), h.uuid(14)], [0, ""]);
  // The shapes are exactly worker.proto's, field names and all.
  assert.deepEqual([nowRecord(5), uuidRecord("u")], [{ now_ms: 5 }, { uuid: "u" }]);
  // A time replayed as a UUID (or the other way round) is another step.
  assert.throws(() => h.uuid(11), NonDeterminismError);
  assert.throws(() => h.nowMs(12), NonDeterminismError);
  // A write replayed as a close (or the other way round) is another step.
  assert.throws(() => h.offset(4, true), NonDeterminismError);
  assert.throws(() => h.index(7, true), NonDeterminismError);
});

test("patched, live: nothing recorded at the next position, so it is taken for the marker", () => {
  const h = history(rec(0, "charge", 1));
  assert.equal(h.take(), 0);
  assert.deepEqual(h.patched("fix"), { kind: "record", stepId: 1 });
  assert.equal(h.position, 2, "the marker's position is taken");
  // The marker is worker.proto's shape, field name and all.
  assert.deepEqual(patchRecord("fix"), { patch_id: "fix" });
});

test("patched over its own marker takes the position; the new branch replays after it", () => {
  const h = history(rec(0, BUILTIN.patch, patchRecord("fix")), rec(1, "ship", 2));
  assert.deepEqual(h.patched("fix"), { kind: "replayed", stepId: 0 });
  assert.equal(h.position, 1);
  assert.deepEqual(h.at(h.take(), "ship"), { kind: "output", value: 2 });
});

test("patched over an old history answers old, takes nothing, and the old branch's step replays there", () => {
  const h = history(rec(0, "ship", 2));
  assert.deepEqual(h.patched("fix"), { kind: "old" });
  // Asked again (another patch, or the same one twice), still nothing taken.
  assert.deepEqual(h.patched("fix"), { kind: "old" });
  assert.equal(h.position, 0, "nothing taken");
  assert.deepEqual(h.at(h.take(), "ship"), { kind: "output", value: 2 });
  // A recorded failure there is another step's too.
  const failed = history(rec(0, "ship", undefined, { kind: "", message: "no" }));
  assert.deepEqual([failed.patched("fix"), failed.position], [{ kind: "old" }, 0]);
});

test("patched over another patch's marker is old; that patch's own call then takes the position", () => {
  const h = history(rec(0, BUILTIN.patch, patchRecord("older")), rec(1, "b", 1));
  assert.deepEqual(h.patched("newer"), { kind: "old" });
  assert.equal(h.position, 0);
  assert.deepEqual(h.patched("older"), { kind: "replayed", stepId: 0 });
  assert.equal(h.position, 1);
  // Past the marker, the next step is not a marker: "newer" is old there too.
  assert.deepEqual(h.patched("newer"), { kind: "old" });
});

test("a patch marker without its patch_id string is a malformed history, not another patch", () => {
  const malformed = [{}, { patch_id: 7 }, null, "fix", ["fix"], { id: "fix" }];
  for (const output of malformed) {
    const h = history(rec(0, BUILTIN.patch, output));
    assert.throws(() => h.patched("fix"), (e: unknown) => {
      assert.ok(e instanceof SerializationError, `${JSON.stringify(output)}: ${String(e)}`);
      assert.match(e.message, /malformed waymark\.patch record at position 0/);
      return true;
    });
    assert.equal(h.position, 0, "nothing taken");
  }
  // A marker recorded as a failure has no patch_id either.
  const failed = history(rec(0, BUILTIN.patch, undefined, { kind: "", message: "x" }));
  assert.throws(() => failed.patched("fix"), SerializationError);
});

test("await_child records decode, and a live child result decodes as its record would", () => {
  const success = { status: "SUCCESS", output: { a: 1 } };
  const failed = { status: "ERROR", failure: { kind: "Boom", message: "it broke" } };
  const h = history(rec(0, BUILTIN.awaitChild, success), rec(1, BUILTIN.awaitChild, failed), rec(2, BUILTIN.awaitChild, { status: "SUCCESS" }));
  const none = { kind: "", message: "" };
  assert.deepEqual(h.childOutcome(0), { status: "SUCCESS", output: { a: 1 }, failure: none });
  assert.deepEqual(h.childOutcome(1), { status: "ERROR", output: null, failure: { kind: "Boom", message: "it broke" } });
  assert.deepEqual(h.childOutcome(2), { status: "SUCCESS", output: null, failure: none });
  const live = (r: MessageInitShape<typeof ChildResultSchema>) => liveChildOutcome(create(ChildResultSchema, r));
  assert.deepEqual(live({ status: WorkflowStatus.SUCCESS, output: toPayload({ a: 1 }) }), h.childOutcome(0));
  assert.deepEqual(live({ status: WorkflowStatus.ERROR, failure: create(FailureSchema, failed.failure) }), h.childOutcome(1));
  assert.equal(live({ status: WorkflowStatus.CANCELLED }).status, "CANCELLED");
});

test("a remote step's live outcome reads as its record would", () => {
  assert.deepEqual(stepOutcome("r", { output: toPayload([1, 2]) }), [1, 2]);
  assert.equal(stepOutcome("r", {}), null);
  assert.throws(() => stepOutcome("r", { failure: create(FailureSchema, { kind: "", message: "no" }) }), {
    name: "StepFailedError",
    message: 'step "r" failed: no',
    stepKind: "StepFailed",
  });
});

test("the built-in step names are the ones worker.proto lists", () => {
  const here = dirname(fileURLToPath(import.meta.url));
  const proto = readFileSync(resolve(here, "../../../../proto/waymark/v1/worker.proto"), "utf8");
  const block = proto.slice(proto.indexOf("Recorded steps of the built-in operations"), proto.indexOf("service WorkerService"));
  const listed = new Set(block.match(/waymark\.[a-z_]+(\.[a-z_]+)*/g));
  assert.ok(listed.size >= 13, `the list in worker.proto was not found (${listed.size} names)`);
  assert.deepEqual([...new Set(Object.values(BUILTIN))].sort(), [...listed].sort());
});

/** A run whose history records `steps`; it has no connection, so anything it sends fails the test. */
function replayingContext(steps: Step[]): WorkflowContext {
  const d = dispatch("wf");
  d.steps = steps;
  const noServer = {
    limits: { ...DEFAULT_LIMITS },
    request: () => assert.fail("a fully recorded replay sends nothing"),
  };
  return new WorkflowContext(new Run(d, noServer, workerConfig({})));
}

test("primitives started together take their positions in call order", async () => {
  const recorded = [
    rec(0, BUILTIN.recvDeadline, deadlineRecord(1)),
    rec(1, BUILTIN.recv, { message: "m" }),
    rec(2, "b", 5),
    rec(3, BUILTIN.send, { message_id: "id-3" }),
    rec(4, "c", 6),
  ];
  const ctx = replayingContext(recorded);
  const ran: string[] = [];
  // recv takes two positions when called, so b is at 2 even though recv resolves later.
  const got = await Promise.all([
    ctx.recv("t"),
    ctx.step("b", () => ran.push("b")),
    ctx.send("other", 1),
    ctx.step("c", () => ran.push("c")),
  ]);
  assert.deepEqual(got, ["m", 5, "id-3", 6]);
  assert.deepEqual(ran, [], "a recorded step's function does not run");
  assert.equal(ctx.isReplaying, false);

  // Called the other way round, the same history diverges at the first position.
  const swapped = replayingContext(recorded);
  const [first, second] = await Promise.allSettled([swapped.step("b", () => 0), swapped.recv("t")]);
  assert.equal(first.status, "rejected");
  assert.ok(first.status === "rejected" && first.reason instanceof NonDeterminismError);
  assert.equal(first.reason.message, diverged("b", 0, BUILTIN.recvDeadline));
  assert.ok(second.status === "rejected" && second.reason instanceof NonDeterminismError);
});

test("a replayed step failure and a timed-out wait reach the workflow as they did live", async () => {
  const ctx = replayingContext([
    rec(0, "a", undefined, { kind: "", message: "it broke" }),
    rec(1, BUILTIN.getEventDeadline, deadlineRecord(1)),
    rec(2, BUILTIN.getEvent, null),
    rec(3, BUILTIN.sleep, sleepRecord(0)),
  ]);
  await assert.rejects(ctx.step("a", () => 1), { name: "StepFailedError", message: 'step "a" failed: it broke' });
  assert.equal(await ctx.getEvent("other", "k", { timeoutMs: 5 }), undefined);
  await ctx.sleep(60_000);
});

test("now() and uuid() replay the recorded time and UUID, in call order, drawing nothing", async () => {
  const id = "0b8e4c1e-3f55-4c1a-9d3e-2a7f6d1c9b20";
  const recorded = [
    rec(0, BUILTIN.now, nowRecord(1_700_000_000_123)),
    rec(1, "b", 5),
    rec(2, BUILTIN.uuid, uuidRecord(id)),
    rec(3, BUILTIN.now, nowRecord(1_700_000_000_456)),
  ];
  const ctx = replayingContext(recorded);
  // Positions are taken when called: the second now() is at 3 though all four resolve together.
  const [t0, b, u, t1] = await Promise.all([ctx.now(), ctx.step("b", () => -1), ctx.uuid(), ctx.now()]);
  assert.ok(t0 instanceof Date && t1 instanceof Date);
  assert.deepEqual([t0.getTime(), b, u, t1.getTime()], [1_700_000_000_123, 5, id, 1_700_000_000_456]);
  assert.equal(ctx.isReplaying, false);

  // The same history read again gives the same values: a replay is a replay.
  const again = replayingContext(recorded);
  assert.equal((await again.now()).getTime(), t0.getTime());
});

test("now() or uuid() where the history records another step is non-determinism", async () => {
  const recorded = [rec(0, BUILTIN.now, nowRecord(1)), rec(1, "b", 5)];
  const swapped = replayingContext(recorded);
  // uuid() where now() was called, then now() where step b was: each with the standard message.
  const [first, second] = await Promise.allSettled([swapped.uuid(), swapped.now()]);
  assert.ok(first.status === "rejected" && first.reason instanceof NonDeterminismError);
  assert.equal(first.reason.message, diverged(BUILTIN.uuid, 0, BUILTIN.now));
  assert.ok(second.status === "rejected" && second.reason instanceof NonDeterminismError);
  assert.equal(second.reason.message, diverged(BUILTIN.now, 1, "b"));

  // A step called where now() was recorded diverges the same way.
  const stepFirst = replayingContext(recorded);
  await assert.rejects(stepFirst.step("a", () => 0), { name: "NonDeterminismError", message: diverged("a", 0, BUILTIN.now) });
});
