package waymark_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
)

func TestStartIsIdempotentAndGetListFind(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	queue, id := newQueue(t, c), unique("wf")
	opts := &waymark.StartOptions{ID: id, Queue: queue, AppVersion: "v1", Priority: 3, PartitionKey: "p1", Timeout: time.Hour}
	first, err := c.Start(ctx, "noworker", map[string]any{"n": 1}, opts)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Start(ctx, "noworker", map[string]any{"n": 1}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !first.Created || again.Created || again.ID != id {
		t.Fatalf("created %v then %v (id %s)", first.Created, again.Created, again.ID)
	}
	wf, err := c.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if wf.Status != waymark.StatusEnqueued || wf.Queue != queue || wf.AppVersion != "v1" || wf.Priority != 3 ||
		wf.PartitionKey != "p1" || wf.Deadline.IsZero() || string(wf.Input) != `{"n":1}` {
		t.Fatalf("unexpected workflow: %+v", wf)
	}
	page, next, err := c.List(ctx, &waymark.ListOptions{Queue: queue, Statuses: []waymark.Status{waymark.StatusEnqueued},
		CreatedAfter: time.Now().Add(-time.Minute), CreatedBefore: time.Now().Add(time.Minute)})
	if err != nil || len(page) != 1 || page[0].ID != id || next != "" {
		t.Fatalf("list: %v %v %q", page, err, next)
	}
	var seen int
	for w, err := range c.All(ctx, &waymark.ListOptions{Name: "noworker", PageSize: 1}) {
		if err != nil {
			t.Fatal(err)
		}
		if w.ID == id {
			seen++
		}
	}
	if seen != 1 {
		t.Fatalf("All saw the workflow %d times", seen)
	}
}

func TestErrorsCarryTheReason(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	_, err := c.Get(ctx, unique("missing"))
	var werr *waymark.Error
	if !errors.As(err, &werr) || werr.Reason != "WORKFLOW_NOT_FOUND" || werr.Code != codes.NotFound {
		t.Fatalf("want WORKFLOW_NOT_FOUND, got %#v", err)
	}
	if !waymark.IsReason(err, "WORKFLOW_NOT_FOUND") {
		t.Fatal("IsReason does not match")
	}
	// Await bounded by the context: the error reads as the context's.
	queue := newQueue(t, c)
	id := start(t, c, "noworker", queue, nil)
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := c.Await(short, id); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want a deadline error, got %v", err)
	}
}

func TestCancelResumeAndDelay(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	queue := newQueue(t, c)
	id := start(t, c, "noworker", queue, nil)
	wf, err := c.Cancel(ctx, id)
	if err != nil || wf.Status != waymark.StatusCancelled {
		t.Fatalf("cancel: %v %v", wf, err)
	}
	wf, err = c.Resume(ctx, id)
	if err != nil || wf.Status != waymark.StatusEnqueued {
		t.Fatalf("resume: %+v %v", wf, err)
	}
	s, err := c.Start(ctx, "noworker", nil, &waymark.StartOptions{Queue: queue, Delay: time.Hour})
	if err != nil || s.Status != waymark.StatusDelayed || s.WakeAt.Before(time.Now().Add(50*time.Minute)) {
		t.Fatalf("delayed start: %+v %v", s, err)
	}
	wf, err = c.Delay(ctx, s.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the delayed workflow to be enqueued", func() (bool, error) {
		wf, err := c.Get(ctx, s.ID)
		return err == nil && wf.Status == waymark.StatusEnqueued, err
	})
	if _, err := c.Delay(ctx, id, time.Minute); !waymark.IsReason(err, "WORKFLOW_NOT_DELAYED") {
		t.Fatalf("delay of an enqueued workflow: %v", err)
	}
}

func TestDedupAndDebounce(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	queue, dedup := newQueue(t, c), unique("d")
	first, err := c.Start(ctx, "noworker", nil, &waymark.StartOptions{Queue: queue, DedupID: dedup})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Start(ctx, "noworker", nil, &waymark.StartOptions{Queue: queue, DedupID: dedup})
	var werr *waymark.Error
	if !errors.As(err, &werr) || werr.Reason != "DEDUP_ID_TAKEN" || werr.Metadata["holder_workflow_id"] != first.ID {
		t.Fatalf("want DEDUP_ID_TAKEN naming %s, got %#v", first.ID, err)
	}
	holder, err := c.Start(ctx, "noworker", nil, &waymark.StartOptions{Queue: queue, DedupID: dedup, ReturnExisting: true})
	if err != nil || holder.Created || holder.ID != first.ID {
		t.Fatalf("return existing: %+v %v", holder, err)
	}
	key := unique("k")
	deb := &waymark.StartOptions{Queue: queue, Delay: time.Hour, Debounce: &waymark.Debounce{Key: key, MaxDelay: 2 * time.Hour}}
	a, err := c.Start(ctx, "noworker", 1, deb)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Start(ctx, "noworker", 2, deb)
	if err != nil {
		t.Fatal(err)
	}
	if a.ID != b.ID || string(b.Input) != "2" {
		t.Fatalf("debounced starts did not collapse: %s %s input %s", a.ID, b.ID, b.Input)
	}
}

func TestQueues(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	name := unique("q")
	q, err := c.CreateQueue(ctx, name, waymark.QueueLimits{
		WorkerConcurrency: waymark.Limit(2),
		RateLimit:         &waymark.RateLimit{MaxStarts: 10, Period: time.Second},
	})
	if err != nil || *q.Limits.WorkerConcurrency != 2 || q.Limits.RateLimit.Period != time.Second {
		t.Fatalf("create: %+v %v", q, err)
	}
	if _, err := c.CreateQueue(ctx, name, waymark.QueueLimits{}); !waymark.IsReason(err, "QUEUE_EXISTS") {
		t.Fatalf("create twice: %v", err)
	}
	q, err = c.UpdateQueue(ctx, name, waymark.QueueLimits{GlobalConcurrency: waymark.Limit(5)}, waymark.FieldGlobalConcurrency, waymark.FieldRateLimit)
	if err != nil || *q.Limits.GlobalConcurrency != 5 || q.Limits.RateLimit != nil || *q.Limits.WorkerConcurrency != 2 {
		t.Fatalf("update: %+v %v", q, err)
	}
	got, err := c.GetQueue(ctx, name)
	if err != nil || *got.Limits.GlobalConcurrency != 5 {
		t.Fatalf("get: %+v %v", got, err)
	}
	all, err := c.ListQueues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, q := range all {
		found = found || q.Name == name
	}
	if !found {
		t.Fatal("list does not have the queue")
	}
	if err := c.DeleteQueue(ctx, name); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetQueue(ctx, name); !waymark.IsReason(err, "QUEUE_NOT_FOUND") {
		t.Fatalf("get after delete: %v", err)
	}
	if err := c.DeleteQueue(ctx, "default"); !waymark.IsReason(err, "QUEUE_PROTECTED") {
		t.Fatalf("delete default: %v", err)
	}
}
