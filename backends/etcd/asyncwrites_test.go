package etcd

import (
	"slices"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
)

func entryRange(from, to, term uint64) []*pb.Entry {
	var out []*pb.Entry
	for i := from; i <= to; i++ {
		out = append(out, &pb.Entry{Index: new(i), Term: new(term)})
	}
	return out
}

// TestSpliceEntries: the append thread joins the entries of queued
// MsgStorageAppends as raft's log would hold them, a later message's
// entries replacing the earlier ones' from their first index, and never
// writes into raft's slices.
func TestSpliceEntries(t *testing.T) {
	type span struct{ index, term uint64 }
	got := func(ents []*pb.Entry) []span {
		var out []span
		for _, e := range ents {
			out = append(out, span{e.GetIndex(), e.GetTerm()})
		}
		return out
	}
	tests := []struct {
		name      string
		acc, next []*pb.Entry
		want      []span
	}{
		{"empty_next", entryRange(1, 2, 1), nil, []span{{1, 1}, {2, 1}}},
		{"empty_acc", nil, entryRange(3, 4, 1), []span{{3, 1}, {4, 1}}},
		{"extends", entryRange(1, 2, 1), entryRange(3, 3, 1), []span{{1, 1}, {2, 1}, {3, 1}}},
		{"overwrites_suffix", entryRange(1, 3, 1), entryRange(2, 2, 2), []span{{1, 1}, {2, 2}}},
		{"overwrites_all", entryRange(5, 6, 1), entryRange(4, 4, 2), []span{{4, 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var acc []*pb.Entry
			if len(tt.acc) > 0 {
				acc = make([]*pb.Entry, len(tt.acc), len(tt.acc)+4) // room that must not be written
				copy(acc, tt.acc)
			}
			before := got(acc)
			out := spliceEntries(acc, tt.next)
			if g := got(out); !slices.Equal(g, tt.want) {
				t.Fatalf("spliceEntries = %v, want %v", g, tt.want)
			}
			if spare := acc[len(acc):cap(acc)]; len(spare) > 0 && spare[0] != nil {
				t.Fatal("spliceEntries wrote into the spare capacity of its input")
			}
			if a := got(acc); !slices.Equal(a, before) {
				t.Fatalf("spliceEntries changed its input: %v, was %v", a, before)
			}
		})
	}
}
