package waymark

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// Lists come a page at a time: the client reads every page, following the next page token
// until it is empty, and returns the whole list in order. A page shorter than the others (the
// server stops a page before its payloads would pass the response size limit) is not the last,
// and a page answered UNAVAILABLE is asked for again with the same token. Against in-memory
// services that answer in pages.

// fakePages are the item numbers of each page of every fake list: page i (past the first) is
// asked for with the token "page-<i>". A short page and an empty one come before the last.
var fakePages = [][]int{{0, 1}, {2}, {3, 4, 5}, {}, {6}}

// askedTokens: every page asked for once, the refused third page twice with its own token.
var askedTokens = []string{"", "page-1", "page-2", "page-2", "page-3", "page-4"}

// pager answers one list and keeps the tokens it was asked for; it refuses the third page
// once with UNAVAILABLE.
type pager struct {
	mu      sync.Mutex
	tokens  []string
	refused bool
}

func (p *pager) page(token string) ([]int, string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tokens = append(p.tokens, token)
	i := 0
	if token != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(token, "page-"))
		if err != nil || n <= 0 || n >= len(fakePages) {
			return nil, "", status.Error(codes.InvalidArgument, "page_token is not one this server issued")
		}
		i = n
	}
	if i == 2 && !p.refused {
		p.refused = true
		return nil, "", status.Error(codes.Unavailable, "the database is restarting")
	}
	next := ""
	if i+1 < len(fakePages) {
		next = fmt.Sprintf("page-%d", i+1)
	}
	return fakePages[i], next, nil
}

