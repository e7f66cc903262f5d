package core_test

import (
	"fmt"
	"testing"

	"github.com/ticketd/ticketd/core"
)

// BenchmarkApplyShared measures one Apply (a Grant or a Release,
// alternating) of a shared holder on a key that already has `holders`
// shared holders, in a table of 10k exclusive locks, beside the same cycle
// of an exclusive lock on a free key, to show what a shared acquire costs
// beside an exclusive one. A grant on a shared key reads all its holders (the same-owner
// retry rule), so its cost grows with their number.
func BenchmarkApplyShared(b *testing.B) {
	for _, tc := range []struct {
		name    string
		mode    core.Mode
		holders int
	}{
		{"exclusive", core.ModeExclusive, 0},
		{"shared_beside_0", core.ModeShared, 0},
		{"shared_beside_16", core.ModeShared, 16},
		{"shared_beside_256", core.ModeShared, 256},
	} {
		b.Run(tc.name, func(b *testing.B) {
			sm := core.NewStateMachine()
			index := uint64(0)
			apply := func(c core.Command) core.Result {
				index++
				res, err := sm.Apply(index, c)
				if err != nil {
					b.Fatal(err)
				}
				return res
			}
			for i := range benchSizes[0].locks {
				apply(core.Grant(fmt.Sprintf("k%07d", i), 10_000, "owner"))
			}
			const key = "k0005000/shared"
			for i := range tc.holders {
				apply(core.Grant(key, 10_000, fmt.Sprintf("reader-%d", i)).WithMode(core.ModeShared))
			}
			grant := core.Grant(key, 10_000, "bench").WithMode(tc.mode)
			var token uint64
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if i%2 == 0 {
					res := apply(grant)
					if res.Outcome != core.OutcomeGranted || !res.Created {
						b.Fatalf("grant: %+v", res)
					}
					token = res.Token
					continue
				}
				if res := apply(core.Release(key, token)); res.Outcome != core.OutcomeReleased {
					b.Fatalf("release: %+v", res)
				}
			}
		})
	}
}
