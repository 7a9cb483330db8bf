// The quickstart's client: starts an order, approves it and prints the result. It exits
// non-zero, saying why, when a call fails or the workflow does not succeed.
package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"log"
	"strings"
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

type Receipt struct {
	Order      string `json:"order"`
	TotalCents int    `json:"total_cents"`
	Label      string `json:"label"`
}

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := waymark.NewClient("") // WAYMARK_SERVER or 127.0.0.1:7450
	if err != nil {
		return err
	}
	defer c.Close()

	order := Order{ID: strings.ToLower(rand.Text()[:8]), Items: []Item{{SKU: "tea", PriceCents: 450, Qty: 3}}}
	// A workflow id names one workflow: starting it again returns the first one.
	started, err := c.Start(ctx, "checkout", order, &waymark.StartOptions{ID: "order-" + order.ID})
	if err != nil {
		return fmt.Errorf("start: %w", err) // WORKFLOW_NAME_UNKNOWN: no worker has registered "checkout" yet
	}
	fmt.Println("started", started.ID)
	status, _, err := c.GetEvent(ctx, started.ID, "status", 30*time.Second)
	if err != nil {
		return fmt.Errorf("get event: %w", err)
	}
	fmt.Println("status:", string(status))
	if _, err := c.Send(ctx, started.ID, "approval", map[string]bool{"ok": true}, nil); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	wf, err := c.Await(ctx, started.ID) // bounded by ctx's deadline
	if err != nil {
		return fmt.Errorf("await: %w", err)
	}
	receipt, err := waymark.Output[Receipt](wf) // a failed workflow's *waymark.Failure: its kind and message
	if err != nil {
		return fmt.Errorf("workflow %s ended %s: %w", wf.ID, wf.Status, err)
	}
	fmt.Printf("result: %+v\n", receipt)
	return nil
}
