package nemesis_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/faults/nemesis"
)

func cfg() nemesis.Config {
	return nemesis.Config{Nodes: 3, Length: 2 * time.Minute, ElectionTimeout: 500 * time.Millisecond, Lease: 2 * time.Second}
}

func TestGenerateIsReplayable(t *testing.T) {
	t.Parallel()
	a, b := nemesis.Generate(7, cfg()), nemesis.Generate(7, cfg())
	require.Equal(t, a, b)
	require.Equal(t, a.String(), b.String())
	require.NotEqual(t, a.Faults, nemesis.Generate(8, cfg()).Faults)
}

func TestGenerateShape(t *testing.T) {
	t.Parallel()
	c := cfg()
	for seed := int64(1); seed <= 50; seed++ {
		s := nemesis.Generate(seed, c)
		require.NotEmpty(t, s.Faults)
		var end time.Duration
		seen := map[nemesis.Kind]bool{}
		for i, f := range s.Faults {
			require.GreaterOrEqual(t, f.At, end+time.Second, "seed %d fault %d overlaps or follows too closely", seed, i)
			end = f.At + f.Duration
			require.LessOrEqual(t, end, c.Length)
			seen[f.Kind] = true
			switch f.Kind {
			case nemesis.PauseNode, nemesis.PauseLeader:
				require.Greater(t, f.Duration, 2*c.ElectionTimeout-1)
			case nemesis.PauseLeaderLease:
				require.Greater(t, f.Duration, c.Lease)
			case nemesis.TransferLeader, nemesis.RestartAll:
				require.Zero(t, f.Duration)
			}
		}
		// The first cycle holds every kind once.
		if len(s.Faults) >= len(nemesis.Kinds) {
			first := map[nemesis.Kind]bool{}
			for _, f := range s.Faults[:len(nemesis.Kinds)] {
				first[f.Kind] = true
			}
			require.Len(t, first, len(nemesis.Kinds), "seed %d", seed)
		}
	}
}

func TestGenerateRestrictsKinds(t *testing.T) {
	t.Parallel()
	c := cfg()
	c.Kinds = []nemesis.Kind{nemesis.KillNode}
	for _, f := range nemesis.Generate(1, c).Faults {
		require.Equal(t, nemesis.KillNode, f.Kind)
	}
}

// fakeTarget records what the Executor asks of it; node 1 leads.
type fakeTarget struct {
	mu     sync.Mutex
	n      int
	leader int
	calls  []string
}

func (f *fakeTarget) log(format string, args ...any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
	return nil
}

func (f *fakeTarget) Size() int                                   { return f.n }
func (f *fakeTarget) Leader(context.Context) (int, error)         { return f.leader, nil }
func (f *fakeTarget) Kill(i int) error                            { return f.log("kill %d", i) }
func (f *fakeTarget) Start(i int) error                           { return f.log("start %d", i) }
func (f *fakeTarget) Pause(i int) error                           { return f.log("pause %d", i) }
func (f *fakeTarget) Resume(i int) error                          { return f.log("resume %d", i) }
func (f *fakeTarget) Cut(links [][2]int) error                    { return f.log("cut %v", links) }
func (f *fakeTarget) RemoveMember(_ context.Context, i int) error { return f.log("remove %d", i) }
func (f *fakeTarget) AddMember(_ context.Context, i int) error    { return f.log("add %d", i) }
func (f *fakeTarget) TransferLeader(_ context.Context, from, to int) error {
	return f.log("transfer %d->%d", from, to)
}

