package waymark

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// QueueLimits are a queue's limits; nil means no limit.
type QueueLimits struct {
	// Most of the queue's workflows one worker process runs at once.
	WorkerConcurrency *uint32
	// Most of the queue's workflows running at once across the fleet.
	GlobalConcurrency *uint32
	// At most MaxStarts starts in any window of Period.
	RateLimit *RateLimit
	// Most workflows of one partition key running at once.
	PartitionConcurrency *uint32
}

// RateLimit: at most MaxStarts starts in any window of Period (1 ms to 24 hours).
type RateLimit struct {
	MaxStarts uint32
	Period    time.Duration
}

// Limit is a convenience for the optional limits: Limit(4) is a *uint32 to 4.
func Limit(n uint32) *uint32 { return &n }

// Queue is a queue as the server reports it.
type Queue struct {
	Name      string
	Limits    QueueLimits
	CreatedAt time.Time
	UpdatedAt time.Time
}

// QueueField names a limit for UpdateQueue.
type QueueField string

const (
	FieldWorkerConcurrency    QueueField = "worker_concurrency"
	FieldGlobalConcurrency    QueueField = "global_concurrency"
	FieldRateLimit            QueueField = "rate_limit"
	FieldPartitionConcurrency QueueField = "partition_concurrency"
)

func queueToWire(name string, l QueueLimits) *pb.Queue {
	q := &pb.Queue{
		Name:                 name,
		WorkerConcurrency:    l.WorkerConcurrency,
		GlobalConcurrency:    l.GlobalConcurrency,
		PartitionConcurrency: l.PartitionConcurrency,
	}
	if r := l.RateLimit; r != nil {
		q.RateLimit = &pb.RateLimit{MaxStarts: r.MaxStarts, Period: durationpb.New(r.Period)}
	}
	return q
}

func queueFromWire(q *pb.Queue) *Queue {
	out := &Queue{
		Name: q.GetName(),
		Limits: QueueLimits{
			WorkerConcurrency:    q.WorkerConcurrency,
			GlobalConcurrency:    q.GlobalConcurrency,
			PartitionConcurrency: q.PartitionConcurrency,
		},
		CreatedAt: timeOf(q.GetCreatedAt()),
		UpdatedAt: timeOf(q.GetUpdatedAt()),
	}
	if r := q.GetRateLimit(); r != nil {
		out.Limits.RateLimit = &RateLimit{MaxStarts: r.GetMaxStarts(), Period: r.GetPeriod().AsDuration()}
	}
	return out
}

// CreateQueue creates a queue; reason QUEUE_EXISTS when the name is taken.
func (c *Client) CreateQueue(ctx context.Context, name string, limits QueueLimits) (*Queue, error) {
	r, err := c.queues.CreateQueue(ctx, &pb.CreateQueueRequest{Queue: queueToWire(name, limits)})
	if err != nil {
		return nil, rpcError(err)
	}
	return queueFromWire(r.GetQueue()), nil
}

// UpdateQueue sets the limits named in fields to their values in limits (a nil one removes
// that limit); with no fields, every limit is set as limits has it.
func (c *Client) UpdateQueue(ctx context.Context, name string, limits QueueLimits, fields ...QueueField) (*Queue, error) {
	req := &pb.UpdateQueueRequest{Queue: queueToWire(name, limits)}
	if len(fields) > 0 {
		req.UpdateMask = &fieldmaskpb.FieldMask{}
		for _, f := range fields {
			req.UpdateMask.Paths = append(req.UpdateMask.Paths, string(f))
		}
	}
	r, err := c.queues.UpdateQueue(ctx, req)
	if err != nil {
		return nil, rpcError(err)
	}
	return queueFromWire(r.GetQueue()), nil
}

// GetQueue reads one queue; reason QUEUE_NOT_FOUND when there is none by that name.
func (c *Client) GetQueue(ctx context.Context, name string) (*Queue, error) {
	r, err := retried(ctx, c.queues.GetQueue, &pb.GetQueueRequest{Name: name})
	if err != nil {
		return nil, err
	}
	return queueFromWire(r.GetQueue()), nil
}

// ListQueues lists every queue, by name, reading every page.
func (c *Client) ListQueues(ctx context.Context) ([]*Queue, error) {
	return readAll(ctx, c.queues.ListQueues,
		func(token string) *pb.ListQueuesRequest { return &pb.ListQueuesRequest{PageToken: token} },
		(*pb.ListQueuesResponse).GetQueues, queueFromWire)
}

// DeleteQueue removes a queue; "default" cannot be removed (reason QUEUE_PROTECTED).
func (c *Client) DeleteQueue(ctx context.Context, name string) error {
	_, err := c.queues.DeleteQueue(ctx, &pb.DeleteQueueRequest{Name: name})
	return rpcError(err)
}
