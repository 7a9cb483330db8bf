package waymark

import (
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// LoseRunSilently makes the worker forget the run behind ctx without a word to the server,
// as a bug or a lost reply might (see session.lose). Compiled into the package's tests only.
func LoseRunSilently(ctx Context) {
	r := ctx.run()
	r.sess.lose(r)
}

// CountWelcomes counts the streams on which the server welcomes w, from now on; call before
// Run. A worker that never reconnects is welcomed once.
func CountWelcomes(w *Worker) func() int32 {
	var n atomic.Int32
	w.hooks.welcomed = func() { n.Add(1) }
	return n.Load
}

// CountReplaySends counts the messages p's replays try to put on a stream, from now on; none
// ever should.
func CountReplaySends(p *Replayer) func() int32 {
	var n atomic.Int32
	p.sent = func(*pb.WorkerMessage) { n.Add(1) }
	return n.Load
}

// SpanLog is the in-memory span exporter of the tracing tests (see tracing_internal_test.go).
type SpanLog = spanLog

// NewSpanLog is an empty span log.
func NewSpanLog() *SpanLog { return newSpanLog() }

// WaitForSpan waits for the span named name to end and returns it.
func (l *spanLog) WaitForSpan(t *testing.T, name string) tracetest.SpanStub {
	t.Helper()
	return l.waitForSpan(t, name)
}
