package hashicorp

import (
	"testing"

	"github.com/hashicorp/raft"
)

// BenchmarkStoreLogs measures one durable StoreLogs call (SyncWrites) of a
// batch of entries of 64 bytes, the size of a ticketd grant.
func BenchmarkStoreLogs(b *testing.B) {
	for _, batch := range []int{1, 64} {
		b.Run(map[int]string{1: "batch=1", 64: "batch=64"}[batch], func(b *testing.B) {
			s := openStore(b, b.TempDir())
			defer closeStore(b, s)
			data := make([]byte, 64)
			logs := make([]*raft.Log, batch)
			next := uint64(1)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for j := range logs {
					logs[j] = &raft.Log{Index: next, Term: 1, Data: data}
					next++
				}
				if err := s.StoreLogs(logs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
