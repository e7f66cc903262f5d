package backendtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/core"
)

// RunRecovery runs the disaster-recovery cases against a backend
// (docs/operations.md#quorum-loss---force-new-cluster):
// quorum loss recovered with Config.ForceNewCluster from the one node left,
// and a whole cluster rebuilt from a snapshot with restore (the backend's
// Restore). In both, two of three nodes lose their data; every lock and the
// token counter survive, and the next token is larger than any issued
// before.
func RunRecovery(t *testing.T, open Factory, restore backends.RestoreFunc) {
	t.Run("force_new_cluster", func(t *testing.T) { testForceNewCluster(t, open) })
	t.Run("restore_from_snapshot", func(t *testing.T) { testRestoreFromSnapshot(t, open, restore) })
	t.Run("restore_refuses", func(t *testing.T) { testRestoreRefuses(t, restore) })
}

// fillLocks grants 30 keys on the leader, releasing every third, so that the
// state is spread over a snapshot and the log (threshold 16).
func fillLocks(t *testing.T, c *Cluster) {
	ctx := testContext(t)
	for i := 0; i < 30; i++ {
		key := fmt.Sprintf("k%02d", i)
		res, err := c.Propose(ctx, grant(key)) // on the current leader, retried on a leader change
		if err != nil || res.Outcome != core.OutcomeGranted {
			t.Fatalf("grant %s: %+v, %v", key, res, err)
		}
		if i%3 == 0 {
			if res, err := c.Propose(ctx, core.Release(key, res.Token)); err != nil || res.Outcome != core.OutcomeReleased {
				t.Fatalf("release %s: %+v, %v", key, res, err)
			}
		}
	}
}

// checkSurvived checks p's locks and token counter against was, then grants
// a new key through the cluster and checks that its token is above every
// token issued before.
func checkSurvived(t *testing.T, c *Cluster, p *Peer, was peerState) {
	t.Helper()
	now := stateOf(p)
	if now.lastToken != was.lastToken {
		t.Fatalf("%s: last token %d after recovery, was %d", p.ID, now.lastToken, was.lastToken)
	}
	if !slices.Equal(now.locks, was.locks) {
		t.Fatalf("%s: locks after recovery differ:\n now %+v\n was %+v", p.ID, now.locks, was.locks)
	}
	res, err := c.Propose(testContext(t), core.Grant("after-recovery-"+p.ID, leaseMS, "owner-after-"+p.ID))
	if err != nil || res.Outcome != core.OutcomeGranted {
		t.Fatalf("grant after recovery: %+v, %v", res, err)
	}
	if res.Token <= was.lastToken {
		t.Fatalf("token %d after recovery, want above %d (a token was reissued)", res.Token, was.lastToken)
	}
}

// testForceNewCluster: n2 and n3 lose their data; n1 restarts with
// ForceNewCluster as a one-member cluster, keeps every lock and the token
// counter, takes a new member, and restarts later without the flag (the
// durable watermark accepts the rewritten log).
func testForceNewCluster(t *testing.T, open Factory) {
	c := NewCluster(t, open)
	var force atomic.Bool
	c.Tune = func(cfg *backends.Config) {
		cfg.SnapshotThreshold, cfg.TrailingLogs = 16, 4
		cfg.ForceNewCluster = cfg.ID == "n1" && force.Load()
	}
	ps := c.Start(3)
	fillLocks(t, c)
	c.EnsureSame()
	was := stateOf(ps[0])
	for _, p := range ps {
		c.Kill(p)
	}
	for _, p := range ps[1:] {
		if err := os.RemoveAll(p.DataDir); err != nil {
			t.Fatal(err)
		}
	}

	force.Store(true)
	c.Restart(ps[0])
	force.Store(false)
	if l := c.WaitLeader(ps[0]); l != ps[0] {
		t.Fatalf("leader %s, want n1", l.ID)
	}
	if ms := ps[0].Node().Status().Members; len(ms) != 1 || ms[0].ID != "n1" {
		t.Fatalf("members after force-new-cluster: %+v, want n1 alone", ms)
	}
	checkSurvived(t, c, ps[0], was)

	joiner := c.Join()
	if err := c.OnLeader(testContext(t), func(ctx2 context.Context, n Node) error { return n.AddVoter(ctx2, joiner.Member()) }); err != nil {
		t.Fatalf("add %s: %v", joiner.ID, err)
	}
	c.EnsureSame()
	for _, p := range []*Peer{ps[0], joiner} {
		c.Kill(p)
	}
	for _, p := range []*Peer{ps[0], joiner} {
		c.Restart(p)
	}
	c.WaitLeader(ps[0], joiner)
	c.EnsureSame()
	if got := stateOf(joiner).lastToken; got != was.lastToken+1 {
		t.Fatalf("%s: last token %d after restart, want %d", joiner.ID, got, was.lastToken+1)
	}
}

