package nemesis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/faults/nemesis"
)

// fakeNetTarget is a fakeTarget with a network (nemesis.NetTarget).
type fakeNetTarget struct{ fakeTarget }

func (f *fakeNetTarget) LinkDown(i int) error                { return f.log("down %d", i) }
func (f *fakeNetTarget) LinkUp(i int) error                  { return f.log("up %d", i) }
func (f *fakeNetTarget) Move(_ context.Context, i int) error { return f.log("move %d", i) }

func TestExecutorNetFaults(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	cases := []struct {
		name  string
		fault nemesis.Fault
		want  []string
	}{
		{"link_down", nemesis.Fault{Kind: nemesis.LinkDown, Duration: ms, Pick: 2}, []string{"down 2", "up 2"}},
		{"link_down_leader", nemesis.Fault{Kind: nemesis.LinkDownLeader, Duration: ms}, []string{"down 1", "up 1"}},
		{"move_node", nemesis.Fault{Kind: nemesis.MoveNode, Pick: 3}, []string{"move 0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ft := &fakeNetTarget{fakeTarget{n: 3, leader: 1}}
			ex := nemesis.NewExecutor(ft, func() int64 { return 0 })
			ex.Run(context.Background(), nemesis.Schedule{Faults: []nemesis.Fault{tc.fault}})
			require.Equal(t, tc.want, ft.Calls())
			require.Len(t, ex.Events(), 1)
			require.Empty(t, ex.Events()[0].Err)
		})
	}
}

// TestFlapLinkEndsUp: a flapping link toggles while the fault is held and
// is left up when it is healed.
func TestFlapLinkEndsUp(t *testing.T) {
	t.Parallel()
	ft := &fakeNetTarget{fakeTarget{n: 3, leader: 1}}
	ex := nemesis.NewExecutor(ft, func() int64 { return 0 })
	ex.Run(context.Background(), nemesis.Schedule{Faults: []nemesis.Fault{{Kind: nemesis.FlapLink, Duration: time.Second, Pick: 1}}})
	calls := ft.Calls()
	require.GreaterOrEqual(t, len(calls), 3, calls)
	require.Equal(t, "down 1", calls[0])
	require.Equal(t, "up 1", calls[len(calls)-1])
	require.Empty(t, ex.Events()[0].Err)
}

// TestHealAllLinks: HealAll sets a link left down by a cancelled run up.
func TestHealAllLinks(t *testing.T) {
	t.Parallel()
	ft := &fakeNetTarget{fakeTarget{n: 3, leader: 1}}
	ex := nemesis.NewExecutor(ft, func() int64 { return 0 })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ex.Run(ctx, nemesis.Schedule{Faults: []nemesis.Fault{{Kind: nemesis.LinkDownLeader, Duration: time.Hour}}})
	}()
	require.Eventually(t, func() bool { return len(ft.Calls()) == 1 }, 10*time.Second, time.Millisecond)
	cancel()
	<-done
	require.NoError(t, ex.HealAll(context.Background()))
	require.Equal(t, []string{"down 1", "up 1"}, ft.Calls())
}

// TestNetFaultsNeedNetTarget: over a Target without a network, a network
// fault is skipped with ErrNotNetwork and touches nothing.
func TestNetFaultsNeedNetTarget(t *testing.T) {
	t.Parallel()
	ft := &fakeTarget{n: 3, leader: 1}
	ex := nemesis.NewExecutor(ft, func() int64 { return 0 })
	ex.Run(context.Background(), nemesis.Schedule{Faults: []nemesis.Fault{{Kind: nemesis.LinkDown, Duration: time.Millisecond}}})
	require.Empty(t, ft.Calls())
	require.Contains(t, ex.Events()[0].Err, nemesis.ErrNotNetwork.Error())
}

// failedMoveTarget is a fakeNetTarget whose Move fails after the restart,
// as a move does when no leader answers its AddMember.
type failedMoveTarget struct{ fakeNetTarget }

func (f *failedMoveTarget) Move(_ context.Context, i int) error {
	_ = f.log("move %d", i)
	return errors.New("hosts: move: no leader")
}

// TestHealAllCompletesFailedMove: a node whose move failed (restarted on a
// new address that membership never learned) is added at its current
// address by HealAll; without it the node stays cut off for good (a fault
// run once had no agreed leader even after every node was restarted).
func TestHealAllCompletesFailedMove(t *testing.T) {
	t.Parallel()
	ft := &failedMoveTarget{fakeNetTarget{fakeTarget{n: 3, leader: 1}}}
	ex := nemesis.NewExecutor(ft, func() int64 { return 0 })
	ex.Run(context.Background(), nemesis.Schedule{Faults: []nemesis.Fault{{Kind: nemesis.MoveNode, Pick: 3}}})
	require.Contains(t, ex.Events()[0].Err, "no leader")
	require.NoError(t, ex.HealAll(context.Background()))
	require.Equal(t, []string{"move 0", "add 0"}, ft.Calls())
}
