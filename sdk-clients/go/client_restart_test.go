package waymark_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
)

// A read made while the server is down is retried until it is back: the caller sees the
// answer, not UNAVAILABLE.
func TestClientRetriesWhileTheServerRestarts(t *testing.T) {
	own, err := startServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { own.stop() })
	// Counts the tries that found the server gone, so the test restarts it only once the
	// call has met UNAVAILABLE at least once.
	var unavailable atomic.Int32
	count := grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoke(ctx, method, req, reply, cc, opts...)
		if status.Code(err) == codes.Unavailable {
			unavailable.Add(1)
		}
		return err
	})
	c, err := waymark.NewClient(own.addr, count)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	if _, err := c.GetQueue(ctx, "default"); err != nil {
		t.Fatal(err)
	}

	own.kill()
	got := make(chan error, 1)
	go func() {
		_, err := c.GetQueue(ctx, "default")
		got <- err
	}()
	eventually(t, "the read to find the server gone", func() (bool, error) { return unavailable.Load() > 0, nil })
	again, err := startServerAt(own.dir, own.addr)
	if err != nil {
		t.Fatal(err)
	}
	*own = *again // the same server, come back
	if err := <-got; err != nil {
		t.Fatalf("the read failed across the restart: %v (%d tries found the server gone)", err, unavailable.Load())
	}
}
