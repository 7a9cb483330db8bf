package waymark_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
)

// conformance: sleep
func TestSleepIsDurableAndParks(t *testing.T) {
	c := newClient(t)
	// Waits longer than 50 ms park: the worker lets the workflow go, and the server dispatches
	// it again at its wake time; it replays to the sleep, which is then over.
	w, queue := newWorker(t, waymark.WorkerOptions{ParkAfter: 50 * time.Millisecond})
	var before atomic.Int32
	waymark.RegisterWorkflow(w, "nap", func(ctx waymark.Context, ms int) (int64, error) {
		started, err := waymark.Step(ctx, "before", func(context.Context) (int64, error) {
			before.Add(1)
			return time.Now().UnixMilli(), nil
		})
		if err != nil {
			return 0, err
		}
		if err := waymark.Sleep(ctx, 20*time.Millisecond); err != nil { // short: no parking
			return 0, err
		}
		if err := waymark.Sleep(ctx, time.Duration(ms)*time.Millisecond); err != nil {
			return 0, err
		}
		return time.Now().UnixMilli() - started, nil
	})
	runWorker(t, w, queue)
	wf := await(t, c, start(t, c, "nap", queue, 400))
	slept, err := waymark.Output[int64](wf)
	// Epoch 2 or more: it was parked and dispatched again.
	if err != nil || slept < 400 || before.Load() != 1 || wf.Epoch < 2 {
		t.Fatalf("slept %d ms (%v); the first step ran %d times; epoch %d", slept, err, before.Load(), wf.Epoch)
	}
	if names := stepNames(t, c, wf.ID); fmt.Sprint(names) != "[before waymark.sleep waymark.sleep]" {
		t.Fatalf("steps %v", names)
	}
}

