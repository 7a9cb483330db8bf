package waymark

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// What tags, SetVersion and the bulk calls put on the wire and how their answers map, against
// the in-memory WorkflowService of client_retry_test.go; which of them are resent on
// UNAVAILABLE.

// SetWorkflowVersion answers the workflow re-pinned.
func (f *fakeWorkflows) SetWorkflowVersion(ctx context.Context, req *pb.SetWorkflowVersionRequest, _ ...grpc.CallOption) (*pb.SetWorkflowVersionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.versions = append(f.versions, req)
	if err := f.answer(ctx); err != nil {
		return nil, err
	}
	return &pb.SetWorkflowVersionResponse{Workflow: &pb.Workflow{WorkflowId: req.GetWorkflowId(), AppVersion: req.GetAppVersion()}}, nil
}

// ListWorkflows answers one workflow carrying the tags asked for.
func (f *fakeWorkflows) ListWorkflows(ctx context.Context, req *pb.ListWorkflowsRequest, _ ...grpc.CallOption) (*pb.ListWorkflowsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists = append(f.lists, req)
	if err := f.answer(ctx); err != nil {
		return nil, err
	}
	return &pb.ListWorkflowsResponse{Workflows: []*pb.Workflow{{WorkflowId: "tagged", Tags: req.GetTags()}}}, nil
}

// BulkWorkflows answers a dry run with a total of 7, else two batches: the first (no token)
// matched 2, applied 1, skipped 1 finished, next "p2"; the second matched 3, applied 1,
// skipped 1 finished and 1 not finished, the last.
func (f *fakeWorkflows) BulkWorkflows(ctx context.Context, req *pb.BulkWorkflowsRequest, _ ...grpc.CallOption) (*pb.BulkWorkflowsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bulks = append(f.bulks, req)
	if err := f.answer(ctx); err != nil {
		return nil, err
	}
	switch {
	case req.GetDryRun():
		return &pb.BulkWorkflowsResponse{Total: proto.Uint64(7)}, nil
	case req.GetPageToken() == "":
		return &pb.BulkWorkflowsResponse{Matched: 2, Applied: 1, Skipped: map[string]uint32{"WORKFLOW_FINISHED": 1}, NextPageToken: "p2"}, nil
	default:
		return &pb.BulkWorkflowsResponse{Matched: 3, Applied: 1, Skipped: map[string]uint32{"WORKFLOW_FINISHED": 1, "WORKFLOW_NOT_FINISHED": 1}}, nil
	}
}

// Tags go out with a start and a listing, and come back in Workflow.Tags; none is nil.
func TestClientTagsOnStartListAndWorkflow(t *testing.T) {
	f := &fakeWorkflows{}
	c := &Client{workflows: f}
	tags := map[string]string{"team": "payments", "k8s.io/app": "a=b"}
	started, err := c.Start(context.Background(), "greet", nil, &StartOptions{Tags: tags})
	if err != nil || !maps.Equal(f.starts[0].GetTags(), tags) || !maps.Equal(started.Tags, tags) {
		t.Fatalf("start: %+v %v, request %v", started, err, f.starts[0])
	}
	if started, err := c.Start(context.Background(), "greet", nil, nil); err != nil || f.starts[1].GetTags() != nil || len(started.Tags) != 0 {
		t.Fatalf("start without tags: %+v %v, request %v", started, err, f.starts[1])
	}
	page, _, err := c.List(context.Background(), &ListOptions{Tags: map[string]string{"team": "payments"}})
	if err != nil || len(page) != 1 || page[0].Tags["team"] != "payments" || !maps.Equal(f.lists[0].GetTags(), map[string]string{"team": "payments"}) {
		t.Fatalf("list: %v %v, request %v", page, err, f.lists[0])
	}
}

// SetVersion carries its arguments and is resent on UNAVAILABLE; another refusal goes to the
// caller at once.
func TestClientSetVersionCarriesItsArgumentsAndResends(t *testing.T) {
	f := &fakeWorkflows{refuse: 2}
	c := &Client{workflows: f}
	wf, err := c.SetVersion(context.Background(), "wf", "v2", true)
	if err != nil || wf.ID != "wf" || wf.AppVersion != "v2" || len(f.versions) != 3 {
		t.Fatalf("set version: %+v %v after %d tries", wf, err, len(f.versions))
	}
	for _, req := range f.versions {
		if req.GetWorkflowId() != "wf" || req.GetAppVersion() != "v2" || !req.GetAllowUnserved() {
			t.Fatalf("request %v", req)
		}
	}
	f.refuse, f.code = 1, codes.FailedPrecondition
	_, err = c.SetVersion(context.Background(), "wf", "v3", false)
	var werr *Error
	if !errors.As(err, &werr) || werr.Code != codes.FailedPrecondition || len(f.versions) != 4 || f.versions[3].GetAllowUnserved() {
		t.Fatalf("got %v after %d tries; want FAILED_PRECONDITION after one", err, len(f.versions)-3)
	}
}

