package waymark

import (
	"log/slog"
	"sync"
	"sync/atomic"
)

// goroutines are those one Run starts on the way — a goroutine per workflow run, per remote
// step attempt, and each session's heartbeat — so that Run returns only once every one of them
// has: nothing it started may still be running (sending, logging, running a workflow's code)
// after it returns. They start only on the goroutine that reads the stream, so never while
// wait is waiting.
type goroutines struct {
	wg sync.WaitGroup
	// How many workflow runs and step attempts are running, for the log while Run waits.
	runs, attempts atomic.Int64
}

// start runs f on a goroutine of its own that wait waits for; count, when not nil, counts it
// while it runs.
func (g *goroutines) start(count *atomic.Int64, f func()) {
	if count != nil {
		count.Add(1)
	}
	g.wg.Go(func() {
		if count != nil {
			defer count.Add(-1)
		}
		f()
	})
}

// wait returns once every goroutine started has returned. They all end with the session that
// started them (whose context and stream end first), but a workflow or step function that does
// not heed its context holds the wait up until it returns: the log says what is awaited.
func (g *goroutines) wait(logger *slog.Logger) {
	if runs, attempts := g.runs.Load(), g.attempts.Load(); runs > 0 || attempts > 0 {
		logger.Info("worker stopping: waiting for the workflow runs and step attempts it started to return",
			"workflow_runs", runs, "step_attempts", attempts)
	}
	g.wg.Wait()
}
