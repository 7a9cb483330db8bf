package waymark_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
)

// Run returns only once every workflow run and remote step attempt it started has returned:
// nothing it started may still run — send, log, run the workflow's code — once a caller that
// waited for Run goes on to shut down. Each case holds a function up past the worker's stop (it
// sees its context end, then waits for the test): Run must still be waiting for it then, and
// return only after it has returned and the worker is done with it.
func TestRunWaitsForWhatItStarted(t *testing.T) {
	t.Run("workflow", func(t *testing.T) { testRunWaits(t, false) })
	t.Run("remote step attempt", func(t *testing.T) { testRunWaits(t, true) })
}

func testRunWaits(t *testing.T, remote bool) {
	c := newClient(t)
	logs := watchLog(t)
	w, queue := newWorker(t, waymark.WorkerOptions{Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	entered, release := make(chan struct{}), make(chan struct{})
	// Set when the function held up returns.
	var returned atomic.Bool
	hold := func(ctx context.Context) (int, error) {
		close(entered)
		<-ctx.Done()
		<-release
		return 0, ctx.Err()
	}
	stepName := unique("stall")
	// The last thing the worker logs for the held function, once it has returned.
	last := "workflow run stopped"
	if remote {
		last = "step attempt abandoned"
		waymark.RegisterStep(w, stepName, func(ctx context.Context, _ any) (int, error) {
			defer returned.Store(true)
			return hold(ctx)
		})
	}
	waymark.RegisterWorkflow(w, "stubborn", func(ctx waymark.Context, _ any) (int, error) {
		if remote {
			return waymark.CallStep[int](ctx, stepName, nil)
		}
		defer returned.Store(true)
		return waymark.Step(ctx, "stall", hold)
	})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	eventually(t, "the worker to connect", func() (bool, error) {
		_, err := c.GetQueue(testCtx(t), queue)
		return err == nil, err
	})
	start(t, c, "stubborn", queue, nil)
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the function never ran")
	}

	cancel()
	select {
	case err := <-done:
		t.Fatalf("Run returned (%v) while a function it started was still running", err)
	case <-logs.seen("worker stopping"):
	case <-time.After(30 * time.Second):
		t.Fatal("Run neither returned nor said it waits")
	}
	if returned.Load() {
		t.Fatal("the function returned before the test released it")
	}
	close(release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return once the function had")
	}
	if !returned.Load() {
		t.Fatal("Run returned before the function it started did")
	}
	select {
	case <-logs.seen(last):
	default:
		t.Fatalf("Run returned before the worker was done with the function (it had not logged %q yet)", last)
	}
}

// watchedLog is a test's log that a test can wait on: seen closes when a line holding some
// text is written. Lines written once the test is over are dropped, not logged (which would
// panic): a test that fails may leave a function it held up running.
type watchedLog struct {
	t *testing.T

	mu      sync.Mutex
	over    bool
	lines   []string
	watches map[string]chan struct{}
}

func watchLog(t *testing.T) *watchedLog {
	l := &watchedLog{t: t, watches: map[string]chan struct{}{}}
	t.Cleanup(func() {
		l.mu.Lock()
		l.over = true
		l.mu.Unlock()
	})
	return l
}

func (l *watchedLog) Write(p []byte) (int, error) {
	line := strings.TrimRight(string(p), "\n")
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.over {
		return len(p), nil
	}
	l.t.Log(line)
	l.lines = append(l.lines, line)
	for text, ch := range l.watches {
		if strings.Contains(line, text) {
			close(ch)
			delete(l.watches, text)
		}
	}
	return len(p), nil
}

// seen closes once a line holding text is written (at once if one was already).
func (l *watchedLog) seen(text string) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch := make(chan struct{})
	for _, line := range l.lines {
		if strings.Contains(line, text) {
			close(ch)
			return ch
		}
	}
	if old, ok := l.watches[text]; ok {
		return old
	}
	l.watches[text] = ch
	return ch
}
