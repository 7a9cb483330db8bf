// OpenTelemetry tracing (contract/tracing.md), when the application has @opentelemetry/api.
//
// The API is an optional peer dependency: it is looked for once, the first time a span or a
// call's metadata could use it, with a guarded require. Without it every span here is NOOP, a
// shared object whose methods do nothing, and no metadata is added: tracing costs nothing.
// With it, spans go to whatever tracer provider the application registered (none: the API's
// own no-op, which still passes a trace context it is given on).
//
// Contexts travel two ways. A client call carries the active one in its gRPC metadata, written
// by the global propagator as the contract says. The worker protocol's `TraceContext` fields
// are W3C Trace Context by definition, so they are read and written here directly, whatever
// propagator the application chose (or none).

import { createRequire } from "node:module";
import type * as OtelApi from "@opentelemetry/api";
import type { Transport } from "@connectrpc/connect";
import { Interruption, StepFailedError } from "./errors.js";

type Api = typeof OtelApi;

/** A W3C trace context as the protocol's `TraceContext` message holds it. */
export interface WireTrace {
  traceparent: string;
  tracestate: string;
}

/** A span the SDK opened (or NOOP). Ending twice is harmless. */
export interface TraceSpan {
  /** This span's context for a `TraceContext` field; undefined when it has none to give. */
  readonly wire: WireTrace | undefined;
  /** Sets status ERROR with `message`. */
  fail(message: string): void;
  end(): void;
  /** Runs `fn` with this span active, so spans the application opens inside nest under it. */
  within<T>(fn: () => T): T;
}

/** The span of nothing: what every span is without OpenTelemetry. */
export const NOOP: TraceSpan = {
  wire: undefined,
  fail() {},
  end() {},
  within: (fn) => fn(),
};

export type SpanKindName = "internal" | "client" | "consumer" | "producer";

export type Attributes = Record<string, string | number | boolean>;

/** Where a span hangs: under a span of ours, or under a context that came over the wire (none: a new trace). */
export type Parent = { span: TraceSpan } | { wire: WireTrace | undefined };

/** The tracer's name (contract/tracing.md). */
export const TRACER_NAME = "waymark";

/** undefined: not looked for yet; null: not installed. */
let loaded: Api | null | undefined;

function otel(): Api | null {
  if (loaded === undefined) {
    try {
      loaded = createRequire(import.meta.url)("@opentelemetry/api") as Api;
    } catch {
      loaded = null;
    }
  }
  return loaded;
}

/**
 * @internal For tests: act as if @opentelemetry/api were not installed (`null`), or look for
 * it again (`undefined`).
 */
export function setTracingApiForTests(api: null | undefined): void {
  loaded = api;
}

/** Whether OpenTelemetry's API is installed here. */
export function tracingAvailable(): boolean {
  return otel() !== null;
}

class OtelSpan implements TraceSpan {
  private ended = false;
  /** The context with this span active. */
  readonly ctx: OtelApi.Context;

  constructor(
    private readonly api: Api,
    private readonly span: OtelApi.Span,
    parentCtx: OtelApi.Context,
    private readonly onEnd?: (s: OtelSpan) => void,
  ) {
    this.ctx = api.trace.setSpan(parentCtx, span);
  }

  get wire(): WireTrace | undefined {
    return wireOf(this.api, this.span.spanContext());
  }

  fail(message: string): void {
    this.span.setStatus({ code: this.api.SpanStatusCode.ERROR, message });
  }

  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.span.end();
    this.onEnd?.(this);
  }

  within<T>(fn: () => T): T {
    return this.api.context.with(this.ctx, fn);
  }
}

/** Opens span `name` of `kind` under `parent`; NOOP without OpenTelemetry or under a NOOP parent. */
export function startSpan(name: string, kind: SpanKindName, parent: Parent, attributes: Attributes, onEnd?: (s: TraceSpan) => void): TraceSpan {
  const api = otel();
  if (!api) return NOOP;
  let parentCtx: OtelApi.Context;
  if ("span" in parent) {
    if (!(parent.span instanceof OtelSpan)) return NOOP;
    parentCtx = parent.span.ctx;
  } else {
    parentCtx = contextFromWire(api, parent.wire);
  }
  const span = api.trace.getTracer(TRACER_NAME).startSpan(name, { kind: kindOf(api, kind), attributes }, parentCtx);
  return new OtelSpan(api, span, parentCtx, onEnd);
}

