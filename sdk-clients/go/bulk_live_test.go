package waymark_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
)

// Finding and moving many workflows at once, against the real server (as
// integration-tests/tests/bulk.rs does for the Rust client): tags given at the start and
// inherited by children (a child start's own replacing or adding keys), listed by, as are the
// parent, worker and version; re-pinning workflows stranded on a retired application
// version, one or by filter; bulk cancel, resume and delete by filter, with a dry run first,
// in batches, safe to run twice. Tag values and versions are the test's own, so other tests'
// workflows on the shared server never match.

// tagged lists the ids of the workflows carrying tags (and in status, when given), sorted.
func tagged(t *testing.T, c *waymark.Client, tags map[string]string, status ...waymark.Status) []string {
	t.Helper()
	var ids []string
	for w, err := range c.All(testCtx(t), &waymark.ListOptions{Tags: tags, Statuses: status, PageSize: 1000}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, w.ID)
	}
	slices.Sort(ids)
	return ids
}

func TestTagsAreKeptInheritedByChildrenAndListedBy(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	w, queue := newWorker(t, waymark.WorkerOptions{})
	waymark.RegisterWorkflow(w, "leaf", func(_ waymark.Context, n int) (int, error) { return n, nil })
	waymark.RegisterWorkflow(w, "family", func(ctx waymark.Context, _ any) (int, error) {
		a, err := waymark.RunChild[int](ctx, "leaf", 1, nil)
		if err != nil {
			return 0, err
		}
		b, err := waymark.RunChild[int](ctx, "leaf", 2, nil)
		return a + b, err
	})
	runWorker(t, w, queue)

	run := unique("r")
	tags := map[string]string{"team": "payments", "run": run}
	id := unique("fam")
	started, err := c.Start(ctx, "family", nil, &waymark.StartOptions{ID: id, Queue: queue, Tags: tags})
	if err != nil || !maps.Equal(started.Tags, tags) {
		t.Fatalf("start: %+v %v", started, err)
	}
	if wf := await(t, c, id); wf.Status != waymark.StatusSuccess || !maps.Equal(wf.Tags, tags) {
		t.Fatalf("the parent: %+v", wf)
	}
	if got, err := c.Get(ctx, id); err != nil || !maps.Equal(got.Tags, tags) {
		t.Fatalf("get: %+v %v", got, err)
	}

	// Listed by one of its tags: the parent and both children, which inherited them all.
	tree := tagged(t, c, map[string]string{"run": run})
	if len(tree) != 3 || !slices.Contains(tree, id) {
		t.Fatalf("the parent and both children: %v", tree)
	}
	for _, child := range tree {
		if child == id {
			continue
		}
		wf, err := c.Get(ctx, child)
		if err != nil || wf.ParentID != id || wf.Name != "leaf" || !maps.Equal(wf.Tags, tags) {
			t.Fatalf("child %s inherits: %+v %v", child, wf, err)
		}
	}
	// Every tag asked for must match.
	if both := tagged(t, c, map[string]string{"run": run, "team": "payments"}); !slices.Equal(both, tree) {
		t.Fatalf("both tags: %v", both)
	}
	if none := tagged(t, c, map[string]string{"run": run, "team": "ops"}); len(none) != 0 {
		t.Fatalf("all must match: %v", none)
	}
	// A workflow started without tags has none.
	plain := start(t, c, "leaf", queue, 3)
	if wf := await(t, c, plain); len(wf.Tags) != 0 {
		t.Fatalf("no tags given: %v", wf.Tags)
	}

	// Bounds: a key with `=` or more than 16 tags is refused, and nothing is started.
	bad := unique("bad-tag")
	_, err = c.Start(ctx, "leaf", 1, &waymark.StartOptions{ID: bad, Queue: queue, Tags: map[string]string{"a=b": "c"}})
	wantRefused(t, "a key with =", err, codes.InvalidArgument, "INVALID_ARGUMENT")
	many := map[string]string{}
	for i := range 17 {
		many[fmt.Sprintf("k%d", i)] = "v"
	}
	_, err = c.Start(ctx, "leaf", 1, &waymark.StartOptions{Queue: queue, Tags: many})
	wantRefused(t, "17 tags", err, codes.InvalidArgument, "INVALID_ARGUMENT")
	if !strings.Contains(err.Error(), "at most 16") {
		t.Fatalf("the refusal names the rule: %v", err)
	}
	_, err = c.Get(ctx, bad)
	wantRefused(t, "a refused start leaves nothing", err, codes.NotFound, "WORKFLOW_NOT_FOUND")
}

// listed lists the ids of the workflows opts matches, sorted.
func listed(t *testing.T, c *waymark.Client, opts waymark.ListOptions) []string {
	t.Helper()
	opts.PageSize = 1000
	ids := []string{}
	for w, err := range c.All(testCtx(t), &opts) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, w.ID)
	}
	slices.Sort(ids)
	return ids
}

