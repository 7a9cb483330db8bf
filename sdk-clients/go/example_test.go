package waymark_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"time"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
)

// A worker with one workflow: a checkpointed step, then a durable wait for a message.
func ExampleRegisterWorkflow() {
	w := waymark.NewWorker(waymark.WorkerOptions{AppVersion: "v1"})
	waymark.RegisterWorkflow(w, "greet", func(ctx waymark.Context, name string) (string, error) {
		greeting, err := waymark.Step(ctx, "compose", func(context.Context) (string, error) {
			return "Hello, " + name + "!", nil
		})
		if err != nil {
			return "", err
		}
		reply, ok, err := waymark.Recv[string](ctx, "reply", time.Hour)
		if err != nil || !ok {
			return greeting, err
		}
		return greeting + " " + reply, nil
	})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := w.Run(ctx); err != nil {
		fmt.Println(err)
	}
}

// Starting a workflow, talking to it, and waiting for its result.
func ExampleClient_Start() {
	ctx := context.Background()
	c, err := waymark.NewClient("")
	if err != nil {
		panic(err)
	}
	defer c.Close()
	started, err := c.Start(ctx, "greet", "Ada", &waymark.StartOptions{ID: "greet-ada"})
	if waymark.IsReason(err, "WORKFLOW_NAME_UNKNOWN") {
		fmt.Println("start a worker first")
		return
	}
	if err != nil {
		panic(err)
	}
	if _, err := c.Send(ctx, started.ID, "reply", "Nice to meet you.", nil); err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	wf, err := c.Await(ctx, started.ID)
	if errors.Is(err, context.DeadlineExceeded) {
		fmt.Println("still running")
		return
	}
	if err != nil {
		panic(err)
	}
	out, err := waymark.Output[string](wf)
	fmt.Println(out, err)
}

// Following a workflow's stream as it is written.
func ExampleClient_ReadStream() {
	ctx := context.Background()
	c, _ := waymark.NewClient("")
	defer c.Close()
	for entry, err := range c.ReadStream(ctx, "report-1", "progress", 0) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(entry.Offset, string(entry.Value))
	}
}
