package waymark

import (
	"context"
	"errors"
	"io"
	"regexp"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// Tests of which client calls are retried while the server answers UNAVAILABLE, against an
// in-memory WorkflowService: the real one cannot be made unavailable on demand.

// fakeWorkflows refuses the first `refuse` calls with UNAVAILABLE (or with `code` when set),
// then answers, and keeps every request. Calls no test makes are left to the embedded nil
// interface (they would panic).
type fakeWorkflows struct {
	pb.WorkflowServiceClient

	mu       sync.Mutex
	refuse   int
	code     codes.Code
	starts   []*pb.StartWorkflowRequest
	sends    int
	gets     int
	followed []uint64 // from_offset of each ReadStream
}

// answer is how the fake server answers one call: an error while it refuses, or the caller's
// own context's end, as gRPC would report it.
func (f *fakeWorkflows) answer(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	if f.refuse > 0 {
		f.refuse--
		if f.code != codes.OK {
			return status.Error(f.code, "no such thing")
		}
		return status.Error(codes.Unavailable, "the database is restarting")
	}
	return nil
}

func (f *fakeWorkflows) StartWorkflow(ctx context.Context, req *pb.StartWorkflowRequest, _ ...grpc.CallOption) (*pb.StartWorkflowResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starts = append(f.starts, req)
	if err := f.answer(ctx); err != nil {
		return nil, err
	}
	return &pb.StartWorkflowResponse{Workflow: &pb.Workflow{WorkflowId: req.GetWorkflowId()}, Created: true}, nil
}

func (f *fakeWorkflows) SendMessage(ctx context.Context, req *pb.SendMessageRequest, _ ...grpc.CallOption) (*pb.SendMessageResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sends++
	if err := f.answer(ctx); err != nil {
		return nil, err
	}
	return &pb.SendMessageResponse{MessageId: "m-1"}, nil
}

func (f *fakeWorkflows) GetWorkflow(ctx context.Context, req *pb.GetWorkflowRequest, _ ...grpc.CallOption) (*pb.GetWorkflowResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets++
	if err := f.answer(ctx); err != nil {
		return nil, err
	}
	return &pb.GetWorkflowResponse{Workflow: &pb.Workflow{WorkflowId: req.GetWorkflowId()}}, nil
}

// ReadStream serves offsets from req's on, three values in all: the first stream breaks with
// UNAVAILABLE after two values, as a server restarting would cut it.
func (f *fakeWorkflows) ReadStream(ctx context.Context, req *pb.ReadStreamRequest, _ ...grpc.CallOption) (grpc.ServerStreamingClient[pb.ReadStreamResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.followed = append(f.followed, req.GetFromOffset())
	s := &fakeReadStream{end: io.EOF}
	for off := req.GetFromOffset(); off < 3; off++ {
		s.items = append(s.items, &pb.ReadStreamResponse{Offset: off, Value: &pb.Payload{Content: &pb.Payload_Json{Json: structpb.NewNumberValue(float64(off * 10))}}})
		if len(f.followed) == 1 && len(s.items) == 2 {
			s.end = status.Error(codes.Unavailable, "restarting")
			break
		}
	}
	return s, nil
}

type fakeReadStream struct {
	grpc.ClientStream
	items []*pb.ReadStreamResponse
	end   error
}

func (s *fakeReadStream) Recv() (*pb.ReadStreamResponse, error) {
	if len(s.items) == 0 {
		return nil, s.end
	}
	item := s.items[0]
	s.items = s.items[1:]
	return item, nil
}

// A start without an id is given one here, so its retries are the same start: every try
// carries the same id, and the workflow is started once.
func TestClientStartRetriesUnavailableUnderOneID(t *testing.T) {
	f := &fakeWorkflows{refuse: 2}
	c := &Client{workflows: f}
	started, err := c.Start(context.Background(), "greet", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.starts) != 3 {
		t.Fatalf("%d tries, want 3", len(f.starts))
	}
	id := f.starts[0].GetWorkflowId()
	uuidV7 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	if !uuidV7.MatchString(id) || f.starts[1].GetWorkflowId() != id || f.starts[2].GetWorkflowId() != id || started.ID != id {
		t.Fatalf("ids %q %q %q, started %q", id, f.starts[1].GetWorkflowId(), f.starts[2].GetWorkflowId(), started.ID)
	}
}

// A send is retried only with an idempotency key: without one, a retry could deliver twice.
func TestClientSendRetriesOnlyWithAKey(t *testing.T) {
	f := &fakeWorkflows{refuse: 1}
	c := &Client{workflows: f}
	_, err := c.Send(context.Background(), "wf", "", "hi", nil)
	var werr *Error
	if !errors.As(err, &werr) || werr.Code != codes.Unavailable || f.sends != 1 {
		t.Fatalf("without a key: %v after %d tries", err, f.sends)
	}
	f.refuse = 1
	if _, err := c.Send(context.Background(), "wf", "", "hi", &SendOptions{IdempotencyKey: "k"}); err != nil || f.sends != 3 {
		t.Fatalf("with a key: %v after %d tries in all", err, f.sends)
	}
}

// Retries stop before the caller's deadline, returning the last UNAVAILABLE rather than
// running into the deadline; other errors are not retried.
func TestClientRetryHonoursTheDeadline(t *testing.T) {
	f := &fakeWorkflows{refuse: 1 << 30}
	c := &Client{workflows: f}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := c.Get(ctx, "wf")
	var werr *Error
	if !errors.As(err, &werr) || werr.Code != codes.Unavailable || f.gets < 2 {
		t.Fatalf("got %v after %d tries; want UNAVAILABLE after several", err, f.gets)
	}
	f.refuse, f.code, f.gets = 1, codes.NotFound, 0
	if _, err := c.Get(context.Background(), "wf"); !errors.As(err, &werr) || werr.Code != codes.NotFound || f.gets != 1 {
		t.Fatalf("got %v after %d tries; want NOT_FOUND at once", err, f.gets)
	}
}

// A stream cut by UNAVAILABLE is followed again from the value after the last one yielded:
// nothing is missed and nothing repeated.
func TestClientReadStreamFollowsAgainAfterUnavailable(t *testing.T) {
	f := &fakeWorkflows{}
	c := &Client{workflows: f}
	var got []uint64
	for e, err := range c.ReadStream(context.Background(), "wf", "k", 0) {
		if err != nil {
			t.Fatal(err)
		}
		if string(e.Value) != map[uint64]string{0: "0", 1: "10", 2: "20"}[e.Offset] {
			t.Fatalf("entry %d is %s", e.Offset, e.Value)
		}
		got = append(got, e.Offset)
	}
	if len(got) != 3 || got[0] != 0 || got[2] != 2 || len(f.followed) != 2 || f.followed[1] != 2 {
		t.Fatalf("offsets %v, followed from %v", got, f.followed)
	}
}
