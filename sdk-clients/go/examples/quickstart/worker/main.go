// The quickstart's worker: serves the workflow "checkout" and the remote step "print-label"
// until interrupted. register is what the replay test (replay_test.go) calls too.
package main

import (
	"context"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
)

type Item struct {
	SKU        string `json:"sku"`
	PriceCents int    `json:"price_cents"`
	Qty        int    `json:"qty"`
}

type Order struct {
	ID    string `json:"id"`
	Items []Item `json:"items"`
}

type Approval struct {
	OK bool `json:"ok"`
}

type Receipt struct {
	Order      string `json:"order"`
	TotalCents int    `json:"total_cents"`
	Label      string `json:"label"`
}

func register(w *waymark.Worker) {
	waymark.RegisterWorkflow(w, "checkout", func(ctx waymark.Context, o Order) (Receipt, error) {
		// Runs once; a replay after a crash returns the recorded result.
		total, err := waymark.Step(ctx, "total", func(ctx context.Context) (int, error) {
			sum := 0
			for _, item := range o.Items {
				sum += item.PriceCents * item.Qty
			}
			return sum, nil
		}, waymark.WithRetry(waymark.Attempts(3)))
		if err != nil {
			return Receipt{}, err
		}
		if err := waymark.SetEvent(ctx, "status", "awaiting approval"); err != nil {
			return Receipt{}, err
		}
		// A durable wait: survives restarts, parks the workflow when it is long.
		approval, ok, err := waymark.Recv[Approval](ctx, "approval", time.Hour)
		if err != nil {
			return Receipt{}, err // ErrCancelled, ErrParked, …: return them as they come
		}
		if !ok {
			return Receipt{}, waymark.Fail("Timeout", "nobody approved order %s", o.ID)
		}
		if !approval.OK {
			return Receipt{}, waymark.Fail("NotApproved", "order %s was turned down", o.ID)
		}
		if err := waymark.Sleep(ctx, time.Second); err != nil { // a durable timer
			return Receipt{}, err
		}
		label, err := waymark.CallStep[string](ctx, "print-label", o) // run by any worker, any language
		if err != nil {
			return Receipt{}, err
		}
		return Receipt{Order: o.ID, TotalCents: total, Label: label}, nil
	})
	// A remote step other workflows call by name.
	waymark.RegisterStep(w, "print-label", func(ctx context.Context, o Order) (string, error) {
		return "LABEL-" + o.ID, nil
	})
}

func main() {
	w := waymark.NewWorker(waymark.WorkerOptions{AppName: "shop", AppVersion: "1"}) // WAYMARK_SERVER or 127.0.0.1:7450
	register(w)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := w.Run(ctx); err != nil { // reconnects by itself; returns nil when ctx ends
		log.Fatal(err)
	}
}
