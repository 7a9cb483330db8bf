package waymark

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// SetVersion re-pins the unfinished workflowID to appVersion — the way to move work off a
// retired version whose workers are gone: its next dispatch goes to that version's workers,
// which replay its history (check with a Replayer first that their code does). One running
// now stays on its worker until it finishes, parks or is recovered. It returns the workflow.
// Refused with reason VERSION_NOT_SERVED when no connected worker of appVersion registers the
// workflow's name, unless allowUnserved (it then waits for one); a finished workflow with
// WORKFLOW_FINISHED. Resent on UNAVAILABLE: setting the same version again changes nothing.
func (c *Client) SetVersion(ctx context.Context, workflowID, appVersion string, allowUnserved bool) (*Workflow, error) {
	req := &pb.SetWorkflowVersionRequest{WorkflowId: workflowID, AppVersion: appVersion, AllowUnserved: allowUnserved}
	r, err := retried(ctx, c.workflows.SetWorkflowVersion, req)
	if err != nil {
		return nil, err
	}
	return workflowFromWire(r.GetWorkflow()), nil
}

// WorkflowFilter says which workflows a bulk operation acts on: the filters of a listing, all
// of which must match. Its zero value matches every workflow of the namespace.
type WorkflowFilter struct {
	Statuses      []Status
	Name          string
	Queue         string
	CreatedAfter  time.Time
	CreatedBefore time.Time
	// WorkerID: the worker running them.
	WorkerID string
	// AppVersion: pinned to this version.
	AppVersion string
	// ParentID: children of this workflow.
	ParentID string
	// Tags: carrying every one of these (key and value).
	Tags map[string]string
}

func (f WorkflowFilter) toWire() *pb.WorkflowFilter {
	w := &pb.WorkflowFilter{
		WorkflowName:     f.Name,
		QueueName:        f.Queue,
		WorkerId:         f.WorkerID,
		AppVersion:       f.AppVersion,
		ParentWorkflowId: f.ParentID,
		Tags:             f.Tags,
	}
	for _, s := range f.Statuses {
		w.Statuses = append(w.Statuses, statusWire[s])
	}
	if !f.CreatedAfter.IsZero() {
		w.CreatedAfter = timestamppb.New(f.CreatedAfter)
	}
	if !f.CreatedBefore.IsZero() {
		w.CreatedBefore = timestamppb.New(f.CreatedBefore)
	}
	return w
}

// BulkAction is what a bulk operation does to each workflow its filter matches: BulkCancel,
// BulkResume, BulkDelete or BulkSetVersion.
type BulkAction interface {
	setOn(req *pb.BulkWorkflowsRequest)
}

// BulkCancel cancels each workflow (without its children), as Cancel does.
type BulkCancel struct{}

// BulkResume resumes each workflow, as Resume does.
type BulkResume struct{}

// BulkDelete deletes each finished workflow (without cascade), as Delete does.
type BulkDelete struct{}

// BulkSetVersion re-pins each workflow, as SetVersion does; whether AppVersion is served is
// checked once for each workflow name of a batch.
type BulkSetVersion struct {
	AppVersion    string
	AllowUnserved bool
}

func (BulkCancel) setOn(req *pb.BulkWorkflowsRequest) {
	req.Action = &pb.BulkWorkflowsRequest_Cancel{Cancel: &pb.BulkCancel{}}
}

func (BulkResume) setOn(req *pb.BulkWorkflowsRequest) {
	req.Action = &pb.BulkWorkflowsRequest_Resume{Resume: &pb.BulkResume{}}
}

func (BulkDelete) setOn(req *pb.BulkWorkflowsRequest) {
	req.Action = &pb.BulkWorkflowsRequest_Delete{Delete: &pb.BulkDelete{}}
}

func (a BulkSetVersion) setOn(req *pb.BulkWorkflowsRequest) {
	req.Action = &pb.BulkWorkflowsRequest_SetVersion{SetVersion: &pb.BulkSetVersion{AppVersion: a.AppVersion, AllowUnserved: a.AllowUnserved}}
}

// BulkOutcome is what a bulk operation did, to one batch (BulkBatch) or to all (Bulk).
type BulkOutcome struct {
	// Matched: the workflows looked at (the filter matched them).
	Matched uint64
	// Applied: of those, the ones the action changed.
	Applied uint64
	// Skipped: the others, by the reason the single-workflow call gives (WORKFLOW_FINISHED
	// for a cancel of a finished one, WORKFLOW_NOT_FINISHED for a delete of a running one).
	// Never nil.
	Skipped map[string]uint64
	// NextPageToken: after one batch, the token of the next; "" when it was the last.
	NextPageToken string
}

// CountMatching counts the workflows filter matches and changes nothing: a bulk operation's
// dry run. Resent on UNAVAILABLE.
func (c *Client) CountMatching(ctx context.Context, filter WorkflowFilter) (uint64, error) {
	req := &pb.BulkWorkflowsRequest{Filter: filter.toWire(), DryRun: true}
	BulkCancel{}.setOn(req)
	r, err := retried(ctx, c.workflows.BulkWorkflows, req)
	if err != nil {
		return 0, err
	}
	return r.GetTotal(), nil
}

// BulkBatch applies action to one batch of the workflows filter matches, in the order List
// returns them, starting at pageToken ("" for the first batch). batchSize is 1-1000 (0: 100;
// more is taken as 1000; a batch also stops before its workflows fill the response). Each
// workflow is acted on as the single-workflow call would be; one it does not apply to is
// skipped and counted by reason, so a repeated batch changes nothing twice — which is why it
// is resent on UNAVAILABLE. Call again with the outcome's NextPageToken until it is "".
func (c *Client) BulkBatch(ctx context.Context, filter WorkflowFilter, action BulkAction, batchSize int32, pageToken string) (*BulkOutcome, error) {
	req := &pb.BulkWorkflowsRequest{Filter: filter.toWire(), BatchSize: batchSize, PageToken: pageToken}
	action.setOn(req)
	r, err := retried(ctx, c.workflows.BulkWorkflows, req)
	if err != nil {
		return nil, err
	}
	out := &BulkOutcome{
		Matched:       uint64(r.GetMatched()),
		Applied:       uint64(r.GetApplied()),
		Skipped:       make(map[string]uint64, len(r.GetSkipped())),
		NextPageToken: r.GetNextPageToken(),
	}
	for reason, n := range r.GetSkipped() {
		out.Skipped[reason] = uint64(n)
	}
	return out, nil
}

// Bulk applies action to every workflow filter matches, batch after batch (see BulkBatch),
// and returns the sums; its NextPageToken is "". An error stops it between batches: the
// batches before it are done, and running Bulk again is safe (what was done is skipped). See
// how many it will touch first with CountMatching.
func (c *Client) Bulk(ctx context.Context, filter WorkflowFilter, action BulkAction, batchSize int32) (*BulkOutcome, error) {
	sum := &BulkOutcome{Skipped: map[string]uint64{}}
	token := ""
	for {
		batch, err := c.BulkBatch(ctx, filter, action, batchSize, token)
		if err != nil {
			return nil, err
		}
		sum.Matched += batch.Matched
		sum.Applied += batch.Applied
		for reason, n := range batch.Skipped {
			sum.Skipped[reason] += n
		}
		if batch.NextPageToken == "" {
			return sum, nil
		}
		token = batch.NextPageToken
	}
}
