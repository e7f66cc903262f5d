package workload

import (
	"context"
	"fmt"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"

	"github.com/ticketd/ticketd/bench/load"
)

// Renews acquires, for each of workers workers, the key
// "bench/<prefix>/renew/w<i>" (lease LeaseMS) through client, and returns an
// Op that renews worker w's lock once per call (every Renew is a
// replicated command, group-committed with the others). client should reach
// the leader, as etcd's client in bench/etcdpeer does. Errors: the first
// Acquire's, wrapped; of the Op: the Renew's (a *connect.Error) wrapped with
// the key, or ErrUnexpected for a renewal that reports no lease.
func Renews(ctx context.Context, client ticketv1connect.LockServiceClient, workers int, prefix string) (load.Op, error) {
	type held struct {
		key   string
		token uint64
	}
	locks := make([]held, workers)
	for i := range locks {
		key := fmt.Sprintf("bench/%s/renew/w%d", prefix, i)
		var res *ticketv1.AcquireResponse
		err := retrySetup(ctx, func() (err error) {
			res, err = client.Acquire(ctx, &ticketv1.AcquireRequest{Key: key, LeaseMs: LeaseMS, Owner: fmt.Sprintf("ticketbench-%s-renew-w%d", prefix, i)})
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("acquire %s: %w", key, err)
		}
		locks[i] = held{key, res.GetToken()}
	}
	return func(ctx context.Context, w int) error {
		l := locks[w]
		res, err := client.Renew(ctx, &ticketv1.RenewRequest{Key: l.key, Token: l.token})
		if err != nil {
			return fmt.Errorf("renew %s token %d: %w", l.key, l.token, err)
		}
		if res.GetLeaseMs() <= 0 {
			return fmt.Errorf("%w: renew %s: lease %d ms", ErrUnexpected, l.key, res.GetLeaseMs())
		}
		return nil
	}, nil
}
