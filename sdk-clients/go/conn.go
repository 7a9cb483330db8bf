package waymark

import (
	"sync"
	"sync/atomic"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// workerStream is the worker's end of the stream as a session uses it. The gRPC stream is one;
// the package's tests put a fake server behind it.
type workerStream interface {
	Send(*pb.WorkerMessage) error
	Recv() (*pb.ServerMessage, error)
}

// conn is the sending half of one worker stream, shared by every workflow running on it:
// requests carry an id the server's Reply echoes, and wait for it here.
type conn struct {
	stream workerStream
	// The sizes the server takes: the defaults until its Welcome, then the Welcome's. Set
	// before anything but the hello is sent, and never again.
	limits limits
	// grpc-go allows one Send at a time on a stream.
	sendMu sync.Mutex
	nextID atomic.Uint64

	mu      sync.Mutex
	pending map[uint64]chan *pb.Reply
	// Closed when the stream ends: every waiting request then fails with ErrDisconnected.
	done      chan struct{}
	closeOnce sync.Once
}

func newConn(stream workerStream) *conn {
	return &conn{stream: stream, limits: limitsOf(nil), pending: map[uint64]chan *pb.Reply{}, done: make(chan struct{})}
}

// send sends a message that gets no reply (credit, heartbeat). One larger than the server
// takes is not sent: the error is a *Error with reason PAYLOAD_TOO_LARGE, and the stream
// goes on.
func (c *conn) send(msg *pb.WorkerMessage) error {
	if err := c.limits.fits(msg); err != nil {
		return err
	}
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	select {
	case <-c.done:
		return ErrDisconnected
	default:
	}
	if err := c.stream.Send(msg); err != nil {
		return ErrDisconnected
	}
	return nil
}

// start sends a request and returns where its reply will arrive, so several requests can be
// in flight at once (a flush of held-back step records).
func (c *conn) start(msg *pb.WorkerMessage) (<-chan *pb.Reply, error) {
	id := c.nextID.Add(1)
	msg.RequestId = id
	ch := make(chan *pb.Reply, 1)
	c.mu.Lock()
	c.pending[id] = ch
	c.mu.Unlock()
	if err := c.send(msg); err != nil {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return nil, err
	}
	return ch, nil
}

// wait waits for a reply started with start.
func (c *conn) wait(ch <-chan *pb.Reply) (*pb.Reply, error) {
	select {
	case r := <-ch:
		return r, nil
	case <-c.done:
		return nil, ErrDisconnected
	}
}

// resolve hands a reply to the request waiting for it.
func (c *conn) resolve(r *pb.Reply) {
	c.mu.Lock()
	ch := c.pending[r.GetRequestId()]
	delete(c.pending, r.GetRequestId())
	c.mu.Unlock()
	if ch != nil {
		ch <- r
	}
}

func (c *conn) close() {
	c.closeOnce.Do(func() { close(c.done) })
}

func (c *conn) closed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}
