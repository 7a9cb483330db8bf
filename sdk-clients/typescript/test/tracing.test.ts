// OpenTelemetry tracing (contract/tracing.md) without a server: an in-memory span exporter, a
// fake connection answering a run's requests, the fake worker stream, and Connect's in-process
// router standing in for the client's server.

import { test, beforeEach } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { createRouterTransport } from "@connectrpc/connect";
import { context, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import {
  CallResultSchema,
  ChildResultSchema,
  ChildStartedSchema,
  DispatchStepSchema,
  EventResultSchema,
  RecvResultSchema,
  RecvResult_Outcome,
  SelectedSchema,
  StepRecordedSchema,
  type CallStep,
  type CompleteWorkflow,
  type DispatchWorkflow,
  type StartChild,
} from "../src/gen/waymark/v1/worker_pb.js";
import { StepSchema, TraceContextSchema, WorkflowSchema, WorkflowStatus } from "../src/gen/waymark/v1/types_pb.js";
import { WorkflowService } from "../src/gen/waymark/v1/workflow_pb.js";
import { Client, Worker, silentLogger, type WorkflowFn } from "../src/index.js";
import { toPayload } from "../src/payload.js";
import type { Kind, ReplyResult } from "../src/worker/conn.js";
import { Run } from "../src/worker/run.js";
import { setTracingApiForTests } from "../src/tracing.js";
import { dispatch, FakeConn, ordinary, workerConfig } from "./fakes.js";
import { FakeServer } from "./fake-server.js";

const exporter = new InMemorySpanExporter();
const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
// The global tracer provider, the AsyncLocalStorage context manager and the W3C propagator.
provider.register();
const appTracer = trace.getTracer("the-application");

const TRACE_ID = "0af7651916cd43dd8448eb211c80319c";
const PARENT_SPAN_ID = "b7ad6b7169203331";
const TRACEPARENT = `00-${TRACE_ID}-${PARENT_SPAN_ID}-01`;
const wireContext = create(TraceContextSchema, { traceparent: TRACEPARENT, tracestate: "vendor=opaque" });

/** Long enough for a slow machine, short enough that a broken test fails instead of hanging. */
const PATIENCE_MS = 10_000;

beforeEach(() => {
  exporter.reset();
  setTracingApiForTests(undefined);
});

function traced(d: DispatchWorkflow): DispatchWorkflow {
  d.traceContext = wireContext;
  return d;
}

/** Executes `fn` as workflow "wf" for dispatch `d`, its requests answered by `answer`. */
async function execute(fn: WorkflowFn, answer: (kind: Kind) => ReplyResult = ordinary, d: DispatchWorkflow = traced(dispatch("wf"))) {
  const conn = new FakeConn(answer);
  await new Run(d, conn, workerConfig({ wf: fn })).execute();
  return conn;
}

function spanNamed(name: string): ReadableSpan {
  const spans = exporter.getFinishedSpans();
  const s = spans.find((x) => x.name === name);
  assert.ok(s, `no span ${JSON.stringify(name)} among ${JSON.stringify(spans.map((x) => x.name))}`);
  return s;
}

function names(): string[] {
  return exporter
    .getFinishedSpans()
    .map((s) => s.name)
    .sort();
}

function assertChildOf(child: ReadableSpan, parent: ReadableSpan): void {
  assert.equal(child.spanContext().traceId, parent.spanContext().traceId, `${child.name} is in ${parent.name}'s trace`);
  assert.equal(child.parentSpanContext?.spanId, parent.spanContext().spanId, `${child.name} is a child of ${parent.name}`);
}

/** The traceparent a span's context makes (sampled). */
function traceparentOf(s: ReadableSpan): string {
  return `00-${s.spanContext().traceId}-${s.spanContext().spanId}-01`;
}

/** The requests of kind `kase` the run sent, in order. */
function sent(conn: FakeConn, kase: "callStep"): CallStep[];
function sent(conn: FakeConn, kase: "startChild"): StartChild[];
function sent(conn: FakeConn, kase: "completeWorkflow"): CompleteWorkflow[];
function sent(conn: FakeConn, kase: Kind["case"]): unknown[] {
  return conn.sent.filter((k) => k.case === kase).map((k) => k.value);
}

test("the dispatch's trace context is the parent of the workflow span, and a step's span is the workflow span's child", async () => {
  let activeInStep: string | undefined;
  await execute(async (ctx) => {
    const a = await ctx.step("a", () => {
      activeInStep = trace.getActiveSpan()?.spanContext().spanId;
      return 1;
    });
    return a + 1;
  });

  const wf = spanNamed("workflow wf");
  assert.equal(wf.kind, SpanKind.CONSUMER);
  assert.equal(wf.instrumentationScope.name, "waymark");
  assert.equal(wf.spanContext().traceId, TRACE_ID);
  assert.equal(wf.parentSpanContext?.spanId, PARENT_SPAN_ID);
  assert.equal(wf.parentSpanContext?.isRemote, true);
  assert.equal(wf.spanContext().traceState?.get("vendor"), "opaque", "the tracestate is carried on");
  assert.deepEqual(wf.attributes, {
    "waymark.workflow.id": "wf-1",
    "waymark.workflow.name": "wf",
    "waymark.epoch": 1,
    "waymark.replay": false,
    "waymark.recovery_attempts": 0,
  });
  assert.equal(wf.status.code, SpanStatusCode.UNSET);

  const step = spanNamed("step a");
  assert.equal(step.kind, SpanKind.INTERNAL);
  assertChildOf(step, wf);
  assert.deepEqual(step.attributes, { "waymark.workflow.id": "wf-1", "waymark.step.id": 0, "waymark.step.name": "a" });
  assert.equal(activeInStep, step.spanContext().spanId, "the step's span is active inside its function");
  assert.deepEqual(names(), ["step a", "workflow wf"]);
});

test("a dispatch without a trace context starts a new trace", async () => {
  await execute(async () => "done", ordinary, dispatch("wf"));
  const wf = spanNamed("workflow wf");
  assert.equal(wf.parentSpanContext, undefined);
  assert.notEqual(wf.spanContext().traceId, TRACE_ID);
});

test("a failed step and the workflow it fails end with status ERROR", async () => {
  await execute(async (ctx) => {
    await ctx.step("boom", () => {
      throw new Error("the disk is full");
    });
  });
  const step = spanNamed("step boom");
  assert.equal(step.status.code, SpanStatusCode.ERROR);
  assert.equal(step.status.message, "the disk is full");
  const wf = spanNamed("workflow wf");
  assert.equal(wf.status.code, SpanStatusCode.ERROR);
  assert.match(wf.status.message ?? "", /the disk is full/);
});

test("a run that continues as new ends its workflow span without an error status", async () => {
  const conn = await execute(async (ctx) => {
    await ctx.step("tick", () => 0);
    return ctx.continueAsNew({ n: 1 });
  });
  assert.deepEqual(conn.kinds(), ["completeWorkflow"]);
  assert.equal((conn.sent[0]!.value as CompleteWorkflow).outcome.case, "continueAsNew");
  assert.equal(spanNamed("step tick").status.code, SpanStatusCode.UNSET);
  assert.equal(spanNamed("workflow wf").status.code, SpanStatusCode.UNSET);
});

test("a replayed step opens no span, and a dispatch with recorded steps is marked waymark.replay", async () => {
  const d = traced(dispatch("wf"));
  d.steps = [create(StepSchema, { stepId: 0, name: "a", output: toPayload(1) })];
  let ranA = false;
  await execute(
    async (ctx) => {
      const a = await ctx.step("a", () => {
        ranA = true;
        return 99;
      });
      return ctx.step("b", () => a + 1);
    },
    ordinary,
    d,
  );
  assert.equal(ranA, false);
  assert.deepEqual(names(), ["step b", "workflow wf"]);
  assert.equal(spanNamed("workflow wf").attributes["waymark.replay"], true);
  assert.equal(spanNamed("step b").attributes["waymark.step.id"], 1);
});

test("a recovered dispatch is marked waymark.replay, with its recovery attempts", async () => {
  const d = traced(dispatch("wf"));
  d.recoveryAttempts = 2;
  d.epoch = 3n;
  await execute(async () => "done", ordinary, d);
  const wf = spanNamed("workflow wf");
  assert.equal(wf.attributes["waymark.replay"], true);
  assert.equal(wf.attributes["waymark.recovery_attempts"], 2);
  assert.equal(wf.attributes["waymark.epoch"], 3);
});

test("a remote step call sends its call span's context in every CallStep", async () => {
  const conn = await execute(
    async (ctx) => ctx.callStep("shout", "hi"),
    (kind) =>
      kind.case === "callStep"
        ? { case: "callResult", value: create(CallResultSchema, { outcome: RecvResult_Outcome.DELIVERED, output: toPayload("HI!"), attempts: 1 }) }
        : ordinary(kind),
  );
  const wf = spanNamed("workflow wf");
  const call = spanNamed("call shout");
  assert.equal(call.kind, SpanKind.CLIENT);
  assertChildOf(call, wf);
  assert.equal(call.spanContext().traceId, TRACE_ID);
  assert.deepEqual(call.attributes, { "waymark.workflow.id": "wf-1", "waymark.step.id": 0, "waymark.step.name": "shout" });
  const calls = sent(conn, "callStep");
  assert.equal(calls.length, 2, "the call, then the ask for its result");
  for (const c of calls) {
    assert.equal(c.traceContext?.traceparent, traceparentOf(call));
    assert.equal(c.traceContext?.tracestate, "vendor=opaque");
  }
});

test("a failed remote step ends its call span with status ERROR", async () => {
  await execute(
    async (ctx) => ctx.callStep("shout", "hi").catch(() => "handled"),
    (kind) =>
      kind.case === "callStep"
        ? {
            case: "callResult",
            value: create(CallResultSchema, { outcome: RecvResult_Outcome.DELIVERED, failure: { kind: "StepFailed", message: "hoarse" }, attempts: 3 }),
          }
        : ordinary(kind),
  );
  const call = spanNamed("call shout");
  assert.equal(call.status.code, SpanStatusCode.ERROR);
  assert.equal(call.status.message, "hoarse");
  assert.equal(spanNamed("workflow wf").status.code, SpanStatusCode.UNSET);
});

test("a child start sends its start child span's context in StartChild", async () => {
  const conn = await execute(
    async (ctx) => ctx.startChild("kid", { n: 1 }),
    (kind) => (kind.case === "startChild" ? { case: "childStarted", value: create(ChildStartedSchema, { childWorkflowId: "kid-1" }) } : ordinary(kind)),
  );
  const wf = spanNamed("workflow wf");
  const start = spanNamed("start child kid");
  assert.equal(start.kind, SpanKind.PRODUCER);
  assertChildOf(start, wf);
  assert.deepEqual(start.attributes, { "waymark.workflow.id": "wf-1", "waymark.step.id": 0 });
  const starts = sent(conn, "startChild");
  assert.equal(starts.length, 1);
  assert.equal(starts[0]!.traceContext?.traceparent, traceparentOf(start));
});

test("waits done now open wait spans with their attributes; waits read back from the history open none", async () => {
  const d = traced(dispatch("wf"));
  // A sleep over long ago, recorded: read back.
  d.steps = [create(StepSchema, { stepId: 0, name: "waymark.sleep", output: toPayload({ wake_at_ms: 1 }) })];
  await execute(
    async (ctx) => {
      await ctx.sleep(60_000);
      await ctx.sleep(0);
      return ctx.recv("orders", { timeoutMs: 60_000 });
    },
    (kind) =>
      kind.case === "recv"
        ? { case: "recvResult", value: create(RecvResultSchema, { outcome: RecvResult_Outcome.DELIVERED, message: toPayload("order-1") }) }
        : ordinary(kind),
    d,
  );
  assert.deepEqual(names(), ["wait recv", "wait sleep", "workflow wf"]);
  const wf = spanNamed("workflow wf");
  const sleep = spanNamed("wait sleep");
  assertChildOf(sleep, wf);
  assert.deepEqual(sleep.attributes, { "waymark.workflow.id": "wf-1", "waymark.step.id": 1 });
  const recv = spanNamed("wait recv");
  assertChildOf(recv, wf);
  assert.deepEqual(recv.attributes, { "waymark.workflow.id": "wf-1", "waymark.step.id": 2, "waymark.wait.topic": "orders" });
});

test("waiting for an event, a child and the first of several opens wait event, wait child and wait select", async () => {
  await execute(
    async (ctx) => {
      await ctx.getEvent("other-1", "status", { timeoutMs: 60_000 });
      await ctx.awaitChild("kid-1");
      return ctx.waitFirst(["kid-1"]);
    },
    (kind) => {
      switch (kind.case) {
        case "getEvent":
          return { case: "eventResult", value: create(EventResultSchema, { outcome: RecvResult_Outcome.DELIVERED, value: toPayload("ready") }) };
        case "awaitChild":
          return {
            case: "childResult",
            value: create(ChildResultSchema, { outcome: RecvResult_Outcome.DELIVERED, status: WorkflowStatus.SUCCESS, output: toPayload(1) }),
          };
        case "select":
          return { case: "selected", value: create(SelectedSchema, { outcome: RecvResult_Outcome.DELIVERED, index: 0 }) };
        default:
          return ordinary(kind);
      }
    },
  );
  assert.deepEqual(names(), ["wait child", "wait event", "wait select", "workflow wf"]);
  const wf = spanNamed("workflow wf");
  assert.equal(wf.status.code, SpanStatusCode.UNSET);
  const event = spanNamed("wait event");
  assertChildOf(event, wf);
  assert.deepEqual(event.attributes, { "waymark.workflow.id": "wf-1", "waymark.step.id": 0, "waymark.wait.key": "status" });
  assertChildOf(spanNamed("wait child"), wf);
  assert.equal(spanNamed("wait child").attributes["waymark.step.id"], 2);
  assertChildOf(spanNamed("wait select"), wf);
  assert.equal(spanNamed("wait select").attributes["waymark.step.id"], 3);
});

test("a span still open when the run ends (a remote call whose result nobody awaited) ends with it", async () => {
  await execute(
    async (ctx) => {
      await ctx.startStep("shout", "hi");
      return "not waiting";
    },
    (kind) =>
      kind.case === "callStep"
        ? { case: "callResult", value: create(CallResultSchema, { outcome: RecvResult_Outcome.WAITING }) }
        : ordinary(kind),
  );
  assert.deepEqual(names(), ["call shout", "workflow wf"]);
  const call = spanNamed("call shout");
  const wf = spanNamed("workflow wf");
  assertChildOf(call, wf);
  assert.equal(call.status.code, SpanStatusCode.UNSET);
});

test("serving a DispatchStep opens a CONSUMER step span under its trace context, ended when the result is sent", async () => {
  const server = new FakeServer();
  const worker = new Worker({ transport: server.transport, logger: silentLogger });
  let activeInStep: string | undefined;
  worker.step("shout", (text: string) => {
    activeInStep = trace.getActiveSpan()?.spanContext().spanId;
    return `${text.toUpperCase()}!`;
  });
  const ac = new AbortController();
  const running = worker.run({ signal: ac.signal });
  try {
    const stream = await server.stream(0);
    stream.welcome(60_000);
    stream.send({
      case: "dispatchStep",
      value: create(DispatchStepSchema, {
        workflowId: "caller-1",
        stepId: 4,
        stepName: "shout",
        attempt: 2,
        input: toPayload("hi"),
        traceContext: wireContext,
      }),
    });
    const { m } = await stream.next((x) => x.kind.case === "stepResult", 0, "a step result");
    stream.reply(m.requestId, { case: "stepRecorded", value: create(StepRecordedSchema) });
    await waitUntil(() => exporter.getFinishedSpans().some((s) => s.name === "step shout"), "the step span to end");
  } finally {
    ac.abort();
    await running;
  }
  const step = spanNamed("step shout");
  assert.equal(step.kind, SpanKind.CONSUMER);
  assert.equal(step.spanContext().traceId, TRACE_ID);
  assert.equal(step.parentSpanContext?.spanId, PARENT_SPAN_ID);
  assert.deepEqual(step.attributes, {
    "waymark.workflow.id": "caller-1",
    "waymark.step.id": 4,
    "waymark.step.name": "shout",
    "waymark.step.attempt": 2,
  });
  assert.equal(step.status.code, SpanStatusCode.UNSET);
  assert.equal(activeInStep, step.spanContext().spanId, "the step's span is active inside its function");
});

/** A client on an in-process WorkflowService that keeps the `traceparent` each call carried. */
function recordingClient() {
  const seen: (string | null)[] = [];
  const transport = createRouterTransport(({ service }) => {
    service(WorkflowService, {
      getWorkflow(req, ctx) {
        seen.push(ctx.requestHeader.get("traceparent"));
        return { workflow: create(WorkflowSchema, { workflowId: req.workflowId, status: WorkflowStatus.PENDING }) };
      },
      startWorkflow(req, ctx) {
        seen.push(ctx.requestHeader.get("traceparent"));
        return { workflow: create(WorkflowSchema, { workflowId: req.workflowId, workflowName: req.workflowName }), created: true };
      },
    });
  });
  return { client: new Client({ transport }), seen };
}

test("client calls carry the active span's context in their metadata", async () => {
  const { client, seen } = recordingClient();
  const expected = await appTracer.startActiveSpan("caller", async (span) => {
    try {
      await client.start("checkout", null, { workflowId: "wf-9" });
      await client.get("wf-9");
      return `00-${span.spanContext().traceId}-${span.spanContext().spanId}-01`;
    } finally {
      span.end();
    }
  });
  assert.deepEqual(seen, [expected, expected]);
});

test("client calls without an active span carry no trace context", async () => {
  const { client, seen } = recordingClient();
  await client.get("wf-9");
  // A context with no span in it, even inside a span's callback.
  await appTracer.startActiveSpan("caller", async (span) => {
    await context.with(trace.deleteSpan(context.active()), () => client.get("wf-9"));
    span.end();
  });
  assert.deepEqual(seen, [null, null]);
});

test("without OpenTelemetry a run opens no span and sends no trace context, and client calls carry none", async () => {
  setTracingApiForTests(null);
  const conn = await execute(
    async (ctx) => {
      await ctx.step("a", () => 1);
      await ctx.startChild("kid");
      return ctx.callStep("shout", "hi");
    },
    (kind) => {
      if (kind.case === "startChild") return { case: "childStarted", value: create(ChildStartedSchema, { childWorkflowId: "kid-1" }) };
      if (kind.case === "callStep") {
        return { case: "callResult", value: create(CallResultSchema, { outcome: RecvResult_Outcome.DELIVERED, output: toPayload("HI!") }) };
      }
      return ordinary(kind);
    },
  );
  assert.deepEqual(names(), []);
  const done = sent(conn, "completeWorkflow");
  assert.equal(done.length, 1);
  assert.equal(done[0]!.outcome.case, "output", "the workflow completed");
  for (const c of sent(conn, "callStep")) assert.equal(c.traceContext, undefined);
  for (const c of sent(conn, "startChild")) assert.equal(c.traceContext, undefined);

  const { client, seen } = recordingClient();
  await appTracer.startActiveSpan("caller", async (span) => {
    await client.get("wf-9");
    span.end();
  });
  assert.deepEqual(seen, [null]);
});

/** Polls `predicate` until it holds, failing past the deadline. */
async function waitUntil(predicate: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + PATIENCE_MS;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
