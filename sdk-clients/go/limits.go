package waymark

import (
	"fmt"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// The server's Welcome says how large a payload it takes and how large a message the worker
// may send. Everything too large is caught here, before it is sent: a workflow's output as the
// workflow's failure, a step's output as the step's, a message, event or stream value, a
// child's or a remote step's input as an error to the workflow. None of them ever reaches the
// stream as a message the server would answer by ending it — which would drop every workflow
// running on it, and dispatch this one again, to fail the same way.

// reasonPayloadTooLarge is the reason (and failure kind) of anything refused for its size,
// here or by the server.
const reasonPayloadTooLarge = "PAYLOAD_TOO_LARGE"

// What a server whose Welcome gives no sizes (an older one) takes.
const (
	defaultMaxPayloadBytes = 4 << 20
	defaultMaxMessageBytes = 9 << 20
)

// requestIDBytes is what a request id adds to a message once conn.start sets it: a tag and
// at most ten bytes of varint. Sizes checked before then leave room for it.
const requestIDBytes = 11

// limits are the sizes one stream's server takes, in bytes.
type limits struct {
	// Largest payload, counted as its JSON text (see jsonSize).
	payload int
	// Largest message the worker sends, encoded.
	message int
}

// limitsOf reads the sizes from a Welcome, taking the defaults for those it leaves at zero.
func limitsOf(w *pb.Welcome) limits {
	l := limits{payload: defaultMaxPayloadBytes, message: defaultMaxMessageBytes}
	if n := w.GetMaxPayloadBytes(); n > 0 {
		l.payload = int(min(n, 1<<40))
	}
	if n := w.GetMaxMessageBytes(); n > 0 {
		l.message = int(min(n, 1<<40))
	}
	return l
}

// tooLarge is the error for something refused for its size, the same an *Error the server
// sends would be: errors.As finds the *Error, errors.Is matches ErrPayloadTooLarge.
func tooLarge(format string, args ...any) *Error {
	return &Error{Code: codes.ResourceExhausted, Reason: reasonPayloadTooLarge, Message: fmt.Sprintf(format, args...)}
}

// admit checks that msg, a request carrying p (what names p for people: "the message"), is
// within both limits: p's JSON within the payload limit, msg encoded within the message limit
// once its request id is set. The second can fail when the first holds: a payload's encoding
// can be several times its JSON (each number in a list takes eleven bytes, "1," two).
func (l limits) admit(what string, p *pb.Payload, msg *pb.WorkerMessage) *Error {
	if n := jsonSize(p); n > l.payload {
		return tooLarge("%s is %d bytes of JSON; the server takes at most %d", what, n, l.payload)
	}
	if n := proto.Size(msg) + requestIDBytes; n > l.message {
		return tooLarge("%s makes a message of %d bytes; the server takes at most %d", what, n, l.message)
	}
	return nil
}

// fits checks a message about to go on the stream, request id and all. The checks before it
// keep every message of the SDK's within the limit; this one keeps a message that slipped past
// them off the stream.
func (l limits) fits(msg *pb.WorkerMessage) *Error {
	if n := proto.Size(msg); n > l.message {
		return tooLarge("a message of %d bytes was not sent; the server takes at most %d", n, l.message)
	}
	return nil
}

// clip shortens a failure's text (its message, its kind) to the payload limit, and to a
// quarter of the message limit, so that a failure fits wherever an output would, and the two
// texts of one together fit a message with room to spare. Failures are not payloads and the
// server does not measure them, but an error can quote anything, megabytes included.
func (l limits) clip(s string) string {
	most := min(l.payload, l.message/4)
	if len(s) <= most {
		return s
	}
	const mark = " … (cut short)"
	cut := max(most-len(mark), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// failure is a failure as sent to the server, its text clipped.
func (l limits) failure(kind, message string) *pb.Failure {
	return &pb.Failure{Kind: l.clip(kind), Message: l.clip(message)}
}