// Every filter field goes on the wire; CountMatching is a dry run answering the total.
func TestClientCountMatchingCarriesTheWholeFilter(t *testing.T) {
	f := &fakeWorkflows{refuse: 1}
	c := &Client{workflows: f}
	after, before := time.UnixMilli(1_700_000_000_000), time.UnixMilli(1_800_000_000_000)
	filter := WorkflowFilter{
		Statuses: []Status{StatusEnqueued, StatusCancelled}, Name: "greet", Queue: "q",
		CreatedAfter: after, CreatedBefore: before, WorkerID: "w1", AppVersion: "retired",
		ParentID: "parent", Tags: map[string]string{"job": "nightly"},
	}
	n, err := c.CountMatching(context.Background(), filter)
	if err != nil || n != 7 || len(f.bulks) != 2 {
		t.Fatalf("count: %d %v after %d tries", n, err, len(f.bulks))
	}
	req := f.bulks[1]
	w := req.GetFilter()
	want := []pb.WorkflowStatus{pb.WorkflowStatus_WORKFLOW_STATUS_ENQUEUED, pb.WorkflowStatus_WORKFLOW_STATUS_CANCELLED}
	if !req.GetDryRun() || len(w.GetStatuses()) != 2 || w.GetStatuses()[0] != want[0] || w.GetStatuses()[1] != want[1] ||
		w.GetWorkflowName() != "greet" || w.GetQueueName() != "q" || !w.GetCreatedAfter().AsTime().Equal(after) ||
		!w.GetCreatedBefore().AsTime().Equal(before) || w.GetWorkerId() != "w1" || w.GetAppVersion() != "retired" ||
		w.GetParentWorkflowId() != "parent" || !maps.Equal(w.GetTags(), map[string]string{"job": "nightly"}) {
		t.Fatalf("request %v", req)
	}
	// The zero filter matches everything: nothing set.
	if _, err := c.CountMatching(context.Background(), WorkflowFilter{}); err != nil {
		t.Fatal(err)
	}
	if w := f.bulks[2].GetFilter(); !proto.Equal(w, &pb.WorkflowFilter{}) {
		t.Fatalf("the zero filter went out as %v", w)
	}
}

// Each action goes out as its oneof case; a batch carries its size and token, and the
// outcome maps back.
func TestClientBulkBatchCarriesTheAction(t *testing.T) {
	f := &fakeWorkflows{}
	c := &Client{workflows: f}
	filter := WorkflowFilter{Tags: map[string]string{"job": "nightly"}}
	for i, action := range []BulkAction{BulkCancel{}, BulkResume{}, BulkDelete{}, BulkSetVersion{AppVersion: "v2", AllowUnserved: true}} {
		out, err := c.BulkBatch(context.Background(), filter, action, 25, "p2")
		if err != nil || out.Matched != 3 || out.Applied != 1 || out.NextPageToken != "" ||
			!maps.Equal(out.Skipped, map[string]uint64{"WORKFLOW_FINISHED": 1, "WORKFLOW_NOT_FINISHED": 1}) {
			t.Fatalf("%T: %+v %v", action, out, err)
		}
		req := f.bulks[i]
		if req.GetDryRun() || req.GetBatchSize() != 25 || req.GetPageToken() != "p2" || req.GetFilter().GetTags()["job"] != "nightly" {
			t.Fatalf("%T: request %v", action, req)
		}
	}
	if f.bulks[0].GetCancel() == nil || f.bulks[1].GetResume() == nil || f.bulks[2].GetDelete() == nil {
		t.Fatalf("actions %v %v %v", f.bulks[0].GetAction(), f.bulks[1].GetAction(), f.bulks[2].GetAction())
	}
	if sv := f.bulks[3].GetSetVersion(); sv.GetAppVersion() != "v2" || !sv.GetAllowUnserved() {
		t.Fatalf("set version: %v", f.bulks[3].GetAction())
	}
}

// refusingSecondBulk refuses the second BulkWorkflows call with UNAVAILABLE, keeping it too.
type refusingSecondBulk struct {
	*fakeWorkflows
	calls int
}

func (r *refusingSecondBulk) BulkWorkflows(ctx context.Context, req *pb.BulkWorkflowsRequest, opts ...grpc.CallOption) (*pb.BulkWorkflowsResponse, error) {
	if r.calls++; r.calls == 2 {
		r.bulks = append(r.bulks, req)
		return nil, status.Error(codes.Unavailable, "the database is restarting")
	}
	return r.fakeWorkflows.BulkWorkflows(ctx, req, opts...)
}

// Bulk goes batch after batch until the token is empty, summing; a batch refused UNAVAILABLE
// is resent with the same token (a repeated batch changes nothing twice); another refusal
// stops it.
func TestClientBulkLoopsOverBatchesAndSums(t *testing.T) {
	f := &fakeWorkflows{}
	c := &Client{workflows: &refusingSecondBulk{fakeWorkflows: f}}
	action := BulkSetVersion{AppVersion: "v2"}
	sum, err := c.Bulk(context.Background(), WorkflowFilter{AppVersion: "retired"}, action, 2)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Matched != 5 || sum.Applied != 2 || sum.NextPageToken != "" ||
		!maps.Equal(sum.Skipped, map[string]uint64{"WORKFLOW_FINISHED": 2, "WORKFLOW_NOT_FINISHED": 1}) {
		t.Fatalf("sum %+v", sum)
	}
	var tokens []string
	for _, req := range f.bulks {
		tokens = append(tokens, req.GetPageToken())
		if req.GetBatchSize() != 2 || req.GetFilter().GetAppVersion() != "retired" || req.GetSetVersion().GetAppVersion() != "v2" {
			t.Fatalf("request %v", req)
		}
	}
	if len(tokens) != 3 || tokens[0] != "" || tokens[1] != "p2" || tokens[2] != "p2" {
		t.Fatalf("tokens %q; want the first batch, then the second twice", tokens)
	}

	f.refuse, f.code = 1, codes.InvalidArgument
	sum, err = c.Bulk(context.Background(), WorkflowFilter{}, BulkCancel{}, -1)
	var werr *Error
	if !errors.As(err, &werr) || werr.Code != codes.InvalidArgument || sum != nil || len(f.bulks) != 4 {
		t.Fatalf("got %+v %v after %d calls; want INVALID_ARGUMENT after one", sum, err, len(f.bulks)-3)
	}
}
