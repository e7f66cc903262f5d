package backends_test

import (
	"testing"

	"github.com/ticketd/ticketd/backends"
)

func TestSnapshotDue(t *testing.T) {
	tests := []struct {
		name                                 string
		entries, logBytes, snapBytes, thresh uint64
		want                                 bool
	}{
		{"below_threshold", 10, 1 << 20, 100, 16, false},
		{"small_table_every_threshold", 16, 400, 100, 16, true},
		{"big_table_waits_for_log", 10_000, 1 << 20, 37 << 20, 8192, false},
		{"big_table_log_just_below_half_of_it", 250_000, 37<<19 - 1, 37 << 20, 8192, false},
		{"big_table_log_half_as_big_as_it", 250_000, 37 << 19, 37 << 20, 8192, true},
		{"big_table_log_as_big_as_it", 500_000, 37 << 20, 37 << 20, 8192, true},
		{"no_snapshot_yet", 16, 0, 0, 16, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := backends.SnapshotDue(tt.entries, tt.logBytes, tt.snapBytes, tt.thresh); got != tt.want {
				t.Fatalf("SnapshotDue(%d entries, %d log bytes, %d snapshot bytes, threshold %d) = %v, want %v",
					tt.entries, tt.logBytes, tt.snapBytes, tt.thresh, got, tt.want)
			}
		})
	}
}
