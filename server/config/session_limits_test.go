package config_test

import (
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/server/config"
)

// TestMaxLocksPerSession: limits.max_locks_per_session defaults to 1000,
// is set by its flag, may not be negative, and may not exceed
// limits.watch_buffer_events (the error names both keys); 0 turns the cap
// and that check off.
func TestMaxLocksPerSession(t *testing.T) {
	c := config.DefaultConfig()
	assert.Equal(t, 1000, c.Limits.MaxLocksPerSession)
	assert.Contains(t, config.Keys(), "limits.max_locks_per_session")

	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	config.RegisterFlags(fs)
	require.NoError(t, fs.Parse([]string{"--limits-max-locks-per-session=16", "--limits-watch-buffer-events=16"}))
	c, err := config.Load("", []string{}, fs)
	require.NoError(t, err)
	require.NoError(t, c.Validate())
	assert.Equal(t, 16, c.Limits.MaxLocksPerSession)

	tests := []struct {
		name    string
		perSess int
		buffer  int
		ok      bool
	}{
		{name: "equal_to_buffer", perSess: 64, buffer: 64, ok: true},
		{name: "above_buffer", perSess: 65, buffer: 64},
		{name: "no_cap", perSess: 0, buffer: 8, ok: true},
		{name: "negative", perSess: -1, buffer: 64},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := config.DefaultConfig()
			c.Limits.MaxLocksPerSession, c.Limits.WatchBufferEvents = tc.perSess, tc.buffer
			err := c.Validate()
			if tc.ok {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, config.ErrInvalid)
			if tc.perSess > 0 {
				assert.ErrorContains(t, err, "limits.watch_buffer_events")
				assert.ErrorContains(t, err, "limits.max_locks_per_session")
			}
		})
	}
}
