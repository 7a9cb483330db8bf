package main

import (
	"context"
	"os"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// setupTracing installs the OpenTelemetry SDK when OTEL_EXPORTER_OTLP_ENDPOINT is set: the
// worker's spans (and those of anything else in the process using the global provider) go
// to that endpoint over OTLP/gRPC, under service.name = service. The exporter reads the rest
// of its settings from the standard OTEL_EXPORTER_OTLP_* variables (an http:// endpoint is
// plaintext). Without the variable nothing is installed, and the SDK's spans cost nothing.
//
// Each span is exported as it ends (a synchronous processor), so a worker killed with
// SIGKILL loses none that had ended; shutdown flushes and closes the exporter.
func setupTracing(ctx context.Context, service string) (shutdown func(context.Context) error, err error) {
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" {
		return func(context.Context) error { return nil }, nil
	}
	exporter, err := otlptracegrpc.New(ctx,
		// A collector that is down delays each span's end by at most this, not the default
		// minute of retries.
		otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{
			Enabled: true, InitialInterval: 100 * time.Millisecond, MaxInterval: time.Second, MaxElapsedTime: 5 * time.Second,
		}))
	if err != nil {
		return nil, err
	}
	res, err := resource.New(ctx, resource.WithTelemetrySDK(), resource.WithFromEnv(),
		resource.WithAttributes(attribute.String("service.name", service)))
	if err != nil {
		return nil, err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return tp.Shutdown, nil
}
