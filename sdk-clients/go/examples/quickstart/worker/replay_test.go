package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
)

// Replays the histories saved in histories/ (waymark workflow export ID > histories/ID.json)
// against the workflows register adds to a worker that is never run: a change to them that
// would not replay the workflows in flight fails here, before it is deployed.
func TestSavedHistoriesStillReplay(t *testing.T) {
	w := waymark.NewWorker(waymark.WorkerOptions{})
	register(w)
	replayer := waymark.NewReplayer(w)
	paths, err := filepath.Glob("histories/*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatal("no histories in histories/: save some with `waymark workflow export ID`")
	}
	for _, path := range paths {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var h waymark.RecordedHistory
		if err := json.Unmarshal(text, &h); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		got, err := replayer.Replay(context.Background(), &h)
		if err != nil {
			t.Fatalf("%s: %v", path, err) // no workflow of that name is registered
		}
		if f, ok := got.(waymark.Failed); ok {
			t.Errorf("%s: %v", path, f)
		}
	}
}
