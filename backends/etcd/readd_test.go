package etcd_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/backendtest"
	"github.com/ticketd/ticketd/backends/etcd"
	"github.com/ticketd/ticketd/core"
)

// TestRemoveReaddThenLoseOne replays, on real nodes, a membership sequence
// a fault run found: a follower is removed and added back (same id, address
// and data, running throughout), entries are committed, then one other node
// crashes. The two survivors, the re-added one among them, must elect a
// leader and commit: the re-added member is a voter in everyone's
// configuration and its address book entry is back.
func TestRemoveReaddThenLoseOne(t *testing.T) {
	tests := []struct {
		name string
		kill string // which node crashes after the re-add
	}{
		{name: "leader_crashes", kill: "leader"},
		{name: "other_follower_crashes", kill: "other"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			c := backendtest.NewCluster(t, func(cfg backends.Config) (backendtest.Node, error) { return etcd.New(cfg) })
			c.Tune = func(cfg *backends.Config) { cfg.SnapshotThreshold, cfg.TrailingLogs = 8, 2 }
			c.Start(3)
			l := c.WaitLeader()
			fs := c.Followers(l)
			readded, other := fs[0], fs[1]
			require.NoError(t, l.Node().RemoveServer(ctx, readded.ID))
			_, err := l.Node().Propose(ctx, core.Grant("while-removed", 1000, "o"))
			require.NoError(t, err)
			require.NoError(t, l.Node().AddVoter(ctx, readded.Member()))
			for i := range 12 { // past SnapshotThreshold: a compaction after the re-add
				_, err := l.Node().Propose(ctx, core.Grant(fmt.Sprintf("k%d", i), 1000, "o"))
				require.NoError(t, err)
			}
			c.WaitApplied(l.StateMachine().AppliedIndex())

			victim := other
			if tt.kill == "leader" {
				victim = l
			}
			c.Kill(victim)
			var survivors []*backendtest.Peer
			for _, p := range c.Live() {
				survivors = append(survivors, p)
			}
			require.Len(t, survivors, 2)
			nl := c.WaitLeader(survivors...)
			_, err = nl.Node().Propose(ctx, core.Grant("after-crash", 1000, "o"))
			require.NoError(t, err)
			for _, p := range survivors {
				st := p.Node().Status()
				require.Len(t, st.Members, 3, "%s members: %+v", p.ID, st.Members)
				for _, m := range st.Members {
					require.True(t, m.Voter, "%s sees %+v", p.ID, m)
					require.Equal(t, c.Peer(m.ID).Addr, m.RaftAddr, "%s sees %+v", p.ID, m)
				}
			}
		})
	}
}
