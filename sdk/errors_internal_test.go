package sdk

import (
	"context"
	"errors"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
)

// TestErrorText: an error a server answered reads `op "key": code: message`,
// the code once and no sentinel text repeated (docs/api.md#errors), while errors.Is
// still finds the sentinel and errors.As the *connect.Error.
func TestErrorText(t *testing.T) {
	t.Parallel()
	srv := connect.NewError(connect.CodeInvalidArgument, errors.New("lease 50ms is outside the allowed range 100ms to 10m0s"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name     string
		err      error
		want     string
		sentinel error
	}{
		{"answered", wrapErr("acquire", "k", srv),
			`acquire "k": invalid_argument: lease 50ms is outside the allowed range 100ms to 10m0s`, ErrInvalidArgument},
		{"gave_up", giveUpErr(ctx, "acquire", "k", connect.NewError(connect.CodeUnavailable, errors.New("no leader"))),
			`acquire "k": context canceled; last failure: unavailable: no leader`, ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.EqualError(t, tt.err, tt.want)
			assert.ErrorIs(t, tt.err, tt.sentinel)
			var ce *connect.Error
			assert.ErrorAs(t, tt.err, &ce)
		})
	}
	assert.ErrorIs(t, tests[1].err, context.Canceled)
}
