package waymark

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// StepOption configures a step: its retries and its timeout.
type StepOption func(*stepConfig)

type stepConfig struct {
	retry   *RetryPolicy
	timeout time.Duration
}

// WithRetry retries the step per policy before it fails for good. For a local step the
// worker retries it; for a remote step (CallStep) the server does.
func WithRetry(policy RetryPolicy) StepOption {
	return func(c *stepConfig) { c.retry = &policy }
}

// WithTimeout bounds one attempt of the step: the attempt's context ends after d (and for a
// remote step the server fails an attempt that runs longer).
func WithTimeout(d time.Duration) StepOption {
	return func(c *stepConfig) { c.timeout = d }
}

func stepOptions(opts []StepOption) stepConfig {
	var c stepConfig
	for _, o := range opts {
		o(&c)
	}
	return c
}

// Step runs fn once as step name of the workflow and checkpoints its result. On replay the
// recorded result is returned and fn is not called. fn's context ends when the workflow stops
// (cancelled, parked, taken over) or the attempt times out.
//
// The checkpoint is durable before anything else the workflow does outside itself — its next
// step runs, its next request to the server, its completion (which carries the last steps'
// records). A step that fails after its retries returns a *StepError; its original error is
// not kept, since a replay only has the recorded message. So does a step whose output is
// larger than the server takes: it fails at once, recorded with kind PAYLOAD_TOO_LARGE.
func Step[T any](ctx Context, name string, fn func(ctx context.Context) (T, error), opts ...StepOption) (T, error) {
	var zero T
	r := ctx.run()
	step, err := r.take(1)
	if err != nil {
		return zero, err
	}
	if v, ok, err := replay[T](r.hist, step, name); ok {
		return v, err
	}
	// Offline, fn is never called: the history ends here.
	if err := r.live(step); err != nil {
		return zero, err
	}
	if err := r.stopped(); err != nil {
		return zero, err
	}
	// This step may depend on the ones before: their records are durable first, including
	// those another goroutine of the workflow is flushing right now.
	if err := r.flush(); err != nil {
		return zero, err
	}
	if err := r.stopped(); err != nil {
		return zero, err
	}
	cfg := stepOptions(opts)
	policy := RetryPolicy{MaxAttempts: 1}
	if cfg.retry != nil {
		policy = cfg.retry.normalized()
	}
	// One span for the step, its retries included: it runs now, not from the history.
	sctx, span := r.startSpan("step "+name, trace.SpanKindInternal, attrStepID.Int64(int64(step)), attrStepName.String(name))
	defer r.endSpan(span)
	// How long the step takes, retries and their backoff included: its record carries it, and
	// the server dates the step's start from it.
	began := time.Now()
	for attempt := uint32(1); ; attempt++ {
		v, err := attemptStep(sctx, cfg.timeout, fn)
		if stop := r.stopped(); stop != nil {
			return zero, stop
		}
		if err == nil {
			out, perr := toPayload(v)
			if perr != nil {
				failSpan(span, perr.Error())
				return zero, &Failure{Kind: "Serialization", Message: perr.Error()}
			}
			rec := r.stepRecord(step, name, out, nil, attempt)
			took := time.Since(began)
			rec.Duration = durationpb.New(took)
			if big := r.conn.limits.admit("the step's output", out, recordMessage(rec)); big != nil {
				// Too large to record: the step fails instead, recorded as failed, and is not
				// tried again (it would most likely return the same).
				return zero, r.failStep(span, step, name, reasonPayloadTooLarge, big.Message, attempt, took)
			}
			r.hold(rec)
			return v, nil
		}
		if attempt >= policy.MaxAttempts {
			return zero, r.failStep(span, step, name, stepFailedKind, err.Error(), attempt, time.Since(began))
		}
		span.RecordError(err, trace.WithAttributes(attrStepAttempt.Int64(int64(attempt))))
		r.logger.Debug("step failed; retrying", "step", name, "attempt", attempt, "error", err)
		if err := r.pause(policy.Delay(attempt)); err != nil {
			return zero, err
		}
	}
}

// failStep holds the record of a step's failure and returns the error a replay of that
// record returns (see stepOutcome), so the workflow sees the same either way. span, the step's,
// is marked failed. took is how long the step ran, its retries included.
func (r *run) failStep(span *runSpan, step uint32, name, kind, message string, attempts uint32, took time.Duration) error {
	f := r.conn.limits.failure(kind, message)
	failSpan(span, f.GetMessage())
	rec := r.stepRecord(step, name, nil, f, attempts)
	rec.Duration = durationpb.New(took)
	r.hold(rec)
	return &StepError{Step: name, Message: f.GetMessage(), Reason: f.GetKind()}
}

// recordMessage is a step record as it goes on the stream.
func recordMessage(rec *pb.RecordStep) *pb.WorkerMessage {
	return &pb.WorkerMessage{Kind: &pb.WorkerMessage_RecordStep{RecordStep: rec}}
}

func attemptStep[T any](ctx context.Context, timeout time.Duration, fn func(context.Context) (T, error)) (T, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	return fn(ctx)
}

// pause waits d unless the run stops first.
func (r *run) pause(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-r.Done():
		return r.stopped()
	}
}
