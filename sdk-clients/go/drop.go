package waymark

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// ErrDropped: this worker let the run go without finishing it, because the server could not
// take its writes (it answered UNAVAILABLE for longer than WorkerOptions.RetryUnavailable) or
// the stream broke while a request was outstanding. The workflow itself is fine: the server
// dispatches it again, and the new run replays from the checkpoints. Every later operation of
// the dropped run fails with the same error, and whatever the function returns is not sent.
var ErrDropped = errors.New("waymark: run dropped by this worker; the server dispatches the workflow again")

// drop lets the run go: from now on it sends nothing, every operation returns the error this
// returns (ErrDropped wrapping cause), and its context is cancelled with it. Dropping twice
// keeps the first cause.
func (r *run) drop(cause error) error {
	err := fmt.Errorf("%w: %w", ErrDropped, cause)
	if r.dropped.CompareAndSwap(nil, &err) {
		level := slog.LevelWarn
		if errors.Is(cause, ErrDisconnected) {
			level = slog.LevelInfo // the reconnect is logged already
		}
		r.logger.Log(context.Background(), level, "run dropped; the server will dispatch the workflow again", "cause", cause)
		r.cancel(err)
		r.ring()
	}
	return r.droppedErr()
}

// droppedErr is the error every operation of a dropped run returns, or nil.
func (r *run) droppedErr() error {
	if p := r.dropped.Load(); p != nil {
		return *p
	}
	return nil
}

// exchange sends a request of this run and waits for its answer (see conn.settle), dropping
// the run when no answer can be had: the stream broke, or the server stayed unavailable.
// Every request of a run goes through here, or through send for held records; both check
// first that the run was not dropped, so a dropped run sends nothing more.
func (r *run) exchange(msg *pb.WorkerMessage) (*pb.Reply, error) {
	if err := r.droppedErr(); err != nil {
		return nil, err
	}
	ch, err := r.conn.start(msg)
	if err != nil {
		return nil, r.unsent(err)
	}
	return r.settle(msg, ch)
}

// unsent is what a request the stream did not take means for the run. A message too large was
// refused before it was sent: the stream is fine, and so is the run, which gets the refusal as
// its error. Anything else is the stream breaking, and the run is dropped.
func (r *run) unsent(err error) error {
	if errors.Is(err, ErrPayloadTooLarge) {
		return err
	}
	return r.drop(err)
}

// settle waits for the answer to a request of this run already sent (see conn.settle).
func (r *run) settle(msg *pb.WorkerMessage, ch <-chan *pb.Reply) (*pb.Reply, error) {
	reply, err := r.conn.settle(msg, ch, r.retryFor, r.Done())
	if errors.Is(err, errResendStopped) {
		// The run was stopped meanwhile (cancelled, dropped by another of its goroutines,
		// its worker shutting down).
		err = r.stopped()
		if errors.Is(err, ErrDisconnected) && !errors.Is(err, ErrDropped) {
			err = r.drop(err)
		}
		return nil, err
	}
	if err != nil {
		return nil, r.unsent(err)
	}
	// Another goroutine of the run may have dropped it while this answer was on its way: the
	// caller must not act on it.
	if err := r.droppedErr(); err != nil {
		return nil, err
	}
	return reply, nil
}
