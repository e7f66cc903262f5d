package workload

import (
	"context"
	"errors"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
)

func TestRetrySetup(t *testing.T) {
	unavailable := connect.NewError(connect.CodeUnavailable, errors.New("not leader"))

	calls := 0
	err := retrySetup(context.Background(), func() error {
		if calls++; calls < 3 {
			return unavailable
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 3, calls, "retried through the unavailable answers")

	calls = 0
	denied := connect.NewError(connect.CodePermissionDenied, errors.New("no"))
	err = retrySetup(context.Background(), func() error { calls++; return denied })
	require.ErrorIs(t, err, denied)
	require.Equal(t, 1, calls, "another error is not retried")

	ctx, cancel := context.WithCancel(context.Background())
	calls = 0
	err = retrySetup(ctx, func() error { calls++; cancel(); return unavailable })
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, unavailable)
	require.Equal(t, 1, calls, "no retry once ctx ended")
}
