package sdk

import (
	"context"
	"fmt"
	"math"
)

// Semaphore is a counting semaphore on one key (Curator
// InterProcessSemaphoreV2, Consul's semaphore recipe): up to Limit holders
// at once, each with a fencing token of its own; waiters take freed slots
// first in, first out. Every process using the key must give the same
// limit while it has holders or waiters (else *LimitMismatchError). It is
// a value that only names the key and limit; make one with
// Client.Semaphore. Safe for concurrent use.
type Semaphore struct {
	c     *Client
	key   string
	limit int
}

// Semaphore returns the semaphore of limit slots (1 ≤ limit; the servers
// allow at most 4096) on key. It does no I/O.
func (c *Client) Semaphore(key string, limit int) *Semaphore {
	return &Semaphore{c: c, key: key, limit: limit}
}

// Key returns the semaphore's key.
func (s *Semaphore) Key() string { return s.key }

// Limit returns the semaphore's slot count.
func (s *Semaphore) Limit() int { return s.limit }

// Acquire waits in the key's FIFO queue until a slot is free, or ctx ends,
// and returns the slot's Lease. It is held under the client's default
// session unless WithLease gives it a lease of its own or WithSession
// another session; Unlock frees the slot.
//
// Errors: ErrInvalidArgument (limit out of range), *LimitMismatchError
// (the key is held or awaited with another limit, or as a lock), and
// Lock's.
func (s *Semaphore) Acquire(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return s.acquire(ctx, true, opts)
}

// TryAcquire takes a slot if one is free and nobody waits ahead, else fails
// at once with ErrLocked.
//
// Errors: ErrLocked, and Acquire's.
func (s *Semaphore) TryAcquire(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return s.acquire(ctx, false, opts)
}

func (s *Semaphore) acquire(ctx context.Context, wait bool, opts []AcquireOption) (*Lease, error) {
	if s.limit < 1 || s.limit > math.MaxUint32 {
		return nil, fmt.Errorf("semaphore %q: %w: limit %d, want at least 1", s.key, ErrInvalidArgument, s.limit)
	}
	return s.c.lock(ctx, s.key, 0, wait, append(opts, WithLimit(uint32(s.limit))))
}
