package waymark

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// All iterates over every workflow matching opts, fetching page after page as the iteration
// goes, until a page comes with no next page token. An error ends the iteration, yielded with
// a nil workflow.
//
//	for wf, err := range client.All(ctx, &waymark.ListOptions{Name: "greet"}) { … }
func (c *Client) All(ctx context.Context, opts *ListOptions) iter.Seq2[*Workflow, error] {
	return func(yield func(*Workflow, error) bool) {
		page := ListOptions{}
		if opts != nil {
			page = *opts
		}
		for {
			items, next, err := c.List(ctx, &page)
			if err != nil {
				yield(nil, err)
				return
			}
			for _, w := range items {
				if !yield(w, nil) {
					return
				}
			}
			if next == "" {
				return
			}
			page.PageToken = next
		}
	}
}

// StreamEntry is one value of a workflow's stream.
type StreamEntry struct {
	Offset uint64
	Value  json.RawMessage
}

// ReadStream follows a workflow's stream key from offset from: it yields values as they are
// written and ends when the stream is closed or the workflow has finished. Stop early by
// breaking out of the loop or cancelling ctx. An error ends the iteration. When the server is
// briefly unavailable, it follows again from the value after the last one yielded.
//
//	for entry, err := range client.ReadStream(ctx, id, "progress", 0) { … }
func (c *Client) ReadStream(ctx context.Context, workflowID, key string, from uint64) iter.Seq2[StreamEntry, error] {
	return func(yield func(StreamEntry, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel() // ends the server stream when the caller stops early
		var o outage
		for {
			stream, err := c.workflows.ReadStream(ctx, &pb.ReadStreamRequest{WorkflowId: workflowID, Key: key, FromOffset: from})
			for err == nil {
				var item *pb.ReadStreamResponse
				if item, err = stream.Recv(); errors.Is(err, io.EOF) {
					return
				}
				if err != nil {
					break
				}
				o = outage{} // it made progress: a later outage is a new one
				value, verr := payloadJSON(item.GetValue())
				if !yield(StreamEntry{Offset: item.GetOffset(), Value: value}, verr) || verr != nil {
					return
				}
				from = item.GetOffset() + 1
			}
			if !o.wait(ctx, err) {
				yield(StreamEntry{}, rpcError(err))
				return
			}
		}
	}
}

// ReadStreamAs is ReadStream with values decoded as T.
func ReadStreamAs[T any](ctx context.Context, c *Client, workflowID, key string, from uint64) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		for entry, err := range c.ReadStream(ctx, workflowID, key, from) {
			var v T
			if err == nil {
				v, err = decodeJSON[T](entry.Value)
			}
			if !yield(v, err) || err != nil {
				return
			}
		}
	}
}
