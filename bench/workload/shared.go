package workload

import (
	"context"
	"fmt"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"

	"github.com/ticketd/ticketd/bench/load"
)

// Holding is how the workers of a Holders op hold keys: the four
// cases whose Acquire+Release cycles/s the shared-locks benchmark compares.
type Holding int

const (
	// HoldShared: every worker takes the one key "bench/<prefix>/shared" in
	// MODE_SHARED, so all of them may hold it at once (a readers-writer
	// lock's read side with no writer).
	HoldShared Holding = iota
	// HoldExclusive: every worker takes the one key "bench/<prefix>/exclusive"
	// exclusively, waiting in the key's FIFO queue: one holder at a time, as
	// the handoff workload.
	HoldExclusive
	// HoldSemaphore: every worker takes a slot of the one key
	// "bench/<prefix>/semaphore" with limit SemaphoreLimit, waiting when all
	// slots are taken (Curator InterProcessSemaphoreV2).
	HoldSemaphore
	// HoldDistinct: each worker takes a key of its own,
	// "bench/<prefix>/distinct/w<i>", exclusively: no contention, the
	// baseline the others are compared with.
	HoldDistinct
)

// SemaphoreLimit is the limit of HoldSemaphore's key: up to 8 holders.
const SemaphoreLimit = 8

// String names h as the report's workload does.
func (h Holding) String() string {
	switch h {
	case HoldShared:
		return "shared"
	case HoldExclusive:
		return "exclusive"
	case HoldSemaphore:
		return "semaphore"
	case HoldDistinct:
		return "distinct"
	}
	return fmt.Sprintf("Holding(%d)", int(h))
}

// Holders returns an Op for workers workers that each, per call, Acquire
// with wait=true the key h says (see Holding) as owner
// "ticketbench-<prefix>-w<i>" through client, then Release it with the
// token granted: one Acquire+Release cycle per operation, every case on the
// same request path (a waiting Acquire), so that only the contention
// differs. client should reach the leader. Calls for different workers may
// run at once. Errors of the Op: the client's error (a *connect.Error)
// wrapped with the call, or ErrUnexpected for a grant with token 0.
func Holders(client ticketv1connect.LockServiceClient, workers int, prefix string, h Holding) load.Op {
	type state struct{ key, owner string }
	states := make([]state, workers)
	for i := range states {
		key := fmt.Sprintf("bench/%s/%s", prefix, h)
		if h == HoldDistinct {
			key = fmt.Sprintf("%s/w%d", key, i)
		}
		states[i] = state{key: key, owner: fmt.Sprintf("ticketbench-%s-w%d", prefix, i)}
	}
	var (
		mode  ticketv1.Mode
		limit uint32
	)
	switch h {
	case HoldShared:
		mode = ticketv1.Mode_MODE_SHARED
	case HoldSemaphore:
		limit = SemaphoreLimit
	}
	return func(ctx context.Context, w int) error {
		st := states[w]
		acq, err := client.Acquire(ctx, &ticketv1.AcquireRequest{
			Key: st.key, LeaseMs: LeaseMS, Owner: st.owner, Wait: true, Mode: mode, Limit: limit,
		})
		if err != nil {
			return fmt.Errorf("acquire %s (%s): %w", st.key, h, err)
		}
		if acq.GetToken() == 0 {
			return fmt.Errorf("%w: acquire %s: token 0", ErrUnexpected, st.key)
		}
		if _, err := client.Release(ctx, &ticketv1.ReleaseRequest{Key: st.key, Token: acq.GetToken()}); err != nil {
			return fmt.Errorf("release %s token %d: %w", st.key, acq.GetToken(), err)
		}
		return nil
	}
}
