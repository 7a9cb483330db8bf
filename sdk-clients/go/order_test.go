package waymark

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// Step records are durable in call order, also for steps started together: after a = Step(a),
// two goroutines run Step(c) and Step(d). One of them takes a's held record and sends it; the
// other finds nothing held — and must still wait, since its function may use a. Neither
// function runs until the server has acknowledged a's record.
func TestStepsStartedTogetherWaitForEarlierRecords(t *testing.T) {
	w := fakeWorker(t, WorkerOptions{})
	ended := endedRuns(w)
	waiting := make(chan struct{}, 8)
	w.hooks.awaitingRecords = func() { waiting <- struct{}{} }
	ran := make(chan string, 2)
	RegisterWorkflow(w, "fan", func(ctx Context, _ any) (int, error) {
		a, err := Step(ctx, "a", func(context.Context) (int, error) { return 1, nil })
		if err != nil {
			return 0, err
		}
		var wg sync.WaitGroup
		results, errs := make([]int, 2), make([]error, 2)
		for i, name := range []string{"c", "d"} {
			wg.Go(func() {
				results[i], errs[i] = Step(ctx, name, func(context.Context) (int, error) {
					ran <- name
					return a + 1, nil
				})
			})
		}
		wg.Wait()
		return results[0] + results[1], errors.Join(errs...)
	})
	// The server holds back its acknowledgement of a's record until the test releases it.
	aRecord := make(chan uint64, 1)
	f := startFake(t, w, func(m *pb.WorkerMessage) *pb.Reply {
		if m.GetRecordStep().GetName() == "a" {
			aRecord <- m.GetRequestId()
			return nil
		}
		return okReply(m)
	})
	f.dispatch("wf-6", "fan")

	deadline := time.After(30 * time.Second)
	var aID uint64
	select {
	case aID = <-aRecord:
	case <-deadline:
		t.Fatal("a's record was never sent")
	}
	// Both c and d reach the point where they wait for records to be acknowledged; a function
	// that runs instead fails the test at once.
	for blocked := 0; blocked < 2; {
		select {
		case <-waiting:
			blocked++
		case name := <-ran:
			t.Fatalf("%s's function ran while a's record was not acknowledged", name)
		case <-deadline:
			t.Fatal("c and d did not both wait for a's record")
		}
	}
	select {
	case name := <-ran:
		t.Fatalf("%s's function ran while a's record was not acknowledged", name)
	default:
	}
	if n := len(records(f.messages())); n != 1 {
		t.Fatalf("%d records sent while a's was outstanding", n)
	}

	f.reply(aID, &pb.Reply{Result: &pb.Reply_StepRecorded{StepRecorded: &pb.StepRecorded{}}})
	var both []string
	for len(both) < 2 {
		select {
		case name := <-ran:
			both = append(both, name)
		case <-deadline:
			t.Fatalf("after the release only %v ran", both)
		}
	}
	waitEnded(t, ended, "wf-6")
	done := completions(f.messages())
	if len(done) != 1 {
		t.Fatalf("completions %v", done)
	}
	var carried []string
	for _, s := range done[0].GetSteps() {
		carried = append(carried, s.GetName())
	}
	slices.Sort(carried)
	if out, _ := payloadJSON(done[0].GetOutput()); string(out) != "4" || !slices.Equal(carried, []string{"c", "d"}) {
		t.Fatalf("completion %v", done[0])
	}
}
