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
// in-memory WorkflowService: the real one cannot be made unavailable on demand. Also what a
// start and a delete put on the wire and how their answers map.

// fakeWorkflows refuses the first `refuse` calls with UNAVAILABLE (or with `code` when set),
// then answers, and keeps every request. Calls no test makes are left to the embedded nil
// interface (they would panic).
type fakeWorkflows struct {
	pb.WorkflowServiceClient

	mu      sync.Mutex
	refuse  int
	code    codes.Code
	starts  []*pb.StartWorkflowRequest
	deletes []*pb.DeleteWorkflowRequest
	forks   []*pb.ForkWorkflowRequest
	// See client_bulk_test.go.
	versions []*pb.SetWorkflowVersionRequest
	bulks    []*pb.BulkWorkflowsRequest
	lists    []*pb.ListWorkflowsRequest
	// unknownNames: no worker has registered any name, so a start is refused unless it allows
	// an unregistered name (and is then answered name_registered false).
	unknownNames bool
	sends        int
	gets         int
	followed     []uint64 // from_offset of each ReadStream

	startAndSends []*pb.StartAndSendRequest
	updates       []*pb.UpdateWorkflowRequest
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
	if f.unknownNames && !req.GetAllowUnregistered() {
		return nil, status.Error(codes.NotFound, "no worker has registered it")
	}
	started := &pb.Workflow{WorkflowId: req.GetWorkflowId(), Tags: req.GetTags()}
	return &pb.StartWorkflowResponse{Workflow: started, Created: true, NameRegistered: !f.unknownNames}, nil
}

// DeleteWorkflow answers the one asked for, and with cascade a child of it.
func (f *fakeWorkflows) DeleteWorkflow(ctx context.Context, req *pb.DeleteWorkflowRequest, _ ...grpc.CallOption) (*pb.DeleteWorkflowResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deletes = append(f.deletes, req)
	if err := f.answer(ctx); err != nil {
		return nil, err
	}
	ids := []string{req.GetWorkflowId()}
	if req.GetCascade() {
		ids = append(ids, req.GetWorkflowId()+"-child")
	}
	return &pb.DeleteWorkflowResponse{DeletedWorkflowIds: ids}, nil
}

