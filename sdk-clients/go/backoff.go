package waymark

import (
	"math/rand/v2"
	"time"
)

// jittered is the wait before try number n+1 after n failures in a row: 50 ms doubling up to
// ceiling, drawn from its upper half so that many workers or clients retrying at once spread
// out instead of arriving together.
func jittered(failures int, ceiling time.Duration) time.Duration {
	base := min(50*time.Millisecond<<min(max(failures, 1)-1, 16), ceiling)
	return base/2 + rand.N(base/2+1)
}

// backoff is the wait before reconnecting a broken worker stream: up to 5 s.
func backoff(failures int) time.Duration { return jittered(failures, 5*time.Second) }

// resendBackoff is the wait before sending again a request the server answered UNAVAILABLE
// (its database restarting, say): up to 2 s, short enough to notice the end of an outage soon.
func resendBackoff(failures int) time.Duration { return jittered(failures, 2*time.Second) }

// defaultUnavailableRetry is how long a request answered UNAVAILABLE is tried again, by a
// worker (unless WorkerOptions.RetryUnavailable says otherwise) and by a client.
const defaultUnavailableRetry = 60 * time.Second
