package e2e_test

import (
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
)

// TestBadInput sends invalid requests to the leader and to a follower: each
// gets its documented code and changes nothing (Status before and after).
func TestBadInput(t *testing.T) {
	matrix(t, func(t *testing.T, backend string) {
		c := start(t, backend)
		ctx := ctxT(t)
		l := c.Leader(t)
		held, err := c.Lock(l).Acquire(ctx, &ticketv1.AcquireRequest{Key: "held", LeaseMs: 60_000})
		require.NoError(t, err)
		tok := held.GetToken()
		settle(t, c)
		long := strings.Repeat("k", 1025)

		for _, i := range []int{l, follower(t, c)} {
			lock := c.Lock(i)
			tests := []struct {
				name string
				call func() error
				code connect.Code
			}{
				{"empty_key", func() error {
					_, err := lock.Acquire(ctx, &ticketv1.AcquireRequest{LeaseMs: 1000})
					return err
				}, connect.CodeInvalidArgument},
				{"oversize_key", func() error {
					_, err := lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: long, LeaseMs: 1000})
					return err
				}, connect.CodeInvalidArgument},
				{"lease_zero", func() error {
					_, err := lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "k", LeaseMs: 0})
					return err
				}, connect.CodeInvalidArgument},
				{"lease_negative", func() error {
					_, err := lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "k", LeaseMs: -1000})
					return err
				}, connect.CodeInvalidArgument},
				{"lease_above_max", func() error {
					_, err := lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "k", LeaseMs: 120_001})
					return err
				}, connect.CodeInvalidArgument},
				{"release_token_zero", func() error {
					_, err := lock.Release(ctx, &ticketv1.ReleaseRequest{Key: "held"})
					return err
				}, connect.CodeInvalidArgument},
				{"renew_token_zero", func() error {
					_, err := lock.Renew(ctx, &ticketv1.RenewRequest{Key: "held"})
					return err
				}, connect.CodeInvalidArgument},
				{"release_wrong_token", func() error {
					_, err := lock.Release(ctx, &ticketv1.ReleaseRequest{Key: "held", Token: tok + 100})
					return err
				}, connect.CodeNotFound},
				{"renew_wrong_token", func() error {
					_, err := lock.Renew(ctx, &ticketv1.RenewRequest{Key: "held", Token: tok + 100})
					return err
				}, connect.CodeNotFound},
				{"release_no_such_key", func() error {
					_, err := lock.Release(ctx, &ticketv1.ReleaseRequest{Key: "nope", Token: tok})
					return err
				}, connect.CodeNotFound},
				{"acquire_held", func() error {
					_, err := lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "held", LeaseMs: 1000})
					return err
				}, connect.CodeAlreadyExists},
			}
			for _, tc := range tests {
				t.Run(c.Node(i).ID+"/"+tc.name, func(t *testing.T) {
					before := status(t, c, l)
					requireCode(t, tc.code, tc.call())
					requireUnchanged(t, before, status(t, c, l))
				})
			}
			t.Run(c.Node(i).ID+"/malformed_json", func(t *testing.T) {
				before := status(t, c, l)
				for _, body := range []string{`{"key":`, `{"key":"k","leaseMs":"ten"}`, `"k"`, `{"key":1,"leaseMs":"5000"}`} {
					code, got := postJSON(t, c.Node(i).APIAddr, "/ticket.v1.LockService/Acquire", body)
					assert.Equal(t, http.StatusBadRequest, code, body)
					assert.Equal(t, "invalid_argument", got["code"], body)
				}
				requireUnchanged(t, before, status(t, c, l))
			})
		}
		got, err := c.Lock(l).GetLock(ctx, &ticketv1.GetLockRequest{Key: "held"})
		require.NoError(t, err)
		assert.Equal(t, tok, got.GetToken(), "the held lock survived all of it")
	})
}
