package golden_test

import (
	"context"
	"log/slog"
	"testing"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
	"github.com/waymark-dev/waymark/sdk-clients/go/internal/golden"
)

// Every golden history (contract/histories/, read from the directory, so a file added later is
// replayed too) replays offline against the Go golden workflows to the outcome its file
// expects, running no step function. No server: this package's tests start none, and a replay
// that tried to reach one would fail (see the SDK's replayer tests).
func TestEveryGoldenHistoryReplaysOffline(t *testing.T) {
	names, files, err := golden.Read(golden.Dir())
	if err != nil {
		t.Fatal(err)
	}
	// As the Rust suite checks: the directory was found, with the histories in it.
	if len(names) < 10 {
		t.Fatalf("the golden histories are there: %d in %s", len(names), golden.Dir())
	}
	w := golden.Register(waymark.NewWorker(waymark.WorkerOptions{Logger: slog.New(slog.DiscardHandler)}))
	replayer := waymark.NewReplayer(w)
	golden.Ran.Store(0)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			f := files[name]
			want, err := f.Want()
			if err != nil {
				t.Fatal(err)
			}
			got, err := replayer.Replay(context.Background(), &f.History)
			if err != nil {
				t.Fatal(err)
			}
			if !golden.Same(want, got) {
				t.Errorf("%s (%s): replayed to %v, want %v", name, f.About, got, want)
			}
		})
	}
	if n := golden.Ran.Load(); n != 0 {
		t.Errorf("a replay ran %d step functions", n)
	}
}
