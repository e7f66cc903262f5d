package workload

import (
	"context"
	"fmt"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"

	"github.com/ticketd/ticketd/bench/load"
)

// Locks returns an Op for workers workers that each, per call, Acquire (not
// waiting) the key "bench/<prefix>/lock/w<i>" as owner
// "ticketbench-<prefix>-w<i>" through client and then Release it with the
// token granted. client should reach the leader, as etcd's Mutex client in
// bench/etcdpeer does; a follower would forward each call one hop. Calls for
// different workers may run at once (client is safe for concurrent use).
// Errors of the Op: the client's error (a *connect.Error) wrapped with the
// call, or ErrUnexpected for a grant with token 0.
func Locks(client ticketv1connect.LockServiceClient, workers int, prefix string) load.Op {
	type state struct{ key, owner string }
	states := make([]state, workers)
	for i := range states {
		states[i] = state{key: fmt.Sprintf("bench/%s/lock/w%d", prefix, i), owner: fmt.Sprintf("ticketbench-%s-w%d", prefix, i)}
	}
	return func(ctx context.Context, w int) error {
		st := states[w]
		acq, err := client.Acquire(ctx, &ticketv1.AcquireRequest{Key: st.key, LeaseMs: LeaseMS, Owner: st.owner})
		if err != nil {
			return fmt.Errorf("acquire: %w", err)
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
