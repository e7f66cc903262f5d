package main

import (
	"strings"
	"testing"
)

// TestStatusRow: "status --all" prints "-" and the error for an unreachable
// node (not zeros), and "replaying, N of M" for a node replaying its log.
func TestStatusRow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   statusJSON
		want []string
		not  []string
	}{
		{"unreachable", statusJSON{Endpoint: "127.0.0.1:7003", Error: "unavailable: connection refused"},
			[]string{"127.0.0.1:7003\t-\t-\t-\t-\t-\t-\t-\tunavailable: connection refused"}, []string{"\t0\t"}},
		{"replaying", statusJSON{Endpoint: "e", NodeID: "n2", LeaderID: "n1", Term: 3, CommitIndex: 900, AppliedIndex: 120,
			Replaying: true, ReplayTargetIndex: 870}, []string{"replaying, 120 of 870"}, nil},
		{"healthy", statusJSON{Endpoint: "e", NodeID: "n1", LeaderID: "n1", Term: 3, CommitIndex: 9, AppliedIndex: 9},
			[]string{"e\tn1\tn1\t3\t9\t9\t0\t0\t\n"}, []string{"replaying"}},
		{"no_leader", statusJSON{Endpoint: "e", NodeID: "n1"}, []string{"\tnone\t"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := statusRow(tc.in)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("row %q lacks %q", got, w)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(got, w) {
					t.Errorf("row %q has %q", got, w)
				}
			}
		})
	}
}

// TestWriteStatusCommandVersion: "status" says which command versions the
// node applies (docs/operations.md#upgrades), and says nothing of them for
// a node of a release older than the field rather than "up to 0".
func TestWriteStatusCommandVersion(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	writeStatus(&b, statusJSON{NodeID: "n1", LeaderID: "n1", Backend: "hashicorp", MaxCommandVersion: 4})
	if !strings.Contains(b.String(), "applies:       command versions up to 4\n") {
		t.Errorf("status %q does not say the node applies command versions up to 4", b.String())
	}
	b.Reset()
	writeStatus(&b, statusJSON{NodeID: "n1", LeaderID: "n1", Backend: "hashicorp"})
	if strings.Contains(b.String(), "applies:") {
		t.Errorf("status %q names a command version the node did not give", b.String())
	}
}