func TestAChildStartOverridesInheritedTagsAndListsByParent(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	version := unique("v")
	w, queue := newWorker(t, waymark.WorkerOptions{AppVersion: version})
	waymark.RegisterWorkflow(w, "leaf", func(_ waymark.Context, n int) (int, error) { return n, nil })
	// One plain child, then one with the input's tags over the inherited ones.
	waymark.RegisterWorkflow(w, "family", func(ctx waymark.Context, own map[string]string) (int, error) {
		a, err := waymark.StartChild(ctx, "leaf", 1, &waymark.ChildOptions{ID: ctx.WorkflowID() + "-a"})
		if err != nil {
			return 0, err
		}
		b, err := waymark.StartChild(ctx, "leaf", 2, &waymark.ChildOptions{ID: ctx.WorkflowID() + "-b", Tags: own})
		if err != nil {
			return 0, err
		}
		x, err := waymark.AwaitChild[int](ctx, a)
		if err != nil {
			return 0, err
		}
		y, err := waymark.AwaitChild[int](ctx, b)
		return x + y, err
	})
	runWorker(t, w, queue)

	team := unique("a")
	tags := map[string]string{"team": team, "tier": "gold"}
	id := unique("fam")
	own := map[string]string{"tier": "silver", "extra": "x"}
	if _, err := c.Start(ctx, "family", own, &waymark.StartOptions{ID: id, Queue: queue, Tags: tags}); err != nil {
		t.Fatal(err)
	}
	if wf := await(t, c, id); wf.Status != waymark.StatusSuccess {
		t.Fatalf("the parent: %+v", wf)
	}
	plain, err := c.Get(ctx, id+"-a")
	if err != nil || !maps.Equal(plain.Tags, tags) {
		t.Fatalf("the plain child inherits the parent's tags: %+v %v", plain, err)
	}
	want := map[string]string{"team": team, "tier": "silver", "extra": "x"}
	if got, err := c.Get(ctx, id+"-b"); err != nil || !maps.Equal(got.Tags, want) {
		t.Fatalf("the other's own tags replace and add: %+v %v", got, err)
	}

	children := []string{id + "-a", id + "-b"}
	if got := listed(t, c, waymark.ListOptions{ParentID: id}); !slices.Equal(got, children) {
		t.Fatalf("by parent: %v", got)
	}
	if got := listed(t, c, waymark.ListOptions{Tags: map[string]string{"team": team, "tier": "silver"}}); !slices.Equal(got, children[1:]) {
		t.Fatalf("by the overridden tag: %v", got)
	}
	// The worker and version filters narrow the parent's children as the server has them.
	if plain.WorkerID == "" || plain.AppVersion != version {
		t.Fatalf("a finished child keeps its worker and version: %+v", plain)
	}
	for _, f := range []struct {
		opts waymark.ListOptions
		want []string
	}{
		{waymark.ListOptions{ParentID: id, WorkerID: plain.WorkerID}, children},
		{waymark.ListOptions{ParentID: id, WorkerID: "no-such-worker"}, []string{}},
		{waymark.ListOptions{ParentID: id, AppVersion: version}, children},
		{waymark.ListOptions{ParentID: id, AppVersion: "no-such-version"}, []string{}},
	} {
		if got := listed(t, c, f.opts); !slices.Equal(got, f.want) {
			t.Fatalf("%+v: %v, want %v", f.opts, got, f.want)
		}
	}

	// A bad key is refused by the server: StartChild returns the refusal, which fails the
	// parent with its reason; the child is not started.
	bad := unique("bad-child-tag")
	if _, err := c.Start(ctx, "family", map[string]string{"a=b": "x"}, &waymark.StartOptions{ID: bad, Queue: queue, Tags: tags}); err != nil {
		t.Fatal(err)
	}
	wf := await(t, c, bad)
	if wf.Status != waymark.StatusError || wf.Failure == nil || wf.Failure.Kind != "INVALID_ARGUMENT" || !strings.Contains(wf.Failure.Message, "tag key") {
		t.Fatalf("refused: %+v %+v", wf, wf.Failure)
	}
	if got := listed(t, c, waymark.ListOptions{ParentID: bad}); !slices.Equal(got, []string{bad + "-a"}) {
		t.Fatalf("only the plain child: %v", got)
	}
}