func (f *fakeTarget) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func TestExecutorInjectsAndHeals(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	cases := []struct {
		name  string
		fault nemesis.Fault
		want  []string
	}{
		{"kill_node", nemesis.Fault{Kind: nemesis.KillNode, Duration: ms, Pick: 2}, []string{"kill 2", "start 2"}},
		{"kill_leader", nemesis.Fault{Kind: nemesis.KillLeader, Duration: ms}, []string{"kill 1", "start 1"}},
		{"pause_node", nemesis.Fault{Kind: nemesis.PauseNode, Duration: ms, Pick: 3}, []string{"pause 0", "resume 0"}},
		{"pause_leader_lease", nemesis.Fault{Kind: nemesis.PauseLeaderLease, Duration: ms}, []string{"pause 1", "resume 1"}},
		{"isolate_leader", nemesis.Fault{Kind: nemesis.IsolateLeader, Duration: ms}, []string{"cut [[1 0] [0 1] [1 2] [2 1]]", "cut []"}},
		{"one_way_from_leader", nemesis.Fault{Kind: nemesis.OneWayFromLeader, Duration: ms}, []string{"cut [[1 0] [1 2]]", "cut []"}},
		{"one_way_to_leader", nemesis.Fault{Kind: nemesis.OneWayToLeader, Duration: ms}, []string{"cut [[0 1] [2 1]]", "cut []"}},
		{"transfer_leader", nemesis.Fault{Kind: nemesis.TransferLeader, Pick: 1}, []string{"transfer 1->2"}},
		{"remove_readd", nemesis.Fault{Kind: nemesis.RemoveReAdd, Duration: ms, Pick: 0}, []string{"remove 0", "add 0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ft := &fakeTarget{n: 3, leader: 1}
			ex := nemesis.NewExecutor(ft, func() int64 { return 0 })
			ex.Run(context.Background(), nemesis.Schedule{Faults: []nemesis.Fault{tc.fault}})
			got := ft.Calls()
			for i := range got {
				got[i] = normalizeCut(got[i])
			}
			require.Equal(t, tc.want, got)
			ev := ex.Events()
			require.Len(t, ev, 1)
			require.Empty(t, ev[0].Err)
		})
	}
}

func normalizeCut(s string) string {
	if s == "cut []" || s == "cut [[]]" {
		return "cut []"
	}
	return s
}

func TestExecutorPartitionSplitsMinority(t *testing.T) {
	t.Parallel()
	for _, n := range []int{3, 5} {
		ft := &fakeTarget{n: n}
		ex := nemesis.NewExecutor(ft, func() int64 { return 0 })
		ex.Run(context.Background(), nemesis.Schedule{Faults: []nemesis.Fault{{Kind: nemesis.PartitionHalves, Duration: time.Millisecond, Pick: 5}}})
		ev := ex.Events()
		require.Len(t, ev, 1)
		minority := ev[0].Nodes
		require.Len(t, minority, (n-1)/2)
		// Every cross link is cut in both directions; no link inside a side is.
		want := 2 * len(minority) * (n - len(minority))
		calls := ft.Calls()
		require.Len(t, calls, 2)
		require.Equal(t, want, countLinks(calls[0]), calls[0])
	}
}

func countLinks(s string) int {
	c := 0
	for _, r := range s {
		if r == '[' {
			c++
		}
	}
	return c - 1
}

func TestExecutorRestartAll(t *testing.T) {
	t.Parallel()
	ft := &fakeTarget{n: 3}
	ex := nemesis.NewExecutor(ft, func() int64 { return 0 })
	ex.Run(context.Background(), nemesis.Schedule{Faults: []nemesis.Fault{{Kind: nemesis.RestartAll}}})
	calls := ft.Calls()
	require.Len(t, calls, 6)
	kills, starts := calls[:3], calls[3:]
	slices.Sort(kills)
	require.Equal(t, []string{"kill 0", "kill 1", "kill 2"}, kills)
	require.Equal(t, []string{"start 0", "start 1", "start 2"}, starts)
}

// TestHealAllAfterCancel: a run cancelled in the middle of a fault leaves it
// to HealAll, which undoes it.
func TestHealAllAfterCancel(t *testing.T) {
	t.Parallel()
	ft := &fakeTarget{n: 3, leader: 2}
	ex := nemesis.NewExecutor(ft, func() int64 { return 0 })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ex.Run(ctx, nemesis.Schedule{Faults: []nemesis.Fault{{Kind: nemesis.PauseLeader, Duration: time.Hour}}})
	}()
	require.Eventually(t, func() bool { return len(ft.Calls()) == 1 }, 10*time.Second, time.Millisecond)
	cancel()
	<-done
	require.NoError(t, ex.HealAll(context.Background()))
	require.Equal(t, []string{"pause 2", "resume 2"}, ft.Calls())
	require.Contains(t, ex.Events()[0].Err, "interrupted")
}
