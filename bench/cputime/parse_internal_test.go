package cputime

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseStat(t *testing.T) {
	// A command name with spaces and ")" in it; utime 150 and stime 25 ticks.
	line := "4242 (we(ird) )name) S 1 4242 4242 0 -1 4194560 100 0 0 0 150 25 0 0 20 0 3 0 12345 1000 10 18446744073709551615\n"
	got, err := parseStat(line)
	require.NoError(t, err)
	require.Equal(t, 1750*time.Millisecond, got)

	for _, bad := range []string{"", "4242 no-paren S 1", "4242 (x) S 1 2 3", "4242 (x) S 1 4242 4242 0 -1 4194560 100 0 0 0 abc 25 0"} {
		_, err := parseStat(bad)
		require.ErrorIs(t, err, ErrProc, bad)
	}
}
