// Command client is the Go client of the polyglot example: it starts the Rust workflow "greet"
// (by name; the Rust worker runs it) with the name given as its argument, awaits it, and prints
// its output.
//
//	WAYMARK_SERVER=127.0.0.1:7450 go run ./client Gopher    # Hello, Gopher, from a Rust workflow!
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
)

func main() {
	name := "Go"
	if len(os.Args) > 1 {
		name = os.Args[1]
	}
	if err := run(name); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(name string) error {
	c, err := waymark.NewClient("") // WAYMARK_SERVER, else 127.0.0.1:7450
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The same id again returns the same workflow, so running this twice greets once.
	started, err := c.Start(ctx, "greet", name, &waymark.StartOptions{ID: "greet-" + name})
	if err != nil {
		return err
	}
	wf, err := c.Await(ctx, started.ID)
	if err != nil {
		return err
	}
	greeting, err := waymark.Output[string](wf) // a failed workflow is a *waymark.Failure
	if err != nil {
		return err
	}
	fmt.Println(greeting)
	return nil
}