function kindOf(api: Api, kind: SpanKindName): OtelApi.SpanKind {
  switch (kind) {
    case "client":
      return api.SpanKind.CLIENT;
    case "consumer":
      return api.SpanKind.CONSUMER;
    case "producer":
      return api.SpanKind.PRODUCER;
    default:
      return api.SpanKind.INTERNAL;
  }
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/**
 * The context a `TraceContext` stands for, as a remote parent: the root context (a new trace)
 * when it is absent, empty or malformed.
 */
function contextFromWire(api: Api, w: WireTrace | undefined): OtelApi.Context {
  const m = w?.traceparent ? TRACEPARENT.exec(w.traceparent.trim()) : null;
  // Version ff is forbidden; version 00 has exactly four fields.
  if (!m || m[1] === "ff" || (m[1] === "00" && m[5] !== undefined)) return api.ROOT_CONTEXT;
  const sc: OtelApi.SpanContext = {
    traceId: m[2]!,
    spanId: m[3]!,
    traceFlags: parseInt(m[4]!, 16) & api.TraceFlags.SAMPLED,
    isRemote: true,
  };
  if (w?.tracestate) {
    try {
      sc.traceState = api.createTraceState(w.tracestate);
    } catch {
      // A tracestate the API cannot read is dropped, never the trace.
    }
  }
  if (!api.trace.isSpanContextValid(sc)) return api.ROOT_CONTEXT;
  return api.trace.setSpanContext(api.ROOT_CONTEXT, sc);
}

function wireOf(api: Api, sc: OtelApi.SpanContext): WireTrace | undefined {
  if (!api.trace.isSpanContextValid(sc)) return undefined;
  const flags = (sc.traceFlags & 0xff).toString(16).padStart(2, "0");
  return { traceparent: `00-${sc.traceId}-${sc.spanId}-${flags}`, tracestate: sc.traceState?.serialize() ?? "" };
}

/**
 * The spans of one workflow run: the workflow span and those opened under it, so that what is
 * still open when the run ends (a wait, a remote call) ends with it.
 */
export class RunSpans {
  private readonly open = new Set<TraceSpan>();

  constructor(readonly root: TraceSpan = NOOP) {}

  /** Opens a span under the workflow span (NOOP when that is NOOP). */
  child(name: string, kind: SpanKindName, attributes: Attributes): TraceSpan {
    if (this.root === NOOP) return NOOP;
    const s = startSpan(name, kind, { span: this.root }, attributes, (ended) => this.open.delete(ended));
    if (s !== NOOP) this.open.add(s);
    return s;
  }

  /** Ends every span still open under the workflow span. */
  endChildren(): void {
    for (const s of [...this.open]) s.end();
  }
}

/**
 * Ends `span` after the operation it stands for threw `e`: status ERROR with the error's
 * message (a failed step's own, as recorded), unless `e` interrupted the run (cancel, park, a
 * drop), which leaves it UNSET.
 */
export function endFailed(span: TraceSpan, e: unknown): void {
  if (!(e instanceof Interruption)) {
    span.fail(e instanceof StepFailedError ? e.stepMessage : e instanceof Error ? e.message : String(e));
  }
  span.end();
}

/**
 * `header` with the active context injected by the global propagator (`traceparent`,
 * `tracestate`), when OpenTelemetry is installed and a span is active; else `header` itself.
 */
export function withTraceHeaders(header: HeaderInit): HeaderInit {
  const api = otel();
  if (!api) return header;
  const active = api.context.active();
  const span = api.trace.getSpan(active);
  if (!span || !api.trace.isSpanContextValid(span.spanContext())) return header;
  const h = new Headers(header);
  api.propagation.inject(active, h, { set: (carrier, key, value) => carrier.set(key, value) });
  return h;
}

/** What a transport call takes as its headers. */
type HeaderInit = ConstructorParameters<typeof Headers>[0];

/** `t`, its unary calls carrying the caller's active trace context (see `withTraceHeaders`). */
export function tracedTransport(t: Transport): Transport {
  return {
    unary: (method, signal, timeoutMs, header, input, contextValues) =>
      t.unary(method, signal, timeoutMs, withTraceHeaders(header), input, contextValues),
    stream: (method, signal, timeoutMs, header, input, contextValues) => t.stream(method, signal, timeoutMs, header, input, contextValues),
  };
}

/** Runs `f` inside `span` and ends the span with it (see `endFailed` for a throw). */
export async function spanning<T>(span: TraceSpan, f: () => Promise<T>): Promise<T> {
  let value: T;
  try {
    value = await f();
  } catch (e) {
    endFailed(span, e);
    throw e;
  }
  span.end();
  return value;
}
