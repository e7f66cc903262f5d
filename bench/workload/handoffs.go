package workload

import (
	"context"
	"fmt"
	"time"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"

	"github.com/ticketd/ticketd/bench/handoff"
)

// Handoffs returns a handoff.CycleFunc for the contended handoff workload
// (docs/design.md#handoff): every worker acquires the one key "bench/<prefix>/handoff"
// with wait=true, as owner "ticketbench-<prefix>-w<i>", notes when the
// Acquire returned and its fencing token, releases with that token and notes
// when the Release returned. client should reach the leader. Safe for calls
// from many workers at once. Errors: the client's error wrapped with the
// call, or ErrUnexpected for a grant with token 0.
func Handoffs(client ticketv1connect.LockServiceClient, prefix string) handoff.CycleFunc {
	key := fmt.Sprintf("bench/%s/handoff", prefix)
	return func(ctx context.Context, w int) (handoff.Cycle, error) {
		owner := fmt.Sprintf("ticketbench-%s-w%d", prefix, w)
		acq, err := client.Acquire(ctx, &ticketv1.AcquireRequest{Key: key, LeaseMs: LeaseMS, Owner: owner, Wait: true})
		if err != nil {
			return handoff.Cycle{}, fmt.Errorf("acquire (wait): %w", err)
		}
		c := handoff.Cycle{Token: acq.GetToken(), Acquired: time.Now()}
		if c.Token == 0 {
			return handoff.Cycle{}, fmt.Errorf("%w: acquire %s: token 0", ErrUnexpected, key)
		}
		if _, err := client.Release(ctx, &ticketv1.ReleaseRequest{Key: key, Token: c.Token}); err != nil {
			return handoff.Cycle{}, fmt.Errorf("release %s token %d: %w", key, c.Token, err)
		}
		c.Released = time.Now()
		return c, nil
	}
}
