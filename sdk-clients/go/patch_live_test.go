package waymark_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
)

// demoResult is what both versions of patch-demo return: the branch the run took (what its
// step returned), and which code finished it.
type demoResult struct {
	Branch string `json:"branch"`
	Code   string `json:"code"`
}

// A deploy of changed workflow code on the real server. Worker A runs the old code of
// patch-demo: step "old", then a receive on "go". Run p1 gets as far as the receive and parks
// there; A stops, and worker B takes over with the new code, which asks Patched("demo-fix") before
// its step. p1, woken by "go" on B, replays the old branch: its history has "old" where the
// marker would be, so Patched answers false and B's "old" step replays from the record. A new
// run p2 on B takes the new branch and records the marker at position 0.
func TestPatchedKeepsOldRunsOnTheOldBranchAcrossADeploy(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	queue := unique("q")
	const name = "patch-demo"
	// The step functions that ran, by code and step ("A old", "B new", …).
	var mu sync.Mutex
	ran := map[string]int{}
	step := func(wctx waymark.Context, code, branch string) (string, error) {
		return waymark.Step(wctx, branch, func(context.Context) (string, error) {
			mu.Lock()
			ran[code+" "+branch]++
			mu.Unlock()
			return branch, nil
		})
	}
	recvGo := func(wctx waymark.Context) error {
		_, ok, err := waymark.Recv[string](wctx, "go", time.Minute)
		if err == nil && !ok {
			err = waymark.Fail("NoGo", "no message on topic go")
		}
		return err
	}
	// Both workers park a waiting run at once, so a run waiting on "go" is on no worker.
	workerOn := func() *waymark.Worker {
		return waymark.NewWorker(waymark.WorkerOptions{Server: server.addr, Queues: []string{queue}, ParkAfter: time.Millisecond, Logger: testLogger(t)})
	}

	a := workerOn()
	waymark.RegisterWorkflow(a, name, func(wctx waymark.Context, _ any) (demoResult, error) {
		branch, err := step(wctx, "A", "old")
		if err != nil {
			return demoResult{}, err
		}
		if err := recvGo(wctx); err != nil {
			return demoResult{}, err
		}
		return demoResult{Branch: branch, Code: "old"}, nil
	})
	aCtx, stopA := context.WithCancel(context.Background())
	defer stopA()
	aDone := make(chan error, 1)
	go func() { aDone <- a.Run(aCtx) }()
	eventually(t, "worker A to connect", func() (bool, error) {
		_, err := c.GetQueue(ctx, queue)
		return err == nil, err
	})

	p1 := start(t, c, name, queue, nil)
	parkedAfter := func(id, first string) func() (bool, error) {
		return func() (bool, error) {
			wf, err := c.Get(ctx, id)
			if err != nil || wf.Status != waymark.StatusDelayed {
				return false, err
			}
			names := stepNames(t, c, id)
			return len(names) > 0 && names[0] == first, nil
		}
	}
	eventually(t, "p1 to record step old and park on its receive", parkedAfter(p1, "old"))
	stopA()
	select {
	case err := <-aDone:
		if err != nil {
			t.Fatalf("worker A: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("worker A did not stop")
	}

	b := workerOn()
	waymark.RegisterWorkflow(b, name, func(wctx waymark.Context, _ any) (demoResult, error) {
		patched, err := waymark.Patched(wctx, "demo-fix")
		if err != nil {
			return demoResult{}, err
		}
		branch := "old"
		if patched {
			branch = "new"
		}
		got, err := step(wctx, "B", branch)
		if err != nil {
			return demoResult{}, err
		}
		if err := recvGo(wctx); err != nil {
			return demoResult{}, err
		}
		return demoResult{Branch: got, Code: "new"}, nil
	})
	runWorker(t, b, queue)

	finish := func(id string) demoResult {
		t.Helper()
		if _, err := c.Send(ctx, id, "go", "now", nil); err != nil {
			t.Fatal(err)
		}
		wf := await(t, c, id)
		out, err := waymark.Output[demoResult](wf)
		if wf.Status != waymark.StatusSuccess || err != nil {
			t.Fatalf("%s: %s %v (%v)", id, wf.Status, wf.Failure, err)
		}
		return out
	}
	if got := finish(p1); got != (demoResult{Branch: "old", Code: "new"}) {
		t.Fatalf("p1, begun under the old code and finished under the new, returned %+v", got)
	}
	if names := stepNames(t, c, p1); fmt.Sprint(names) != "[old waymark.recv.deadline waymark.recv]" {
		t.Fatalf("p1 recorded %v; want no marker", names)
	}

	p2 := start(t, c, name, queue, nil)
	eventually(t, "p2 to record the marker and park on its receive", parkedAfter(p2, "waymark.patch"))
	if got := finish(p2); got != (demoResult{Branch: "new", Code: "new"}) {
		t.Fatalf("p2, begun under the new code, returned %+v", got)
	}
	h, err := c.History(ctx, p2)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Steps) != 4 {
		t.Fatalf("p2 recorded %+v", h.Steps)
	}
	if s := h.Steps[0]; s.StepID != 0 || s.Name != "waymark.patch" || string(compactJSON(t, s.Output)) != `{"patch_id":"demo-fix"}` {
		t.Fatalf("p2's position 0: %d %s %s", s.StepID, s.Name, s.Output)
	}
	if s := h.Steps[1]; s.StepID != 1 || s.Name != "new" || string(compactJSON(t, s.Output)) != `"new"` {
		t.Fatalf("p2's position 1: %d %s %s", s.StepID, s.Name, s.Output)
	}

	// Each step function ran once, where its run first got to it: p1's "old" on A only (B
	// replayed it), p2's "new" on B.
	mu.Lock()
	defer mu.Unlock()
	if want := map[string]int{"A old": 1, "B new": 1}; fmt.Sprint(ran) != fmt.Sprint(want) {
		t.Fatalf("step functions ran %v, want %v", ran, want)
	}
}
