package waymark

import (
	"context"

	"google.golang.org/grpc"
)

// A list the server answers a page at a time: each response says where the next page starts
// ("" on the last page).
type pageResponse interface {
	GetNextPageToken() string
}

// readAll reads a list to its end: it calls method with request(token) for each page in turn
// ("" for the first) until a response's next page token is empty, and returns every page's
// items, converted, in order. A page may be short (its payloads filled the response) and not
// be the last: only the empty token ends the list. Each page is its own call, made again with
// the same token while the server answers UNAVAILABLE (see retrying).
func readAll[Req any, Resp pageResponse, W, T any](
	ctx context.Context,
	method func(context.Context, Req, ...grpc.CallOption) (Resp, error),
	request func(token string) Req,
	items func(Resp) []W,
	convert func(W) T,
) ([]T, error) {
	out := []T{}
	token := ""
	for {
		r, err := retried(ctx, method, request(token))
		if err != nil {
			return nil, err
		}
		for _, w := range items(r) {
			out = append(out, convert(w))
		}
		if token = r.GetNextPageToken(); token == "" {
			return out, nil
		}
	}
}
