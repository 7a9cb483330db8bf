package waymark

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// errResendStopped: whoever waited for the request no longer needs its answer (the run was
// stopped, the step attempt ran out of time) while it was waiting to send it again.
var errResendStopped = errors.New("waymark: stopped before the request could be sent again")

// unavailable reports whether a reply refuses the request only because the server cannot
// serve it right now (code UNAVAILABLE: its database restarting, say). Such a refusal is never
// the workflow's doing, so the request is sent again rather than shown to the workflow.
func unavailable(reply *pb.Reply) bool {
	e := reply.GetError()
	return e != nil && codeOf(e.GetCode()) == codes.Unavailable
}

// exchange sends a request and settles it (see settle).
func (c *conn) exchange(msg *pb.WorkerMessage, limit time.Duration, stop <-chan struct{}) (*pb.Reply, error) {
	ch, err := c.start(msg)
	if err != nil {
		return nil, err
	}
	return c.settle(msg, ch, limit, stop)
}

// settle waits for the reply to msg, already sent with its reply due on ch. While the server
// answers UNAVAILABLE it sends the same request again, with backoff, for at most limit from the
// first such answer (a negative limit: never). Resending is safe: every worker write is fenced
// by its epoch and idempotent at its step position, so a write that did happen the first time
// is answered as done, not done twice.
//
// It returns the first other reply; ErrDisconnected when the stream broke; errResendStopped
// when stop closed while it waited to resend; or, when the answer is still UNAVAILABLE once
// limit has passed, an error wrapping that last answer as an *Error.
func (c *conn) settle(msg *pb.WorkerMessage, ch <-chan *pb.Reply, limit time.Duration, stop <-chan struct{}) (*pb.Reply, error) {
	var since time.Time
	for failures := 1; ; failures++ {
		reply, err := c.wait(ch)
		if err != nil {
			return nil, err
		}
		if !unavailable(reply) {
			return reply, nil
		}
		if since.IsZero() {
			since = time.Now()
		}
		left := limit - time.Since(since)
		if left <= 0 {
			e := reply.GetError()
			last := &Error{Code: codes.Unavailable, Reason: e.GetReason(), Message: e.GetMessage()}
			return nil, fmt.Errorf("the server stayed unavailable for %v: %w", time.Since(since).Round(time.Millisecond), last)
		}
		// The last try comes at the bound, not after it.
		if err := c.pause(min(resendBackoff(failures), left), stop); err != nil {
			return nil, err
		}
		// The same request under a new id: ids are unique on the stream, and the old one has
		// had its answer. The wrapper is new, so the message already handed to the stream is
		// never changed.
		msg = &pb.WorkerMessage{Kind: msg.GetKind()}
		if ch, err = c.start(msg); err != nil {
			return nil, err
		}
	}
}

// pause waits d, unless the stream breaks or stop closes first. Stop is checked again at the
// end because a select picks at random among ready cases.
func (c *conn) pause(d time.Duration, stop <-chan struct{}) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-stop:
		return errResendStopped
	case <-c.done:
		return ErrDisconnected
	}
	select {
	case <-stop:
		return errResendStopped
	default:
		return nil
	}
}
