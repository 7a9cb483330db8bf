package waymark

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/grpc/codes"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// A server that says nothing of sizes (an older one, sending zeros) is taken to take what the
// server has always taken: 4 MiB payloads, 9 MiB messages.
func TestLimitsFallBackWhenTheWelcomeGivesNone(t *testing.T) {
	if l := limitsOf(&pb.Welcome{}); l != (limits{payload: 4 << 20, message: 9 << 20}) {
		t.Fatalf("zeros read as %+v", l)
	}
	if l := limitsOf(&pb.Welcome{MaxPayloadBytes: 100, MaxMessageBytes: 300}); l != (limits{payload: 100, message: 300}) {
		t.Fatalf("sizes read as %+v", l)
	}
	if l := limitsOf(&pb.Welcome{MaxMessageBytes: 300}); l != (limits{payload: 4 << 20, message: 300}) {
		t.Fatalf("one size given read as %+v", l)
	}
}

// A payload is refused for its JSON over the payload limit, and for its encoding when the
// request would not fit a message — which a list of small numbers does long before its JSON
// reaches the payload limit. The refusal is the same error a server's would be.
func TestAdmitRefusesPayloadsAndMessagesTooLarge(t *testing.T) {
	l := limits{payload: 1000, message: 3000}
	send := func(p *pb.Payload) *pb.WorkerMessage {
		return &pb.WorkerMessage{Kind: &pb.WorkerMessage_SendMessage{SendMessage: &pb.SendMessageStep{WorkflowId: "wf", Message: p}}}
	}
	fits, _ := toPayload(strings.Repeat("x", 998)) // 1000 bytes with its quotes
	if err := l.admit("the message", fits, send(fits)); err != nil {
		t.Fatalf("a payload at the limit was refused: %v", err)
	}
	over, _ := toPayload(strings.Repeat("x", 999))
	err := error(l.admit("the message", over, send(over)))
	var e *Error
	if !errors.As(err, &e) || e.Code != codes.ResourceExhausted || e.Reason != "PAYLOAD_TOO_LARGE" ||
		!errors.Is(err, ErrPayloadTooLarge) || !IsReason(err, "PAYLOAD_TOO_LARGE") ||
		e.Message != "the message is 1001 bytes of JSON; the server takes at most 1000" {
		t.Fatalf("a payload over the limit: %#v", err)
	}

	numbers, _ := toPayload(json.RawMessage("[" + strings.Repeat("1,", 400) + "1]")) // 803 bytes of JSON
	err = l.admit("the message", numbers, send(numbers))
	if !errors.Is(err, ErrPayloadTooLarge) || !strings.Contains(err.Error(), "makes a message of") {
		t.Fatalf("a payload whose encoding is over the message limit: %v", err)
	}
}

// A failure's texts are cut to the payload limit (and to a quarter of the message limit), at a
// character boundary, saying so.
func TestFailureTextIsClipped(t *testing.T) {
	l := limits{payload: 100, message: 1000}
	f := l.failure("Kind", strings.Repeat("é", 200))
	if m := f.GetMessage(); len(m) > 100 || !utf8.ValidString(m) || !strings.HasSuffix(m, "(cut short)") {
		t.Fatalf("clipped to %d bytes: %q", len(m), m)
	}
	if f.GetKind() != "Kind" {
		t.Fatalf("a short kind was changed to %q", f.GetKind())
	}
	if m := (limits{payload: 1000, message: 200}).clip(strings.Repeat("x", 100)); len(m) > 50 {
		t.Fatalf("a quarter of a 200-byte message limit let %d bytes through", len(m))
	}
}

// A heartbeat whose list of held workflows would not fit a message goes without it.
func TestHeartbeatTooLargeToListGoesWithoutTheList(t *testing.T) {
	s := &session{w: fakeWorker(t, WorkerOptions{}), conn: newConn(nil), running: map[string]*run{}}
	s.conn.limits = limits{payload: 100, message: 1000}
	s.running["wf-1"] = nil
	if hb := s.heartbeatMessage().GetHeartbeat(); !hb.GetReportsHeld() || len(hb.GetHeldWorkflowIds()) != 1 {
		t.Fatalf("a short list was not sent: %v", hb)
	}
	for i := range 100 {
		s.running[strings.Repeat("w", 20)+string(rune('a'+i%26))+strings.Repeat("x", i)] = nil
	}
	msg := s.heartbeatMessage()
	if hb := msg.GetHeartbeat(); hb.GetReportsHeld() || len(hb.GetHeldWorkflowIds()) != 0 || s.conn.limits.fits(msg) != nil {
		t.Fatalf("a list too long was sent: %d ids", len(hb.GetHeldWorkflowIds()))
	}
}
