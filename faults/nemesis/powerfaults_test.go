package nemesis_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/faults/nemesis"
)

// fakePowerTarget is a fakeTarget with power cuts (nemesis.PowerTarget).
type fakePowerTarget struct{ fakeTarget }

func (f *fakePowerTarget) CutPower() error { return f.log("cut power") }

func TestExecutorPowerCut(t *testing.T) {
	t.Parallel()
	ft := &fakePowerTarget{fakeTarget{n: 3, leader: 1}}
	ex := nemesis.NewExecutor(ft, func() int64 { return 0 })
	ex.Run(context.Background(), nemesis.Schedule{Faults: []nemesis.Fault{{Kind: nemesis.PowerCut}}})
	calls := ft.Calls()
	require.Len(t, calls, 7)
	// Every node is killed (concurrently, in any order) before the power
	// is cut, and started only after.
	require.ElementsMatch(t, []string{"kill 0", "kill 1", "kill 2"}, calls[:3])
	require.Equal(t, []string{"cut power", "start 0", "start 1", "start 2"}, calls[3:])
	require.Len(t, ex.Events(), 1)
	require.Empty(t, ex.Events()[0].Err)
	require.Equal(t, []int{0, 1, 2}, ex.Events()[0].Nodes)

	// A target without power cuts skips the fault and says why.
	plain := &fakeTarget{n: 3, leader: 1}
	ex = nemesis.NewExecutor(plain, func() int64 { return 0 })
	ex.Run(context.Background(), nemesis.Schedule{Faults: []nemesis.Fault{{Kind: nemesis.PowerCut}}})
	require.Empty(t, plain.Calls())
	require.Contains(t, ex.Events()[0].Err, nemesis.ErrNotPower.Error())
}

func TestPowerSchedule(t *testing.T) {
	t.Parallel()
	require.Equal(t, nemesis.PowerSchedule(5, 6*time.Second), nemesis.PowerSchedule(5, 6*time.Second))
	for seed := int64(1); seed <= 50; seed++ {
		for _, length := range []time.Duration{3 * time.Second, 6 * time.Second, 10 * time.Second} {
			s := nemesis.PowerSchedule(seed, length)
			want := max(1, int(length/(4*time.Second)))
			require.Len(t, s.Faults, want, "seed %d length %v", seed, length)
			slot := length / time.Duration(want)
			for k, f := range s.Faults {
				require.Equal(t, nemesis.PowerCut, f.Kind)
				require.Zero(t, f.Duration)
				lo := time.Duration(k)*slot + slot/4
				require.GreaterOrEqual(t, f.At, lo, "seed %d", seed)
				require.Less(t, f.At, lo+slot/2, "seed %d", seed)
			}
		}
	}
	require.NotEqual(t, nemesis.PowerSchedule(1, 6*time.Second).Faults, nemesis.PowerSchedule(2, 6*time.Second).Faults)
}
