package waymark

import (
	"context"
	"encoding/json"
	"time"

	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// ScheduleSpec is what a schedule does: start workflow WorkflowName with Input at every time
// Cron names, read in TimeZone.
type ScheduleSpec struct {
	// Cron: 5 fields (minute first) or 6 (seconds first); names and nicknames (@daily) work.
	Cron string
	// TimeZone is an IANA name, e.g. "Europe/Berlin"; "UTC" when empty.
	TimeZone     string
	WorkflowName string
	// Input of every workflow it starts (any JSON-encodable value).
	Input any
	// Queue its workflows start on; "default" when empty. Must exist.
	Queue string
	// Paused creates it paused (CreateSchedule only; then PauseSchedule and ResumeSchedule).
	Paused bool
}

// Schedule is a schedule as the server reports it.
type Schedule struct {
	Name         string
	Cron         string
	TimeZone     string
	WorkflowName string
	Input        json.RawMessage
	Queue        string
	Paused       bool
	// LastFireTime is zero until the scheduler fires it; NextFireTime is zero while paused.
	LastFireTime time.Time
	NextFireTime time.Time
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// ScheduleRun is one workflow a backfill started (or found started) for one fire time.
type ScheduleRun struct {
	FireTime   time.Time
	WorkflowID string
	Created    bool
}

// ScheduleField names what UpdateSchedule changes.
type ScheduleField string

const (
	FieldCron         ScheduleField = "cron"
	FieldTimeZone     ScheduleField = "timezone"
	FieldWorkflowName ScheduleField = "workflow_name"
	FieldInput        ScheduleField = "input"
	FieldQueue        ScheduleField = "queue_name"
)

func scheduleToWire(name string, s ScheduleSpec) (*pb.Schedule, error) {
	input, err := toPayload(s.Input)
	if err != nil {
		return nil, err
	}
	return &pb.Schedule{Name: name, Cron: s.Cron, Timezone: s.TimeZone, WorkflowName: s.WorkflowName, Input: input, QueueName: s.Queue, Paused: s.Paused}, nil
}

func scheduleFromWire(s *pb.Schedule) *Schedule {
	return &Schedule{
		Name: s.GetName(), Cron: s.GetCron(), TimeZone: s.GetTimezone(), WorkflowName: s.GetWorkflowName(),
		Input: jsonOf(s.GetInput()), Queue: s.GetQueueName(), Paused: s.GetPaused(),
		LastFireTime: timeOf(s.GetLastFireTime()), NextFireTime: timeOf(s.GetNextFireTime()),
		CreatedAt: timeOf(s.GetCreatedAt()), UpdatedAt: timeOf(s.GetUpdatedAt()),
	}
}

// CreateSchedule creates schedule name; reason SCHEDULE_EXISTS when the name is taken.
func (c *Client) CreateSchedule(ctx context.Context, name string, spec ScheduleSpec) (*Schedule, error) {
	s, err := scheduleToWire(name, spec)
	if err != nil {
		return nil, err
	}
	r, err := c.schedules.CreateSchedule(ctx, &pb.CreateScheduleRequest{Schedule: s})
	if err != nil {
		return nil, rpcError(err)
	}
	return scheduleFromWire(r.GetSchedule()), nil
}

// UpdateSchedule sets the fields named in fields to their values in spec; with no fields,
// every field. A new cron or time zone moves the next fire time to the first after now.
func (c *Client) UpdateSchedule(ctx context.Context, name string, spec ScheduleSpec, fields ...ScheduleField) (*Schedule, error) {
	s, err := scheduleToWire(name, spec)
	if err != nil {
		return nil, err
	}
	req := &pb.UpdateScheduleRequest{Schedule: s}
	if len(fields) > 0 {
		req.UpdateMask = &fieldmaskpb.FieldMask{}
		for _, f := range fields {
			req.UpdateMask.Paths = append(req.UpdateMask.Paths, string(f))
		}
	}
	r, err := c.schedules.UpdateSchedule(ctx, req)
	if err != nil {
		return nil, rpcError(err)
	}
	return scheduleFromWire(r.GetSchedule()), nil
}

// GetSchedule reads one schedule; reason SCHEDULE_NOT_FOUND when there is none.
func (c *Client) GetSchedule(ctx context.Context, name string) (*Schedule, error) {
	r, err := retried(ctx, c.schedules.GetSchedule, &pb.GetScheduleRequest{Name: name})
	if err != nil {
		return nil, err
	}
	return scheduleFromWire(r.GetSchedule()), nil
}

// ListSchedules lists every schedule, by name, reading every page.
func (c *Client) ListSchedules(ctx context.Context) ([]*Schedule, error) {
	return readAll(ctx, c.schedules.ListSchedules,
		func(token string) *pb.ListSchedulesRequest { return &pb.ListSchedulesRequest{PageToken: token} },
		(*pb.ListSchedulesResponse).GetSchedules, scheduleFromWire)
}

// DeleteSchedule removes a schedule; the workflows it started are left as they are.
func (c *Client) DeleteSchedule(ctx context.Context, name string) error {
	_, err := c.schedules.DeleteSchedule(ctx, &pb.DeleteScheduleRequest{Name: name})
	return rpcError(err)
}

// PauseSchedule stops a schedule firing until it is resumed.
func (c *Client) PauseSchedule(ctx context.Context, name string) (*Schedule, error) {
	r, err := c.schedules.PauseSchedule(ctx, &pb.PauseScheduleRequest{Name: name})
	if err != nil {
		return nil, rpcError(err)
	}
	return scheduleFromWire(r.GetSchedule()), nil
}

// ResumeSchedule fires a schedule again from the first time after now.
func (c *Client) ResumeSchedule(ctx context.Context, name string) (*Schedule, error) {
	r, err := c.schedules.ResumeSchedule(ctx, &pb.ResumeScheduleRequest{Name: name})
	if err != nil {
		return nil, rpcError(err)
	}
	return scheduleFromWire(r.GetSchedule()), nil
}

// TriggerSchedule starts the schedule's workflow once, now. A non-empty requestID makes it
// idempotent: a retried trigger with the same id starts one workflow.
func (c *Client) TriggerSchedule(ctx context.Context, name, requestID string) (*Started, error) {
	req := &pb.TriggerScheduleRequest{Name: name, RequestId: requestID}
	var r *pb.TriggerScheduleResponse
	var err error
	if requestID != "" {
		// With a request id the trigger starts one workflow however often it is made.
		r, err = retried(ctx, c.schedules.TriggerSchedule, req)
	} else {
		r, err = c.schedules.TriggerSchedule(ctx, req)
		err = rpcError(err)
	}
	if err != nil {
		return nil, err
	}
	// A schedule's trigger does not ask about the name: NameRegistered is true, as it was for
	// every start before AllowUnregistered.
	return &Started{Workflow: workflowFromWire(r.GetWorkflow()), Created: r.GetCreated(), NameRegistered: true}, nil
}

// BackfillSchedule starts one workflow for every fire time from start through end (both
// included; end not in the future), with the ids the scheduler uses: repeating it starts
// nothing new.
func (c *Client) BackfillSchedule(ctx context.Context, name string, start, end time.Time) ([]ScheduleRun, error) {
	// Repeating a backfill starts nothing new (the fire times name the workflows).
	r, err := retried(ctx, c.schedules.BackfillSchedule, &pb.BackfillScheduleRequest{Name: name, StartTime: timestamppb.New(start), EndTime: timestamppb.New(end)})
	if err != nil {
		return nil, err
	}
	out := make([]ScheduleRun, 0, len(r.GetRuns()))
	for _, run := range r.GetRuns() {
		out = append(out, ScheduleRun{FireTime: timeOf(run.GetFireTime()), WorkflowID: run.GetWorkflowId(), Created: run.GetCreated()})
	}
	return out, nil
}
