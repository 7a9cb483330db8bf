package waymark

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// retrying makes a client call, and makes it again while it fails with UNAVAILABLE (see
// outage). Only calls that are safe to repeat go through it: reads, awaits, starts and
// forks with an id, cancel, resume, sends and start-and-sends with an idempotency key. The
// error returned is the last one, as an *Error.
func retrying[T any](ctx context.Context, call func(context.Context) (T, error)) (T, error) {
	var o outage
	for {
		v, err := call(ctx)
		if err == nil || !o.wait(ctx, err) {
			return v, rpcError(err)
		}
	}
}

// outage is a run of calls failing with UNAVAILABLE — the server restarting, or briefly
// without its database. The call is tried again with backoff (50 ms doubling to 2 s,
// jittered) for up to 60 seconds from the first failure, and never past ctx's deadline.
type outage struct {
	since    time.Time
	failures int
}

// wait waits before the next try after err, and reports whether to make it: false when err
// is not UNAVAILABLE, the outage has lasted too long, or ctx ends first.
func (o *outage) wait(ctx context.Context, err error) bool {
	if status.Code(err) != codes.Unavailable {
		return false
	}
	o.failures++
	if o.since.IsZero() {
		o.since = time.Now()
	}
	pause := min(resendBackoff(o.failures), defaultUnavailableRetry-time.Since(o.since))
	if pause <= 0 || !fitsBefore(ctx, pause) {
		return false
	}
	t := time.NewTimer(pause)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// fitsBefore: waiting d leaves time before ctx's deadline for another try.
func fitsBefore(ctx context.Context, d time.Duration) bool {
	deadline, ok := ctx.Deadline()
	return !ok || time.Until(deadline) > d
}

// newWorkflowID makes an id for a start that did not name one, so that the start can be
// retried without starting a second workflow. It is a UUID version 7, as the server would
// make: a millisecond timestamp then random bits, so ids sort by creation time.
func newWorkflowID() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixMilli())<<16)
	_, _ = crand.Read(b[6:])
	b[6] = b[6]&0x0f | 0x70 // version 7
	b[8] = b[8]&0x3f | 0x80 // RFC 9562 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// retried is retrying for a unary call that takes req.
func retried[Req, Resp any](ctx context.Context, method func(context.Context, Req, ...grpc.CallOption) (Resp, error), req Req) (Resp, error) {
	return retrying(ctx, func(ctx context.Context) (Resp, error) { return method(ctx, req) })
}
