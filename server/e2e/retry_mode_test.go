package e2e_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/sdk"
)

// TestRetryInAnotherModeSDK: through the Go SDK against real clusters, an
// owner id that holds a key shared is refused (FailedPrecondition, final:
// not retried until ctx ends, not ambiguous, not ErrLocked) when the same id
// asks for the key exclusively, with Acquire or Lock; the exclusive request
// is never answered with the shared token while another reader joins. The
// same request again (ticketctl --owner's retry) is still the same grant.
func TestRetryInAnotherModeSDK(t *testing.T) {
	matrix(t, func(t *testing.T, backend string) {
		c := start(t, backend)
		cl := sdkClient(t, c)
		ctx := ctxT(t)
		g, err := cl.Acquire(ctx, "m/2", 30*time.Second, sdk.WithOwner("O"), sdk.WithShared())
		require.NoError(t, err)
		again, err := cl.Acquire(ctx, "m/2", 30*time.Second, sdk.WithOwner("O"), sdk.WithShared())
		require.NoError(t, err)
		assert.Equal(t, g.Token, again.Token, "the same request is a retry")

		refused := func(err error) {
			t.Helper()
			require.Error(t, err)
			assert.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(err), "%v", err)
			assert.ErrorContains(t, err, `holds key "m/2" as a shared lock`)
			assert.False(t, errors.Is(err, sdk.ErrAmbiguous) || errors.Is(err, sdk.ErrLocked) ||
				errors.Is(err, context.DeadlineExceeded), "a final refusal: %v", err)
		}
		_, err = cl.Acquire(ctx, "m/2", 30*time.Second, sdk.WithOwner("O"), sdk.WithWait())
		refused(err)
		_, err = cl.Lock(ctx, "m/2", 30*time.Second, sdk.WithOwner("O"))
		refused(err)

		r, err := cl.RLock(ctx, "m/2")
		require.NoError(t, err)
		assert.NotEqual(t, g.Token, r.Token())
		info, err := cl.GetLock(ctx, "m/2")
		require.NoError(t, err)
		assert.Equal(t, sdk.ModeShared, info.Mode)
		require.Len(t, info.Holders, 2)
		require.NoError(t, r.Unlock(ctx))
	})
}
