package waymark

import (
	"context"
	"encoding/json"
	"time"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// UpdateOptions are an update's options; nil means none.
type UpdateOptions struct {
	// UpdateID makes the call idempotent (1-256 characters): the same id is the same update,
	// delivered once and answered once. Generated when empty (then kept for the call's own
	// resends).
	UpdateID string
	// Timeout is how long to wait for the answer: the server's default, 60 s, when zero; at
	// most 24 hours.
	Timeout time.Duration
}

// UpdateWorkflow sends update name with args to workflow workflowID and waits for its answer
// (a running workflow takes it with RecvUpdate and answers it with AnswerUpdate), which it
// returns. Refused with reason UPDATE_REJECTED when the workflow rejects it (the message holds
// the workflow's reason); UPDATE_PENDING (DEADLINE_EXCEEDED) when the workflow has not answered
// within the timeout: call again with the same UpdateID to keep waiting, it is not sent twice;
// UPDATE_NOT_ANSWERED when the workflow ended without answering; WORKFLOW_NOT_RUNNING when it
// had ended already; WORKFLOW_NOT_FOUND.
func (c *Client) UpdateWorkflow(ctx context.Context, workflowID, name string, args any, opts *UpdateOptions) (json.RawMessage, error) {
	payload, err := toPayload(args)
	if err != nil {
		return nil, err
	}
	req := &pb.UpdateWorkflowRequest{WorkflowId: workflowID, Name: name, Args: payload}
	wait := 60 * time.Second
	if opts != nil {
		req.UpdateId = opts.UpdateID
		req.Timeout = durationOrNil(opts.Timeout)
		if opts.Timeout > 0 {
			wait = opts.Timeout
		}
	}
	// Chosen here, not by the server, so a resend after UNAVAILABLE is the same update.
	if req.UpdateId == "" {
		req.UpdateId = newWorkflowID()
	}
	// Room for the server to answer UPDATE_PENDING itself rather than the call timing out.
	ctx, cancel := context.WithTimeout(ctx, wait+5*time.Second)
	defer cancel()
	r, err := retried(ctx, c.workflows.UpdateWorkflow, req)
	if err != nil {
		return nil, err
	}
	return payloadJSON(r.GetResult())
}

// UpdateWorkflowAs is UpdateWorkflow with the answer decoded as T.
func UpdateWorkflowAs[T any](ctx context.Context, c *Client, workflowID, name string, args any, opts *UpdateOptions) (T, error) {
	var zero T
	raw, err := c.UpdateWorkflow(ctx, workflowID, name, args, opts)
	if err != nil {
		return zero, err
	}
	return decodeJSON[T](raw)
}
