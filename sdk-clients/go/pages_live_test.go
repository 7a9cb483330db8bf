package waymark_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// A list longer than a page, against the real server: 260 messages of 64 KiB sent to a running
// workflow come to about 16 MiB, more than one page carries with the server's default limits
// (twice its 4 MiB payload limit), so the server answers them in several pages; Messages
// returns all of them, in the server's order.
func TestMessagesAreListedAcrossPages(t *testing.T) {
	const count = 260
	c, ctx := newClient(t), testCtx(t)
	w, queue := newWorker(t, waymark.WorkerOptions{})
	waymark.RegisterWorkflow(w, "inbox", func(ctx waymark.Context, _ any) (string, error) {
		// Waits, running, while the messages come in on another topic.
		m, ok, err := waymark.Recv[string](ctx, "done", 2*time.Minute)
		if err != nil || !ok {
			return "", fmt.Errorf("recv: ok %v err %w", ok, err)
		}
		return m, nil
	})
	runWorker(t, w, queue)
	id := start(t, c, "inbox", queue, nil)
	// Dispatched to the worker; then it waits (PENDING, or DELAYED until its recv times out).
	eventually(t, "the inbox workflow to be dispatched", func() (bool, error) {
		wf, err := c.Get(ctx, id)
		return err == nil && !wf.StartedAt.IsZero(), err
	})
	type item struct {
		I    int    `json:"i"`
		Body string `json:"body"`
	}
	body := strings.Repeat("m", 64*1024)
	var sent []string
	for i := range count {
		s, err := c.Send(ctx, id, "t", item{I: i, Body: body}, nil)
		if err != nil {
			t.Fatal(err)
		}
		sent = append(sent, s.MessageID)
	}

	// The pages as the server answers them, read one by one.
	conn, err := grpc.NewClient(server.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rpc := pb.NewWorkflowServiceClient(conn)
	var pages [][]string
	for token := ""; ; {
		r, err := rpc.ListMessages(ctx, &pb.ListMessagesRequest{WorkflowId: id, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		var page []string
		for _, m := range r.GetMessages() {
			page = append(page, m.GetMessageId())
		}
		pages = append(pages, page)
		if token = r.GetNextPageToken(); token == "" {
			break
		}
	}
	if len(pages) < 2 {
		t.Fatalf("the server answered in one page of %d", len(pages[0]))
	}

	messages, err := c.Messages(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(messages) != count {
		t.Fatalf("%d messages, want %d", len(messages), count)
	}
	ids := messageIDs(messages)
	if !slices.Equal(ids, slices.Concat(pages...)) {
		t.Fatal("the messages are not the server's pages, in order")
	}
	slices.Sort(ids)
	slices.Sort(sent)
	if !slices.Equal(ids, sent) {
		t.Fatal("the messages listed are not the ones sent")
	}
	numbers := make([]bool, count)
	for _, m := range messages {
		var v item
		if err := json.Unmarshal(m.Payload, &v); err != nil || m.Topic != "t" || v.Body != body || v.I < 0 || v.I >= count || numbers[v.I] {
			t.Fatalf("message %s on %q (%v)", m.ID, m.Topic, err)
		}
		numbers[v.I] = true
	}
	t.Logf("%d messages in %d pages", count, len(pages))

	if _, err := c.Send(ctx, id, "done", "over", nil); err != nil {
		t.Fatal(err)
	}
	wf := await(t, c, id)
	if out, err := waymark.Output[string](wf); err != nil || out != "over" {
		t.Fatalf("workflow %s: %q %v", wf.Status, out, err)
	}
}

func messageIDs(messages []waymark.Message) []string {
	out := make([]string, 0, len(messages))
	for _, m := range messages {
		out = append(out, m.ID)
	}
	return out
}