func (p *pager) check(t *testing.T, what string, got []string, name func(int) string) {
	t.Helper()
	var want []string
	for _, page := range fakePages {
		for _, n := range page {
			want = append(want, name(n))
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s: got %v, want %v", what, got, want)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !slices.Equal(p.tokens, askedTokens) {
		t.Errorf("%s: pages asked for with %q, want %q", what, p.tokens, askedTokens)
	}
}

type pagedWorkflows struct {
	pb.WorkflowServiceClient
	steps, messages, events, workflows pager
}

func (f *pagedWorkflows) ListSteps(_ context.Context, req *pb.ListStepsRequest, _ ...grpc.CallOption) (*pb.ListStepsResponse, error) {
	items, next, err := f.steps.page(req.GetPageToken())
	if err != nil {
		return nil, err
	}
	r := &pb.ListStepsResponse{NextPageToken: next}
	for _, n := range items {
		r.Steps = append(r.Steps, &pb.Step{StepId: uint32(n), Name: fmt.Sprintf("s%d", n)})
	}
	return r, nil
}

func (f *pagedWorkflows) ListMessages(_ context.Context, req *pb.ListMessagesRequest, _ ...grpc.CallOption) (*pb.ListMessagesResponse, error) {
	items, next, err := f.messages.page(req.GetPageToken())
	if err != nil {
		return nil, err
	}
	r := &pb.ListMessagesResponse{NextPageToken: next}
	for _, n := range items {
		r.Messages = append(r.Messages, &pb.Message{MessageId: fmt.Sprintf("m%d", n)})
	}
	return r, nil
}

func (f *pagedWorkflows) ListEvents(_ context.Context, req *pb.ListEventsRequest, _ ...grpc.CallOption) (*pb.ListEventsResponse, error) {
	items, next, err := f.events.page(req.GetPageToken())
	if err != nil {
		return nil, err
	}
	r := &pb.ListEventsResponse{NextPageToken: next}
	for _, n := range items {
		r.Events = append(r.Events, &pb.Event{Key: fmt.Sprintf("e%d", n)})
	}
	return r, nil
}

func (f *pagedWorkflows) ListWorkflows(_ context.Context, req *pb.ListWorkflowsRequest, _ ...grpc.CallOption) (*pb.ListWorkflowsResponse, error) {
	items, next, err := f.workflows.page(req.GetPageToken())
	if err != nil {
		return nil, err
	}
	r := &pb.ListWorkflowsResponse{NextPageToken: next}
	for _, n := range items {
		r.Workflows = append(r.Workflows, &pb.Workflow{WorkflowId: fmt.Sprintf("w%d", n)})
	}
	return r, nil
}

type pagedQueues struct {
	pb.QueueServiceClient
	pager
}

func (f *pagedQueues) ListQueues(_ context.Context, req *pb.ListQueuesRequest, _ ...grpc.CallOption) (*pb.ListQueuesResponse, error) {
	items, next, err := f.page(req.GetPageToken())
	if err != nil {
		return nil, err
	}
	r := &pb.ListQueuesResponse{NextPageToken: next}
	for _, n := range items {
		r.Queues = append(r.Queues, &pb.Queue{Name: fmt.Sprintf("q%d", n)})
	}
	return r, nil
}

type pagedSchedules struct {
	pb.ScheduleServiceClient
	pager
}

func (f *pagedSchedules) ListSchedules(_ context.Context, req *pb.ListSchedulesRequest, _ ...grpc.CallOption) (*pb.ListSchedulesResponse, error) {
	items, next, err := f.page(req.GetPageToken())
	if err != nil {
		return nil, err
	}
	r := &pb.ListSchedulesResponse{NextPageToken: next}
	for _, n := range items {
		r.Schedules = append(r.Schedules, &pb.Schedule{Name: fmt.Sprintf("s%d", n)})
	}
	return r, nil
}

func names[T any](items []T, name func(T) string) []string {
	out := make([]string, 0, len(items))
	for _, item := range items {
		out = append(out, name(item))
	}
	return out
}

func TestListsAreReadToTheLastPage(t *testing.T) {
	w, q, s := &pagedWorkflows{}, &pagedQueues{}, &pagedSchedules{}
	c := &Client{workflows: w, queues: q, schedules: s}
	ctx := context.Background()

	steps, err := c.Steps(ctx, "wf")
	if err != nil {
		t.Fatal(err)
	}
	w.steps.check(t, "steps", names(steps, func(s StepRecord) string { return fmt.Sprintf("%d:%s", s.ID, s.Name) }),
		func(n int) string { return fmt.Sprintf("%d:s%d", n, n) })

	messages, err := c.Messages(ctx, "wf")
	if err != nil {
		t.Fatal(err)
	}
	w.messages.check(t, "messages", names(messages, func(m Message) string { return m.ID }),
		func(n int) string { return fmt.Sprintf("m%d", n) })

	events, err := c.Events(ctx, "wf")
	if err != nil {
		t.Fatal(err)
	}
	w.events.check(t, "events", names(events, func(e Event) string { return e.Key }),
		func(n int) string { return fmt.Sprintf("e%d", n) })

	queues, err := c.ListQueues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	q.check(t, "queues", names(queues, func(q *Queue) string { return q.Name }),
		func(n int) string { return fmt.Sprintf("q%d", n) })

	schedules, err := c.ListSchedules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.check(t, "schedules", names(schedules, func(s *Schedule) string { return s.Name }),
		func(n int) string { return fmt.Sprintf("s%d", n) })

	// All goes on past the short page too, page by page as the iteration goes.
	var workflows []string
	for wf, err := range c.All(ctx, &ListOptions{PageSize: 3}) {
		if err != nil {
			t.Fatal(err)
		}
		workflows = append(workflows, wf.ID)
	}
	w.workflows.check(t, "All", workflows, func(n int) string { return fmt.Sprintf("w%d", n) })
}

// An empty list is an empty slice, as before lists were paged.
func TestAnEmptyListIsEmpty(t *testing.T) {
	c := &Client{queues: &emptyQueues{}}
	queues, err := c.ListQueues(context.Background())
	if err != nil || queues == nil || len(queues) != 0 {
		t.Fatalf("got %#v, %v", queues, err)
	}
}

type emptyQueues struct{ pb.QueueServiceClient }

func (emptyQueues) ListQueues(context.Context, *pb.ListQueuesRequest, ...grpc.CallOption) (*pb.ListQueuesResponse, error) {
	return &pb.ListQueuesResponse{}, nil
}