// ForkWorkflow answers the fork the request names, its lineage set from the request.
func (f *fakeWorkflows) ForkWorkflow(ctx context.Context, req *pb.ForkWorkflowRequest, _ ...grpc.CallOption) (*pb.ForkWorkflowResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forks = append(f.forks, req)
	if err := f.answer(ctx); err != nil {
		return nil, err
	}
	return &pb.ForkWorkflowResponse{Workflow: &pb.Workflow{
		WorkflowId:           req.GetNewWorkflowId(),
		Status:               pb.WorkflowStatus_WORKFLOW_STATUS_ENQUEUED,
		AppVersion:           req.GetAppVersion(),
		QueueName:            req.GetQueueName(),
		ForkedFromWorkflowId: req.GetWorkflowId(),
		ForkedFromStep:       req.GetFromStep(),
	}}, nil
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

// StartAndSend answers that it started the workflow the request names and sent message m-1.
func (f *fakeWorkflows) StartAndSend(ctx context.Context, req *pb.StartAndSendRequest, _ ...grpc.CallOption) (*pb.StartAndSendResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.startAndSends = append(f.startAndSends, req)
	if err := f.answer(ctx); err != nil {
		return nil, err
	}
	started := &pb.Workflow{WorkflowId: req.GetStart().GetWorkflowId(), WorkflowName: req.GetStart().GetWorkflowName()}
	return &pb.StartAndSendResponse{Workflow: started, Created: true, NameRegistered: true, MessageId: "m-1"}, nil
}

// UpdateWorkflow answers {"total": 42} under the request's update id.
func (f *fakeWorkflows) UpdateWorkflow(ctx context.Context, req *pb.UpdateWorkflowRequest, _ ...grpc.CallOption) (*pb.UpdateWorkflowResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.updates = append(f.updates, req)
	if err := f.answer(ctx); err != nil {
		return nil, err
	}
	result, _ := structpb.NewStruct(map[string]any{"total": 42})
	return &pb.UpdateWorkflowResponse{UpdateId: req.GetUpdateId(), Result: &pb.Payload{Content: &pb.Payload_Json{Json: structpb.NewStructValue(result)}}}, nil
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

// A fork carries its options; without an id it is given one here, and every resend after
// UNAVAILABLE carries the same, so a lost reply cannot make a second fork. Without FromStep
// the request leaves from_step absent (copy every step), which is not step 0.
func TestClientForkCarriesItsOptionsAndResendsUnderOneID(t *testing.T) {
	f := &fakeWorkflows{}
	c := &Client{workflows: f}
	opts := ForkOptions{FromStep: FromStep(1), ID: "wf-fixed", AppVersion: "v2", Queue: "other"}
	fork, err := c.Fork(context.Background(), "wf", opts)
	if err != nil {
		t.Fatal(err)
	}
	req := f.forks[0]
	if req.GetWorkflowId() != "wf" || req.FromStep == nil || req.GetFromStep() != 1 || req.GetNewWorkflowId() != "wf-fixed" ||
		req.GetAppVersion() != "v2" || req.GetQueueName() != "other" {
		t.Fatalf("request %v", req)
	}
	if fork.ID != "wf-fixed" || fork.Status != StatusEnqueued || fork.ForkedFromID != "wf" || fork.ForkedFromStep != 1 {
		t.Fatalf("fork %+v", fork)
	}

	f.refuse = 2
	fork, err = c.Fork(context.Background(), "wf", ForkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tries := f.forks[1:]
	if len(tries) != 3 {
		t.Fatalf("%d tries, want 3", len(tries))
	}
	id := tries[0].GetNewWorkflowId()
	uuidV7 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	if !uuidV7.MatchString(id) || tries[1].GetNewWorkflowId() != id || tries[2].GetNewWorkflowId() != id || fork.ID != id {
		t.Fatalf("ids %q %q %q, fork %q", id, tries[1].GetNewWorkflowId(), tries[2].GetNewWorkflowId(), fork.ID)
	}
	if tries[0].FromStep != nil || tries[0].GetAppVersion() != "" || tries[0].GetQueueName() != "" {
		t.Fatalf("defaults: %v", tries[0])
	}

	// Anything but UNAVAILABLE goes to the caller at once.
	f.refuse, f.code = 1, codes.AlreadyExists
	_, err = c.Fork(context.Background(), "wf", opts)
	var werr *Error
	if !errors.As(err, &werr) || werr.Code != codes.AlreadyExists || len(f.forks) != 5 {
		t.Fatalf("got %v after %d tries; want ALREADY_EXISTS after one", err, len(f.forks)-4)
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

// A start-and-send carries the start as Start would make it (an id chosen here when none is
// given) and the message; like a send, it is retried only with an idempotency key, and every
// try is the same start under the same id.
func TestClientStartAndSendRetriesOnlyWithAKey(t *testing.T) {
	f := &fakeWorkflows{refuse: 1}
	c := &Client{workflows: f}
	opts := &StartOptions{Queue: "q", Tags: map[string]string{"customer": "ada"}}
	_, err := c.StartAndSend(context.Background(), "customer", "ada", opts, "orders", "tea", nil)
	var werr *Error
	if !errors.As(err, &werr) || werr.Code != codes.Unavailable || len(f.startAndSends) != 1 {
		t.Fatalf("without a key: %v after %d tries", err, len(f.startAndSends))
	}

	f.refuse = 2
	got, err := c.StartAndSend(context.Background(), "customer", "ada", opts, "orders", "tea", &SendOptions{IdempotencyKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	tries := f.startAndSends[1:]
	if len(tries) != 3 {
		t.Fatalf("with a key: %d tries, want 3", len(tries))
	}
	req := tries[0]
	id := req.GetStart().GetWorkflowId()
	uuidV7 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	if !uuidV7.MatchString(id) || tries[1].GetStart().GetWorkflowId() != id || tries[2].GetStart().GetWorkflowId() != id {
		t.Fatalf("ids %q %q %q", id, tries[1].GetStart().GetWorkflowId(), tries[2].GetStart().GetWorkflowId())
	}
	if req.GetStart().GetWorkflowName() != "customer" || req.GetStart().GetQueueName() != "q" || req.GetStart().GetTags()["customer"] != "ada" ||
		req.GetStart().GetInput().GetJson().GetStringValue() != "ada" || req.GetTopic() != "orders" ||
		req.GetMessage().GetJson().GetStringValue() != "tea" || req.GetIdempotencyKey() != "k" {
		t.Fatalf("request %v", req)
	}
	if got.ID != id || got.Name != "customer" || !got.Created || !got.NameRegistered || got.MessageID != "m-1" || got.Duplicate {
		t.Fatalf("result %+v", got)
	}
}

// An update without an id is given one here, so its resends after UNAVAILABLE are the same
// update (the server delivers and answers an update id once): every try carries the same id,
// and the answer comes back decoded. A given id is kept; anything but UNAVAILABLE goes to the
// caller at once.
func TestClientUpdateResendsUnderOneUpdateID(t *testing.T) {
	f := &fakeWorkflows{refuse: 2}
	c := &Client{workflows: f}
	got, err := UpdateWorkflowAs[map[string]int](context.Background(), c, "wf", "add", map[string]int{"n": 41}, &UpdateOptions{Timeout: 5 * time.Second})
	if err != nil || got["total"] != 42 {
		t.Fatalf("answer %v %v", got, err)
	}
	if len(f.updates) != 3 {
		t.Fatalf("%d tries, want 3", len(f.updates))
	}
	req := f.updates[0]
	id := req.GetUpdateId()
	uuidV7 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	if !uuidV7.MatchString(id) || f.updates[1].GetUpdateId() != id || f.updates[2].GetUpdateId() != id {
		t.Fatalf("ids %q %q %q", id, f.updates[1].GetUpdateId(), f.updates[2].GetUpdateId())
	}
	if req.GetWorkflowId() != "wf" || req.GetName() != "add" || req.GetArgs().GetJson().GetStructValue().GetFields()["n"].GetNumberValue() != 41 ||
		req.GetTimeout().AsDuration() != 5*time.Second {
		t.Fatalf("request %v", req)
	}

	// Without a timeout the request leaves it absent: the server's default.
	if _, err := c.UpdateWorkflow(context.Background(), "wf", "add", nil, &UpdateOptions{UpdateID: "mine"}); err != nil {
		t.Fatal(err)
	}
	if req := f.updates[3]; req.GetUpdateId() != "mine" || req.Timeout != nil {
		t.Fatalf("request %v", req)
	}

	f.refuse, f.code = 1, codes.FailedPrecondition
	_, err = c.UpdateWorkflow(context.Background(), "wf", "add", nil, nil)
	var werr *Error
	if !errors.As(err, &werr) || werr.Code != codes.FailedPrecondition || len(f.updates) != 5 {
		t.Fatalf("got %v after %d tries; want FAILED_PRECONDITION after one", err, len(f.updates)-4)
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

// AllowUnregistered is carried by the request, and the answer's name_registered comes back as
// NameRegistered.
func TestClientStartAllowsAnUnregisteredName(t *testing.T) {
	f := &fakeWorkflows{unknownNames: true}
	c := &Client{workflows: f}
	if _, err := c.Start(context.Background(), "later", nil, nil); err == nil || f.starts[0].GetAllowUnregistered() {
		t.Fatalf("a start without the option: %v, request %v", err, f.starts[0])
	}
	started, err := c.Start(context.Background(), "later", nil, &StartOptions{AllowUnregistered: true})
	if err != nil || !f.starts[1].GetAllowUnregistered() || started.NameRegistered || !started.Created {
		t.Fatalf("with the option: %+v %v, request %v", started, err, f.starts[1])
	}
	f.unknownNames = false
	started, err = c.Start(context.Background(), "later", nil, &StartOptions{AllowUnregistered: true})
	if err != nil || !started.NameRegistered {
		t.Fatalf("a registered name: %+v %v", started, err)
	}
}

// A delete carries its cascade and returns the ids deleted; it is sent once: after a lost
// reply a second one would find the workflow gone, so UNAVAILABLE goes to the caller.
func TestClientDeleteIsSentOnce(t *testing.T) {
	f := &fakeWorkflows{}
	c := &Client{workflows: f}
	ids, err := c.Delete(context.Background(), "wf", true)
	if err != nil || len(ids) != 2 || ids[0] != "wf" || ids[1] != "wf-child" || !f.deletes[0].GetCascade() {
		t.Fatalf("with cascade: %v %v, request %v", ids, err, f.deletes[0])
	}
	if ids, err := c.Delete(context.Background(), "wf", false); err != nil || len(ids) != 1 || f.deletes[1].GetCascade() {
		t.Fatalf("without cascade: %v %v, request %v", ids, err, f.deletes[1])
	}
	f.refuse = 1
	_, err = c.Delete(context.Background(), "wf", false)
	var werr *Error
	if !errors.As(err, &werr) || werr.Code != codes.Unavailable || len(f.deletes) != 3 {
		t.Fatalf("got %v after %d tries; want UNAVAILABLE after one", err, len(f.deletes)-2)
	}
}
