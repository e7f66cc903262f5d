package main

import "testing"

// The API sends remaining_ms = -1 for a stale read served by a follower (it
// keeps no deadlines); ticketctl must not show that as an expired lease.
func TestRemainingOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		ms   int64
		want string
	}{
		{"unknown_on_stale_read", -1, "unknown (stale read)"},
		{"zero", 0, "0s"},
		{"milliseconds", 1500, "1.5s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := remainingOf(tc.ms); got != tc.want {
				t.Fatalf("remainingOf(%d) = %q, want %q", tc.ms, got, tc.want)
			}
		})
	}
}
