package waymark

import (
	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// Step records are held back until the workflow's next step, request or completion, then
// sent together: the last steps of a run cost no round trip of their own. The rule that makes
// this safe is that nothing may begin — a step's function, a request — until every record
// taken before it, in call order, is durable. A run's goroutines may flush at the same time
// (two steps started together), so each flush takes what is held at that moment as a batch,
// sends it at once, and then also waits for every batch taken before it: a flush that finds
// nothing held still waits for the records another goroutine has in flight.

// recordBatch is the step records one flush took, and when they are all acknowledged —
// together with those of every batch taken before it.
type recordBatch struct {
	done chan struct{}
	// Set before done closes: the first refusal among this batch and those before it.
	err error
}

// wait waits until the batch and every one before it are settled; a nil batch is settled.
func (b *recordBatch) wait() error {
	if b == nil {
		return nil
	}
	<-b.done
	return b.err
}

// stepRecord is the record of a step's outcome: its failure, when not nil, else its output.
func (r *run) stepRecord(step uint32, name string, out *pb.Payload, failure *pb.Failure, attempts uint32) *pb.RecordStep {
	rec := &pb.RecordStep{WorkflowId: r.id, Epoch: r.epoch, StepId: step, Name: name, Attempts: attempts}
	if failure != nil {
		rec.Outcome = &pb.RecordStep_Failure{Failure: failure}
	} else {
		rec.Outcome = &pb.RecordStep_Output{Output: out}
	}
	return rec
}

// hold keeps a step's record back until the next flush or the completion.
func (r *run) hold(rec *pb.RecordStep) {
	r.mu.Lock()
	r.deferred = append(r.deferred, rec)
	r.mu.Unlock()
}

// takeHeld takes the held records as a new batch (nil when none is held), and the batch taken
// last before it, which this one must not settle before.
func (r *run) takeHeld() (held []*pb.RecordStep, batch, before *recordBatch) {
	r.mu.Lock()
	defer r.mu.Unlock()
	held, r.deferred, before = r.deferred, nil, r.lastBatch
	if len(held) > 0 {
		batch = &recordBatch{done: make(chan struct{})}
		r.lastBatch = batch
	}
	return held, batch, before
}

// flush returns once every step record taken so far is durable: those held now, sent at
// once, and those other flushes have in flight. The first refusal among them is returned (a
// refusal that ends the run also stops it).
func (r *run) flush() error {
	held, batch, before := r.takeHeld()
	if batch == nil && before == nil {
		return r.droppedErr()
	}
	if r.hooks.awaitingRecords != nil {
		r.hooks.awaitingRecords()
	}
	var err error
	if batch != nil {
		err = r.send(held)
		// Settle only after the batches before: a later flush waiting on this one then
		// waits on them too.
		if berr := before.wait(); err == nil {
			err = berr
		}
		batch.err = err
		close(batch.done)
	} else {
		err = before.wait()
	}
	if err == nil {
		// Another goroutine may have dropped the run while this one waited.
		err = r.droppedErr()
	}
	return err
}

// lastRecords takes the held records for the completion to carry, once every flush still in
// flight has settled: the completion is the last thing the run sends.
func (r *run) lastRecords() []*pb.RecordStep {
	r.mu.Lock()
	held, before := r.deferred, r.lastBatch
	r.deferred = nil
	r.mu.Unlock()
	// A refusal among the earlier batches was returned to the workflow by the flush that met
	// it; what the workflow made of it is in its outcome. One that ended the run stopped it.
	_ = before.wait()
	return held
}

// send sends a batch of records, all in flight at once, and waits for each to be durable.
// The records of one batch are independent of each other: each one's step began only after
// every record before it was durable, so none of them can depend on another still in flight.
func (r *run) send(held []*pb.RecordStep) error {
	msgs := make([]*pb.WorkerMessage, len(held))
	replies := make([]<-chan *pb.Reply, len(held))
	var first error
	for i, rec := range held {
		if err := r.droppedErr(); err != nil {
			return err
		}
		msgs[i] = &pb.WorkerMessage{Kind: &pb.WorkerMessage_RecordStep{RecordStep: rec}}
		ch, err := r.conn.start(msgs[i])
		if err == nil {
			replies[i] = ch
			continue
		}
		if err = r.unsent(err); r.droppedErr() != nil {
			return err
		}
		// Refused for its size, unsent: the records already in flight are still waited for.
		if first == nil {
			first = err
		}
	}
	for i := range msgs {
		if replies[i] == nil {
			continue
		}
		reply, err := r.settle(msgs[i], replies[i])
		if err == nil {
			err = r.expect(reply, func(x *pb.Reply) bool { return x.GetStepRecorded() != nil })
		}
		if first == nil {
			first = err
		}
	}
	return first
}