// testRestoreFromSnapshot: a snapshot of the lock table is taken, every
// node's data is lost, and a new cluster of the same members is restored
// from that one snapshot on each of them.
func testRestoreFromSnapshot(t *testing.T, open Factory, restore backends.RestoreFunc) {
	c := NewCluster(t, open)
	c.Tune = func(cfg *backends.Config) { cfg.SnapshotThreshold, cfg.TrailingLogs = 16, 4 }
	ps := c.Start(3)
	fillLocks(t, c)
	snap := c.EnsureSame()
	was := stateOf(ps[0])
	for _, p := range ps {
		c.Kill(p)
		if err := os.RemoveAll(p.DataDir); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range ps {
		cfg, _, _, _ := c.config(p)
		cfg.StateMachine = nil
		if err := restore(cfg, bytes.NewReader(snap)); err != nil {
			t.Fatalf("restore %s: %v", p.ID, err)
		}
	}
	for _, p := range ps {
		c.Restart(p)
	}
	c.WaitLeader()
	for _, p := range ps {
		c.WaitApplied(was.applied+1, p)
		now := stateOf(p)
		if now.lastToken != was.lastToken || !slices.Equal(now.locks, was.locks) {
			t.Fatalf("%s after restore: last token %d, %d locks; want %d, %d", p.ID, now.lastToken, len(now.locks), was.lastToken, len(was.locks))
		}
	}
	checkSurvived(t, c, ps[0], was)
	c.EnsureSame()
}

// testRestoreRefuses: Restore refuses a data dir that holds Raft state, a
// damaged snapshot and a missing member list, and changes nothing.
func testRestoreRefuses(t *testing.T, restore backends.RestoreFunc) {
	sm := core.NewStateMachine()
	if _, err := sm.Apply(1, grant("a")); err != nil {
		t.Fatal(err)
	}
	var good bytes.Buffer
	if err := sm.WriteSnapshot(&good); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	me := core.Member{ID: "n1", RaftAddr: "127.0.0.1:1"}
	cfg := backends.Config{ID: me.ID, RaftAddr: me.RaftAddr, DataDir: dir, Bootstrap: []core.Member{me}}
	if err := restore(cfg, bytes.NewReader(good.Bytes())); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if err := restore(cfg, bytes.NewReader(good.Bytes())); !errors.Is(err, backends.ErrDataDirInUse) {
		t.Fatalf("restore over a restored dir: %v, want ErrDataDirInUse", err)
	}
	damaged := slices.Clone(good.Bytes())
	damaged[len(damaged)/2] ^= 0xff
	cfg.DataDir = t.TempDir()
	if err := restore(cfg, bytes.NewReader(damaged)); !errors.Is(err, core.ErrDecode) {
		t.Fatalf("restore of a damaged snapshot: %v, want core.ErrDecode", err)
	}
	noMembers := cfg
	noMembers.Bootstrap = nil
	if err := restore(noMembers, bytes.NewReader(good.Bytes())); !errors.Is(err, backends.ErrInvalidConfig) {
		t.Fatalf("restore without members: %v, want ErrInvalidConfig", err)
	}
}