func TestWorkflowsStrandedOnARetiredVersionAreRePinnedOneOrByFilter(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	live, retired, nobody := unique("live"), unique("retired"), unique("nobody")
	w, queue := newWorker(t, waymark.WorkerOptions{AppVersion: live})
	waymark.RegisterWorkflow(w, "echo", func(_ waymark.Context, n int) (int, error) { return n, nil })
	runWorker(t, w, queue)

	// Pinned to a version whose workers are gone: they wait ENQUEUED.
	batch := map[string]string{"batch": unique("stranded")}
	ids := make([]string, 6)
	for i := range ids {
		ids[i] = unique(fmt.Sprintf("old-%d", i))
		opts := &waymark.StartOptions{ID: ids[i], Queue: queue, AppVersion: retired, Tags: batch}
		if _, err := c.Start(ctx, "echo", i, opts); err != nil {
			t.Fatal(err)
		}
	}
	// A version no worker serves is refused, and the refusal changes nothing.
	_, err := c.SetVersion(ctx, ids[0], nobody, false)
	wantRefused(t, "a version nobody serves", err, codes.FailedPrecondition, "VERSION_NOT_SERVED")
	if wf, err := c.Get(ctx, ids[0]); err != nil || wf.AppVersion != retired || wf.Status != waymark.StatusEnqueued {
		t.Fatalf("after the refusal: %+v %v", wf, err)
	}
	// One by hand, onto the live worker's version: it runs there.
	moved, err := c.SetVersion(ctx, ids[0], live, false)
	if err != nil || moved.ID != ids[0] || moved.AppVersion != live {
		t.Fatalf("set version: %+v %v", moved, err)
	}
	done := await(t, c, ids[0])
	if out, err := waymark.Output[int](done); err != nil || out != 0 || done.AppVersion != live {
		t.Fatalf("the re-pinned one: %+v %v %v", done, out, err)
	}
	_, err = c.SetVersion(ctx, ids[0], live, true)
	wantRefused(t, "a finished workflow", err, codes.FailedPrecondition, "WORKFLOW_FINISHED")

	// The rest by filter: counted first; onto a version nobody serves, each is skipped.
	stranded := waymark.WorkflowFilter{AppVersion: retired}
	if n, err := c.CountMatching(ctx, stranded); err != nil || n != 5 {
		t.Fatalf("count: %d %v; want 5", n, err)
	}
	refused, err := c.Bulk(ctx, stranded, waymark.BulkSetVersion{AppVersion: nobody}, 2)
	if err != nil || refused.Matched != 5 || refused.Applied != 0 || !maps.Equal(refused.Skipped, map[string]uint64{"VERSION_NOT_SERVED": 5}) {
		t.Fatalf("onto a version nobody serves: %+v %v", refused, err)
	}
	// Onto the live version, two at a time (three batches): all move and succeed.
	moves, err := c.Bulk(ctx, stranded, waymark.BulkSetVersion{AppVersion: live}, 2)
	if err != nil || moves.Matched != 5 || moves.Applied != 5 || len(moves.Skipped) != 0 {
		t.Fatalf("bulk set version: %+v %v", moves, err)
	}
	for i, id := range ids[1:] {
		wf := await(t, c, id)
		if out, err := waymark.Output[int](wf); err != nil || out != i+1 || wf.AppVersion != live {
			t.Fatalf("%s: %+v %v %v", id, wf, out, err)
		}
	}
	// Again: nothing is pinned there any more.
	again, err := c.Bulk(ctx, stranded, waymark.BulkSetVersion{AppVersion: live}, 2)
	if err != nil || again.Matched != 0 || again.Applied != 0 {
		t.Fatalf("again: %+v %v", again, err)
	}
	// Re-pinning the finished ones by tag: each skipped as finished.
	finished, err := c.Bulk(ctx, waymark.WorkflowFilter{Tags: batch}, waymark.BulkSetVersion{AppVersion: nobody, AllowUnserved: true}, 4)
	if err != nil || finished.Matched != 6 || finished.Applied != 0 || !maps.Equal(finished.Skipped, map[string]uint64{"WORKFLOW_FINISHED": 6}) {
		t.Fatalf("finished ones: %+v %v", finished, err)
	}
}

