package backendtest

import (
	"testing"
)

// RunSingleNode runs the part of the conformance suite that holds for a
// group of one voter, on a cluster started with one node: the leader halves
// of the cases Run runs on three nodes, calling the same checks.
//
//   - replicate_in_order: results in order, tokens 1, 2, ..., distinct
//     tokens under concurrent proposals, Propose returning only after local
//     apply and OnApply, OnApply in log order;
//   - read_index: ReadIndex sees the write before it; Status;
//   - ready_after_barrier: IsLeader=true once, naming the node, in the term
//     Status reports, after its barrier applied;
//   - confirm_term: ConfirmTerm returns the term led, with writes applied;
//   - submit_order: a Submit commits ahead of a later Submit or Propose;
//   - errors_are_core: bad arguments, ended ctxs and a closed node give only
//     core's errors.
//
// The rest of Run needs what one in-memory node lacks: other voters
// (kill_leader, partition_leader, transfer_leadership,
// membership_under_load, barrier_before_ready's failover, the follower
// halves of the cases above) or a disk (restart_all, snapshot_install,
// recovered_commit_index, damaged_log_refused, missing_watermark_refused,
// file_loss_never_shortens, disk_full_stops, observer's durable appends and
// snapshots). Both real backends run it too, so it states no more than a
// one-member ticketd cluster does; the server's memraft, the in-memory
// stand-in its interaction harness steps, runs it so that the stand-in keeps
// the contract the real backends keep (docs/design.md#the-consensus-contract,
// #where-a-test-belongs).
func RunSingleNode(t *testing.T, open Factory) {
	cases := []struct {
		name string
		fn   func(t *testing.T, c *Cluster, l *Peer)
	}{
		{"replicate_in_order", func(t *testing.T, c *Cluster, l *Peer) {
			proposeInOrder(testContext(t), t, l)
			c.EnsureSame()
			checkLeaderEvents(t, c)
		}},
		{"read_index", func(t *testing.T, c *Cluster, l *Peer) { readOnLeader(testContext(t), t, l, 1) }},
		{"ready_after_barrier", func(t *testing.T, c *Cluster, l *Peer) { readyAfterBarrier(t, l) }},
		{"confirm_term", func(t *testing.T, c *Cluster, l *Peer) { confirmOnLeader(testContext(t), t, l) }},
		{"submit_order", func(t *testing.T, c *Cluster, l *Peer) { submitInOrder(testContext(t), t, l) }},
		{"errors_are_core", func(t *testing.T, c *Cluster, l *Peer) { leaderErrorsAreCore(testContext(t), t, c, l) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCluster(t, open)
			c.Start(1)
			tc.fn(t, c, c.WaitLeader())
		})
	}
}

// readyAfterBarrier checks how the one member l of a fresh group became
// leader: one IsLeader=true event, naming l, in the term Status reports,
// delivered once l had applied its barrier (a fresh group has nothing else
// to apply, so the applied index recorded with the event is not 0; the
// barrier is a core.Noop on hashicorp and memraft, an empty entry that never
// reaches OnApply on etcd), and the first proposal after it applies past
// that index.
func readyAfterBarrier(t *testing.T, l *Peer) {
	t.Helper()
	var ready []LeaderRecord
	for _, r := range l.Leaders().Records() {
		if r.Event.IsLeader {
			ready = append(ready, r)
		}
	}
	if len(ready) != 1 {
		t.Fatalf("%s reported IsLeader=true %d times, want once: %+v", l.ID, len(ready), l.Leaders().Records())
	}
	r := ready[0]
	if r.Event.Leader.ID != l.ID || r.Event.Term != l.Node().Status().Term || r.Event.Term == 0 {
		t.Fatalf("%s: leader event %+v, status term %d", l.ID, r.Event, l.Node().Status().Term)
	}
	if r.AppliedIndex == 0 {
		t.Fatalf("%s reported IsLeader=true before applying its barrier (applied index 0)", l.ID)
	}
	ctx := testContext(t)
	mustGrant(ctx, t, l.Node(), "after-ready")
	if got := l.StateMachine().AppliedIndex(); got <= r.AppliedIndex {
		t.Fatalf("%s: first grant after ready applied at %d, not past %d", l.ID, got, r.AppliedIndex)
	}
}
