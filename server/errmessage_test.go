package server_test

import (
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/server/config"
)

// TestErrorMessages: what a client reads after the code is one sentence in
// the user's terms, with no package names and no repeated category (not
// "invalid_argument: ticketd: invalid argument: lease_ms 50 ...",
// "waitq: key is held", "lessor: no lock with that token").
func TestErrorMessages(t *testing.T) {
	t.Parallel()
	in, _ := memNode(t, withConfig(func(c *config.Config) { c.Lease.MinMS, c.Lease.MaxMS = 100, 600_000 }))
	ctx := ctxT(t)
	first, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "k", LeaseMs: 5000, Owner: "a"})
	require.NoError(t, err)
	for _, req := range []*ticketv1.AcquireRequest{
		{Key: "sem", LeaseMs: 5000, Owner: "a", Limit: 1},
		{Key: "r", LeaseMs: 5000, Owner: "a", Mode: ticketv1.Mode_MODE_SHARED},
		{Key: "r", LeaseMs: 5000, Owner: "b", Mode: ticketv1.Mode_MODE_SHARED},
	} {
		_, err := in.Lock.Acquire(ctx, req)
		require.NoError(t, err)
	}

	tests := []struct {
		name string
		call func() error
		code connect.Code
		want string
	}{
		{"lease_out_of_range", func() error {
			_, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "x", LeaseMs: 50})
			return err
		}, connect.CodeInvalidArgument, "lease 50ms is outside the allowed range 100ms to 10m0s"},
		{"held", func() error {
			_, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "k", LeaseMs: 5000, Owner: "b"})
			return err
		}, connect.CodeAlreadyExists, `key "k" is held by another owner`},
		{"semaphore_full", func() error {
			_, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "sem", LeaseMs: 5000, Owner: "b", Limit: 1})
			return err
		}, connect.CodeAlreadyExists, `key "sem" is held by another owner: a semaphore with all 1 slots taken`},
		{"held_shared", func() error {
			_, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "r", LeaseMs: 5000, Owner: "w"})
			return err
		}, connect.CodeAlreadyExists, `key "r" is held by another owner: shared by 2 readers`},
		{"release_wrong_token", func() error {
			_, err := in.Lock.Release(ctx, &ticketv1.ReleaseRequest{Key: "k", Token: first.GetToken() + 7})
			return err
		}, connect.CodeNotFound, `no lock on "k" with token 8: lease expired or released`},
		{"renew_wrong_token", func() error {
			_, err := in.Lock.Renew(ctx, &ticketv1.RenewRequest{Key: "k", Token: first.GetToken() + 7})
			return err
		}, connect.CodeNotFound, `no lock on "k" with token 8: lease expired or released`},
		{"page_size_negative", func() error {
			_, err := in.Lock.ListLocks(ctx, &ticketv1.ListLocksRequest{PageSize: -1})
			return err
		}, connect.CodeInvalidArgument, "page_size -1 is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			requireCode(t, tt.code, err)
			var ce *connect.Error
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tt.want, ce.Message())
		})
	}
}