func TestWorkflowsAreCancelledResumedAndDeletedByFilterInBatches(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	w, queue := newWorker(t, waymark.WorkerOptions{})
	waymark.RegisterWorkflow(w, "inbox", func(ctx waymark.Context, _ any) (string, error) {
		msg, _, err := waymark.Recv[string](ctx, "t", 10*time.Minute)
		return msg, err
	})
	runWorker(t, w, queue)

	job := map[string]string{"job": unique("nightly")}
	ids := make([]string, 5)
	for i := range ids {
		ids[i] = unique(fmt.Sprintf("n-%d", i))
		if _, err := c.Start(ctx, "inbox", nil, &waymark.StartOptions{ID: ids[i], Queue: queue, Tags: job}); err != nil {
			t.Fatal(err)
		}
	}
	other := start(t, c, "inbox", queue, nil)
	t.Cleanup(func() { _, _ = c.Cancel(testCtx(t), other) })
	nightly := waymark.WorkflowFilter{Tags: job}
	if n, err := c.CountMatching(ctx, nightly); err != nil || n != 5 {
		t.Fatalf("count: %d %v; want 5", n, err)
	}
	skippedAll := func(reason string, n uint64) map[string]uint64 { return map[string]uint64{reason: n} }

	// Deleting what has not finished: every one skipped, none touched.
	refused, err := c.Bulk(ctx, nightly, waymark.BulkDelete{}, 2)
	if err != nil || refused.Matched != 5 || refused.Applied != 0 || !maps.Equal(refused.Skipped, skippedAll("WORKFLOW_NOT_FINISHED", 5)) {
		t.Fatalf("delete of unfinished ones: %+v %v", refused, err)
	}

	// Cancel in batches of two (three calls); the untagged one is left alone.
	cancelled, err := c.Bulk(ctx, nightly, waymark.BulkCancel{}, 2)
	if err != nil || cancelled.Matched != 5 || cancelled.Applied != 5 || len(cancelled.Skipped) != 0 {
		t.Fatalf("cancel: %+v %v", cancelled, err)
	}
	if got := tagged(t, c, job, waymark.StatusCancelled); len(got) != 5 {
		t.Fatalf("cancelled: %v", got)
	}
	if wf, err := c.Get(ctx, other); err != nil || wf.Status.Terminal() {
		t.Fatalf("outside the filter: %+v %v", wf, err)
	}
	// Twice is safe: nothing is cancelled again.
	twice, err := c.Bulk(ctx, nightly, waymark.BulkCancel{}, 2)
	if err != nil || twice.Matched != 5 || twice.Applied != 0 || !maps.Equal(twice.Skipped, skippedAll("WORKFLOW_FINISHED", 5)) {
		t.Fatalf("cancel again: %+v %v", twice, err)
	}

	// One batch at a time by hand: the token goes on to the next.
	first, err := c.BulkBatch(ctx, nightly, waymark.BulkResume{}, 3, "")
	if err != nil || first.Matched != 3 || first.Applied != 3 || first.NextPageToken == "" {
		t.Fatalf("first batch of resume: %+v %v", first, err)
	}
	rest, err := c.BulkBatch(ctx, nightly, waymark.BulkResume{}, 3, first.NextPageToken)
	if err != nil || rest.Matched != 2 || rest.Applied != 2 || rest.NextPageToken != "" {
		t.Fatalf("last batch of resume: %+v %v", rest, err)
	}
	// Resumed, they wait again, and a message finishes one.
	if _, err := c.Send(ctx, ids[0], "t", "go", nil); err != nil {
		t.Fatal(err)
	}
	if wf := await(t, c, ids[0]); wf.Status != waymark.StatusSuccess {
		t.Fatalf("the resumed one: %+v", wf)
	}

	// Delete the finished one by filter; the four still waiting are skipped.
	deleted, err := c.Bulk(ctx, nightly, waymark.BulkDelete{}, 3)
	if err != nil || deleted.Matched != 5 || deleted.Applied != 1 || !maps.Equal(deleted.Skipped, skippedAll("WORKFLOW_NOT_FINISHED", 4)) {
		t.Fatalf("delete: %+v %v", deleted, err)
	}
	_, err = c.Get(ctx, ids[0])
	wantRefused(t, "the deleted one", err, codes.NotFound, "WORKFLOW_NOT_FOUND")
	// Cancel the rest, then delete them by status and tag.
	if rest, err := c.Bulk(ctx, nightly, waymark.BulkCancel{}, 100); err != nil || rest.Applied != 4 {
		t.Fatalf("cancel the rest: %+v %v", rest, err)
	}
	gone, err := c.Bulk(ctx, waymark.WorkflowFilter{Tags: job, Statuses: []waymark.Status{waymark.StatusCancelled}}, waymark.BulkDelete{}, 100)
	if err != nil || gone.Matched != 4 || gone.Applied != 4 || len(gone.Skipped) != 0 {
		t.Fatalf("delete the cancelled: %+v %v", gone, err)
	}
	if n, err := c.CountMatching(ctx, nightly); err != nil || n != 0 {
		t.Fatalf("count after: %d %v; want 0", n, err)
	}
	if wf, err := c.Get(ctx, other); err != nil || wf.Status.Terminal() {
		t.Fatalf("outside the filter, untouched: %+v %v", wf, err)
	}

	// A bad filter or batch size is refused.
	_, err = c.Bulk(ctx, waymark.WorkflowFilter{Tags: map[string]string{"": "x"}}, waymark.BulkCancel{}, 10)
	wantRefused(t, "an empty tag key", err, codes.InvalidArgument, "INVALID_ARGUMENT")
	_, err = c.Bulk(ctx, nightly, waymark.BulkCancel{}, -1)
	wantRefused(t, "a negative batch size", err, codes.InvalidArgument, "INVALID_ARGUMENT")
}
