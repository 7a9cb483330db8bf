package waymark

import (
	"testing"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// A replay ends at the position of the request it would have sent: stepOf reads it from every
// kind of request a run sends.
func TestStepOfReadsEveryRequestsPosition(t *testing.T) {
	requests := []*pb.WorkerMessage{
		{Kind: &pb.WorkerMessage_RecordStep{RecordStep: &pb.RecordStep{StepId: 7}}},
		{Kind: &pb.WorkerMessage_SendMessage{SendMessage: &pb.SendMessageStep{StepId: 7}}},
		{Kind: &pb.WorkerMessage_Recv{Recv: &pb.Recv{StepId: 7}}},
		{Kind: &pb.WorkerMessage_SetEvent{SetEvent: &pb.SetEvent{StepId: 7}}},
		{Kind: &pb.WorkerMessage_GetEvent{GetEvent: &pb.GetEventStep{StepId: 7}}},
		{Kind: &pb.WorkerMessage_WriteStream{WriteStream: &pb.WriteStream{StepId: 7}}},
		{Kind: &pb.WorkerMessage_StartChild{StartChild: &pb.StartChild{StepId: 7}}},
		{Kind: &pb.WorkerMessage_AwaitChild{AwaitChild: &pb.AwaitChild{StepId: 7}}},
		{Kind: &pb.WorkerMessage_Park{Park: &pb.Park{StepId: 7}}},
		{Kind: &pb.WorkerMessage_CallStep{CallStep: &pb.CallStep{StepId: 7}}},
		{Kind: &pb.WorkerMessage_Select{Select: &pb.Select{StepId: 7}}},
	}
	for _, m := range requests {
		if got := stepOf(m); got != 7 {
			t.Errorf("%T: step %d", m.GetKind(), got)
		}
	}
	if got := stepOf(&pb.WorkerMessage{}); got != 0 {
		t.Errorf("no request: step %d", got)
	}
}
