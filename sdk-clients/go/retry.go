package waymark

import (
	"math"
	"time"
)

// RetryPolicy is how a step is retried when it returns an error. The zero value runs a step
// once; unset intervals take the defaults (100 ms, doubling, at most 30 s).
type RetryPolicy struct {
	// MaxAttempts counts every attempt, the first included.
	MaxAttempts uint32
	// InitialInterval is the wait before the second attempt.
	InitialInterval time.Duration
	// Backoff multiplies each wait by this (at least 1; 0 means 2).
	Backoff float64
	// MaxInterval caps every wait.
	MaxInterval time.Duration
}

// Attempts is a policy of n attempts with the default backoff.
func Attempts(n uint32) RetryPolicy { return RetryPolicy{MaxAttempts: n} }

func (p RetryPolicy) normalized() RetryPolicy {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = 1
	}
	if p.InitialInterval <= 0 {
		p.InitialInterval = 100 * time.Millisecond
	}
	if p.Backoff == 0 {
		p.Backoff = 2
	}
	p.Backoff = math.Max(p.Backoff, 1)
	if p.MaxInterval <= 0 {
		p.MaxInterval = 30 * time.Second
	}
	return p
}

// Delay is the wait after failed attempt number attempt (1-based).
func (p RetryPolicy) Delay(attempt uint32) time.Duration {
	p = p.normalized()
	exp := float64(min(max(attempt, 1)-1, 64))
	d := float64(p.InitialInterval) * math.Pow(p.Backoff, exp)
	return time.Duration(math.Min(d, float64(p.MaxInterval)))
}
