// OpenTelemetry for the polyglot example's TypeScript programs: when OTEL_EXPORTER_OTLP_ENDPOINT
// is set (the standard variable, e.g. http://127.0.0.1:4317), spans go to that endpoint over
// OTLP/gRPC, under service.name = the program's app name; without it nothing is loaded or
// installed. The SDK (waymark-sdk) then opens its spans (contract/tracing.md) on this provider.
//
// Each span is exported as soon as it ends (a simple processor, not a batching one), so a worker
// killed with SIGKILL has sent every span it finished; `shutdown` waits for exports in flight.

/** Installs tracing when OTEL_EXPORTER_OTLP_ENDPOINT is set; returns what flushes and stops it. */
export async function installTracing(serviceName: string): Promise<() => Promise<void>> {
  if (!process.env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim()) return async () => {};
  const [{ NodeTracerProvider }, { SimpleSpanProcessor }, { OTLPTraceExporter }, { resourceFromAttributes }] = await Promise.all([
    import("@opentelemetry/sdk-trace-node"),
    import("@opentelemetry/sdk-trace-base"),
    import("@opentelemetry/exporter-trace-otlp-grpc"),
    import("@opentelemetry/resources"),
  ]);
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ "service.name": serviceName }),
    // The exporter reads the endpoint (and OTEL_EXPORTER_OTLP_* settings) from the environment.
    spanProcessors: [new SimpleSpanProcessor(new OTLPTraceExporter())],
  });
  // The global tracer provider, the async context manager and the W3C propagator.
  provider.register();
  return () => provider.shutdown();
}
