package lessor_test

import (
	"fmt"
	"testing"

	"github.com/ticketd/ticketd/core"
)

// BenchmarkPromote measures a promotion (Demote, then Promote in a new
// term) of a lessor tracking 10k, 100k and 1M locks, all held in the table
// and tracked from their grants' apply, as on a follower that wins an
// election. It should not grow with the table (docs/design.md#leases).
func BenchmarkPromote(b *testing.B) {
	for _, locks := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("locks=%d", locks), func(b *testing.B) {
			sm := core.NewStateMachine()
			l := newBenchLessor(b)
			b.Cleanup(func() { _ = l.Close() })
			for i := range locks {
				index := uint64(i + 1)
				res, err := sm.Apply(index, core.Grant(fmt.Sprintf("k%07d", i), 600_000, "o"))
				if err != nil {
					b.Fatal(err)
				}
				l.Track(fmt.Sprintf("k%07d", i), res.Token, res.LeaseMS, index)
			}
			b.ResetTimer()
			for term := uint64(1); b.Loop(); term++ {
				l.Demote()
				l.Promote(sm, term)
			}
		})
	}
}