// conformance: recv_timeout
func TestRecvSendAndTimeout(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	w, queue := newWorker(t, waymark.WorkerOptions{})
	waymark.RegisterWorkflow(w, "inbox", func(ctx waymark.Context, _ any) ([]string, error) {
		var got []string
		for range 2 {
			m, ok, err := waymark.Recv[order](ctx, "orders", time.Minute)
			if err != nil || !ok {
				return nil, fmt.Errorf("recv: ok %v err %w", ok, err)
			}
			got = append(got, m.Item)
		}
		_, ok, err := waymark.Recv[order](ctx, "orders", 50*time.Millisecond)
		if err != nil || ok {
			return nil, fmt.Errorf("want a timeout: ok %v err %w", ok, err)
		}
		return got, nil
	})
	// A workflow that sends to another.
	waymark.RegisterWorkflow(w, "sender", func(ctx waymark.Context, to string) (string, error) {
		return waymark.Send(ctx, to, "orders", order{Item: "from-workflow"})
	})
	runWorker(t, w, queue)
	id := start(t, c, "inbox", queue, nil)
	sent, err := c.Send(ctx, id, "orders", order{Item: "from-client"}, &waymark.SendOptions{IdempotencyKey: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	dup, err := c.Send(ctx, id, "orders", order{Item: "from-client"}, &waymark.SendOptions{IdempotencyKey: "k1"})
	if err != nil || !dup.Duplicate || dup.MessageID != sent.MessageID {
		t.Fatalf("duplicate send %+v %v", dup, err)
	}
	eventually(t, "the first message to be taken", func() (bool, error) {
		msgs, err := c.Messages(ctx, id)
		return err == nil && len(msgs) == 1 && msgs[0].Consumed, err
	})
	if wf := await(t, c, start(t, c, "sender", queue, id)); wf.Status != waymark.StatusSuccess {
		t.Fatalf("sender %+v", wf)
	}
	wf := await(t, c, id)
	got, err := waymark.Output[[]string](wf)
	if err != nil || fmt.Sprint(got) != "[from-client from-workflow]" {
		t.Fatalf("received %v (%v)", got, err)
	}
}

// conformance: events
func TestEvents(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	w, queue := newWorker(t, waymark.WorkerOptions{})
	waymark.RegisterWorkflow(w, "publisher", func(ctx waymark.Context, _ any) (any, error) {
		// Sets nothing until told, so the watcher is already waiting when it does.
		if _, _, err := waymark.Recv[any](ctx, "go", time.Minute); err != nil {
			return nil, err
		}
		if err := waymark.SetEvent(ctx, "state", "half"); err != nil {
			return nil, err
		}
		// Held open until told, so a client can watch the event change.
		if _, _, err := waymark.Recv[any](ctx, "", time.Minute); err != nil {
			return nil, err
		}
		return nil, waymark.SetEvent(ctx, "state", "done")
	})
	waymark.RegisterWorkflow(w, "watcher", func(ctx waymark.Context, target string) (string, error) {
		v, ok, err := waymark.GetEvent[string](ctx, target, "state", time.Minute)
		if err != nil || !ok {
			return "", fmt.Errorf("get event: ok %v err %w", ok, err)
		}
		_, ok, err = waymark.GetEvent[string](ctx, target, "absent", 10*time.Millisecond)
		if err != nil || ok {
			return "", fmt.Errorf("want no value: ok %v err %w", ok, err)
		}
		return v, nil
	})
	runWorker(t, w, queue)
	// The publisher exists (a workflow's event read names a workflow that does) but sets its
	// event only once told; the watcher waits for it meanwhile.
	pubID := unique("pub")
	if _, err := c.Start(ctx, "publisher", nil, &waymark.StartOptions{ID: pubID, Queue: queue}); err != nil {
		t.Fatal(err)
	}
	watcher := start(t, c, "watcher", queue, pubID)
	if _, err := c.Send(ctx, pubID, "go", nil, nil); err != nil {
		t.Fatal(err)
	}
	v, found, err := waymark.GetEventAs[string](ctx, c, pubID, "state", 30*time.Second)
	if err != nil || !found || v != "half" {
		t.Fatalf("client get event: %q %v %v", v, found, err)
	}
	if _, found, err := c.GetEvent(ctx, pubID, "absent", 0); err != nil || found {
		t.Fatalf("absent event: %v %v", found, err)
	}
	// The watcher finishes on the first value, before the publisher is told to set the last.
	if out, err := waymark.Output[string](await(t, c, watcher)); err != nil || out != "half" {
		t.Fatalf("watcher saw %q (%v)", out, err)
	}
	if _, err := c.Send(ctx, pubID, "", nil, nil); err != nil {
		t.Fatal(err)
	}
	await(t, c, pubID)
	events, err := c.Events(ctx, pubID)
	if err != nil || len(events) != 1 || string(events[0].Value) != `"done"` || len(events[0].History) != 2 {
		t.Fatalf("events %+v %v", events, err)
	}
}

// conformance: streams
func TestStreamsReadAsAnIterator(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	w, queue := newWorker(t, waymark.WorkerOptions{})
	waymark.RegisterWorkflow(w, "progress", func(ctx waymark.Context, n int) (uint64, error) {
		var last uint64
		for i := range n {
			off, err := waymark.WriteStream(ctx, "pct", i*10)
			if err != nil {
				return 0, err
			}
			last = off
			// Paced by messages, so the reader follows the stream live.
			if _, _, err := waymark.Recv[any](ctx, "next", time.Minute); err != nil {
				return 0, err
			}
		}
		return last, waymark.CloseStream(ctx, "pct")
	})
	runWorker(t, w, queue)
	id := start(t, c, "progress", queue, 3)
	var got []int
	for v, err := range waymark.ReadStreamAs[int](ctx, c, id, "pct", 0) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
		if _, err := c.Send(ctx, id, "next", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(got) != "[0 10 20]" {
		t.Fatalf("read %v", got)
	}
	// Reading again from an offset, with offsets.
	var offsets []uint64
	for e, err := range c.ReadStream(ctx, id, "pct", 1) {
		if err != nil {
			t.Fatal(err)
		}
		offsets = append(offsets, e.Offset)
	}
	if fmt.Sprint(offsets) != "[1 2]" {
		t.Fatalf("offsets %v", offsets)
	}
	if last, err := waymark.Output[uint64](await(t, c, id)); err != nil || last != 2 {
		t.Fatalf("last offset %d (%v)", last, err)
	}
}
