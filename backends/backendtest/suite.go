package backendtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/core"
)

// Run runs the whole conformance suite against the backend that open makes:
// real nodes on loopback TCP with real badger storage in temporary dirs. Each
// case is a subtest; they run one after another (CPU is scarce and elections
// are timing-sensitive).
func Run(t *testing.T, open Factory) {
	cases := []struct {
		name string
		fn   func(t *testing.T, open Factory)
	}{
		{"replicate_in_order", testReplicateInOrder},
		{"read_index", testReadIndex},
		{"kill_leader", testKillLeader},
		{"restart_all", testRestartAll},
		{"snapshot_install", testSnapshotInstall},
		{"partition_leader", testPartitionLeader},
		{"transfer_leadership", testTransferLeadership},
		{"membership_under_load", testMembershipUnderLoad},
		{"barrier_before_ready", testBarrierBeforeReady},
		{"confirm_term", testConfirmTerm},
		{"submit_order", testSubmitOrder},
		{"errors_are_core", testErrorsAreCore},
		{"recovered_commit_index", testRecoveredCommitIndex},
		{"damaged_log_refused", testDamagedLogRefused},
		{"missing_watermark_refused", testMissingWatermarkRefused},
		{"before_bootstrap", testBeforeBootstrap},
		{"file_loss_never_shortens", testFileLossNeverShortens},
		{"disk_full_stops", testDiskFullStops},
		{"disk_full_restart_stops", testDiskFullRestartStops},
		{"observer", testObserver},
		{"snapshots_scale_with_table", testSnapshotsScaleWithTable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open) })
	}
}

// leaseMS is the lease of every test grant; the backends never look at it.
const leaseMS = 60_000

func grant(key string) core.Command { return core.Grant(key, leaseMS, "owner-"+key) }

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*WaitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// mustGrant proposes a grant of key on n and returns its token.
func mustGrant(ctx context.Context, t *testing.T, n Node, key string) uint64 {
	t.Helper()
	res, err := n.Propose(ctx, grant(key))
	if err != nil {
		t.Fatalf("grant %s: %v", key, err)
	}
	if res.Outcome != core.OutcomeGranted {
		t.Fatalf("grant %s: outcome %v, want granted", key, res.Outcome)
	}
	return res.Token
}

// requireNotLeader checks that err is a *core.NotLeaderError naming leader.
func requireNotLeader(t *testing.T, err error, leader *Peer) {
	t.Helper()
	var nl *core.NotLeaderError
	if !errors.As(err, &nl) || !errors.Is(err, core.ErrNotLeader) {
		t.Fatalf("error %v, want *core.NotLeaderError", err)
	}
	if nl.Leader.ID != leader.ID || nl.Leader.RaftAddr != leader.Addr {
		t.Fatalf("not-leader error names %+v, want %s at %s", nl.Leader, leader.ID, leader.Addr)
	}
}

func follower(c *Cluster, leader *Peer) *Peer {
	for _, p := range c.Live() {
		if p != leader {
			return p
		}
	}
	return nil
}

// checkLeaderEvents checks the OnLeaderChange record of every peer's current
// incarnation: terms never go back, IsLeader=true names the peer itself, and
// no event repeats the previous one.
func checkLeaderEvents(t *testing.T, c *Cluster) {
	t.Helper()
	for _, p := range c.Peers() {
		var prev *LeaderRecord
		for _, r := range p.Leaders().Records() {
			if r.Event.IsLeader && r.Event.Leader.ID != p.ID {
				t.Errorf("%s: IsLeader event names %q", p.ID, r.Event.Leader.ID)
			}
			if prev != nil {
				if r.Event.Term < prev.Event.Term {
					t.Errorf("%s: leader event term went back from %d to %d", p.ID, prev.Event.Term, r.Event.Term)
				}
				if r.Event == prev.Event {
					t.Errorf("%s: leader event %+v delivered twice", p.ID, r.Event)
				}
			}
			prev = &r
		}
	}
}

// testReplicateInOrder: proposals on the leader commit and apply on every node
// in the same order with the same results; a follower refuses proposals with
// a not-leader error naming the leader.
func testReplicateInOrder(t *testing.T, open Factory) {
	ctx := testContext(t)
	c := NewCluster(t, open)
	c.Start(3)
	l := c.WaitLeader()
	proposeInOrder(ctx, t, l)

	f := follower(c, l)
	_, err := f.Node().Propose(ctx, grant("on-follower"))
	requireNotLeader(t, err, l)

	applied := l.StateMachine().AppliedIndex()
	c.WaitApplied(applied)
	want := upTo(l.Applies().Records(), applied)
	for _, p := range c.Live() {
		if got := upTo(p.Applies().Records(), applied); !slices.Equal(got, want) {
			t.Fatalf("%s applied %d entries differently from leader %s (%d entries)", p.ID, len(got), l.ID, len(want))
		}
	}
	c.EnsureSame()
	checkLeaderEvents(t, c)
}

// proposeInOrder checks the leader half of replicate_in_order on l, the
// ready leader of a fresh cluster: sequential grants get tokens 1, 2, ...;
// each command's result is the state machine's (rejection, release, a
// second release, expiry, a fresh grant); concurrent proposals
// (group-committed) get distinct consecutive tokens; and every Propose
// returns only once its entry has applied locally and OnApply has seen it,
// with the result Propose returned (docs/design.md#the-consensus-contract).
func proposeInOrder(ctx context.Context, t *testing.T, l *Peer) {
	t.Helper()
	n := l.Node()
	for i := 0; i < 20; i++ {
		if tok := mustGrant(ctx, t, n, fmt.Sprintf("k%02d", i)); tok != uint64(i+1) {
			t.Fatalf("grant %d: token %d, want %d", i, tok, i+1)
		}
	}
	steps := []struct {
		cmd  core.Command
		want core.Result
	}{
		{grant("k00"), core.Result{Outcome: core.OutcomeGranted, Token: 1, LeaseMS: leaseMS}},
		{core.Grant("k00", leaseMS, "someone-else"), core.Result{Outcome: core.OutcomeGrantRejected, Token: 1}},
		{core.Release("k00", 1), core.Result{Outcome: core.OutcomeReleased}},
		{core.Release("k00", 1), core.Result{Outcome: core.OutcomeNotFound}},
		{core.Expire("k01", 2), core.Result{Outcome: core.OutcomeExpired, Existed: true}},
		{core.Grant("k00", leaseMS, "someone-else"), core.Result{Outcome: core.OutcomeGranted, Token: 21, LeaseMS: leaseMS, Created: true}},
	}
	for _, s := range steps {
		res, err := n.Propose(ctx, s.cmd)
		if err != nil || res != s.want {
			t.Fatalf("propose %+v: %+v, %v; want %+v", s.cmd, res, err, s.want)
		}
		checkAppliedOnReturn(t, l, s.cmd, res)
	}
	// Concurrent proposals (group-committed): distinct tokens 22..61.
	var mu sync.Mutex
	var tokens []uint64
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 5; i++ {
				res, err := n.Propose(ctx, grant(fmt.Sprintf("c%d-%d", w, i)))
				if err != nil {
					t.Errorf("concurrent grant: %v", err)
					return
				}
				mu.Lock()
				tokens = append(tokens, res.Token)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	slices.Sort(tokens)
	for i, tok := range tokens {
		if tok != uint64(22+i) {
			t.Fatalf("concurrent tokens %v, want 22..61", tokens)
		}
	}
	checkApplyOrder(t, l)
}

// checkAppliedOnReturn checks, right after Propose(cmd) returned res on l,
// that l's OnApply has seen cmd with res (its latest record of cmd's op and
// key) at an index its state machine has applied: Propose waits for local
// apply, and the apply hook runs before it returns.
func checkAppliedOnReturn(t *testing.T, l *Peer, cmd core.Command, res core.Result) {
	t.Helper()
	recs := l.Applies().Records()
	for i := len(recs) - 1; i >= 0; i-- {
		r := recs[i]
		if r.Cmd.Op != cmd.Op || r.Cmd.Key != cmd.Key {
			continue
		}
		if r.Res != res {
			t.Fatalf("%s: Propose(%v %s) returned %+v but OnApply saw %+v at %d", l.ID, cmd.Op, cmd.Key, res, r.Res, r.Index)
		}
		if applied := l.StateMachine().AppliedIndex(); applied < r.Index {
			t.Fatalf("%s: Propose(%v %s) returned with the state machine at %d, before its entry %d", l.ID, cmd.Op, cmd.Key, applied, r.Index)
		}
		return
	}
	t.Fatalf("%s: Propose(%v %s) returned %+v before OnApply saw it", l.ID, cmd.Op, cmd.Key, res)
}

// checkApplyOrder checks that p's OnApply saw its entries in log order, each
// once: strictly increasing indexes, the last one the state machine's
// applied index or below.
func checkApplyOrder(t *testing.T, p *Peer) {
	t.Helper()
	var prev uint64
	for _, r := range p.Applies().Records() {
		if r.Index <= prev {
			t.Fatalf("%s: OnApply(%d) after OnApply(%d)", p.ID, r.Index, prev)
		}
		prev = r.Index
	}
	if applied := p.StateMachine().AppliedIndex(); prev > applied {
		t.Fatalf("%s: OnApply(%d) past the applied index %d", p.ID, prev, applied)
	}
}

func upTo(recs []ApplyRecord, index uint64) []ApplyRecord {
	return slices.DeleteFunc(recs, func(r ApplyRecord) bool { return r.Index > index })
}

// testReadIndex: ReadIndex on the leader after a write sees the write; on a
// follower it fails with a not-leader error naming the leader.
func testReadIndex(t *testing.T, open Factory) {
	ctx := testContext(t)
	c := NewCluster(t, open)
	c.Start(3)
	l := c.WaitLeader()
	readOnLeader(ctx, t, l, 3)
	f := follower(c, l)
	requireNotLeader(t, f.Node().ReadIndex(ctx), l)
}

// readOnLeader checks the leader half of read_index on l: ReadIndex after a
// write returns with the write applied, and Status names l as itself and as
// leader, with a backend name, the given number of members and a non-zero
// applied index.
func readOnLeader(ctx context.Context, t *testing.T, l *Peer, members int) {
	t.Helper()
	tok := mustGrant(ctx, t, l.Node(), "read-me")
	if err := l.Node().ReadIndex(ctx); err != nil {
		t.Fatalf("leader ReadIndex: %v", err)
	}
	if lk, ok := l.StateMachine().Get("read-me"); !ok || lk.Token != tok {
		t.Fatalf("after ReadIndex: lock %+v held=%v, want token %d", lk, ok, tok)
	}
	if st := l.Node().Status(); st.ID != l.ID || st.Leader.ID != l.ID || st.Backend == "" || len(st.Members) != members || st.AppliedIndex == 0 {
		t.Fatalf("leader status %+v, want %d members", st, members)
	}
}

// ack is one acknowledged grant.
type ack struct {
	key   string
	token uint64
}

// checkAcked checks that every acknowledged grant is held, with its token, in
// p's state machine.
func checkAcked(t *testing.T, p *Peer, acks []ack) {
	t.Helper()
	for _, a := range acks {
		if lk, ok := p.StateMachine().Get(a.key); !ok || lk.Token != a.token {
			t.Fatalf("%s: acknowledged grant %s (token %d) lost: %+v held=%v", p.ID, a.key, a.token, lk, ok)
		}
	}
}

// testKillLeader: with a proposer running, the leader is closed abruptly; a
// new leader is elected, no acknowledged grant is lost, and tokens keep
// strictly increasing.
func testKillLeader(t *testing.T, open Factory) {
	ctx := testContext(t)
	c := NewCluster(t, open)
	c.Start(3)
	l := c.WaitLeader()

	var mu sync.Mutex
	var acks []ack
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acks) }
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			key := fmt.Sprintf("k%04d", i)
			res, err := c.Propose(ctx, grant(key))
			if err != nil || res.Outcome != core.OutcomeGranted {
				done <- fmt.Errorf("grant %s: %+v, %v", key, res, err)
				return
			}
			mu.Lock()
			acks = append(acks, ack{key, res.Token})
			mu.Unlock()
		}
	}()
	waitCount := func(n int) {
		if !poll(WaitTimeout, func() bool { return count() >= n }) {
			t.Fatalf("only %d grants acknowledged, want %d", count(), n)
		}
	}
	waitCount(10)
	c.Kill(l)
	nl := c.WaitNewLeader(l)
	before := count()
	waitCount(before + 10)
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(acks); i++ {
		if acks[i].token <= acks[i-1].token {
			t.Fatalf("token %d acknowledged after %d", acks[i].token, acks[i-1].token)
		}
	}
	if err := c.OnLeader(ctx, func(ctx context.Context, n Node) error { return n.ReadIndex(ctx) }); err != nil {
		t.Fatalf("ReadIndex on new leader: %v", err)
	}
	checkAcked(t, nl, acks)
	c.EnsureSame()
	checkLeaderEvents(t, c)
}

// peerState is what a restart must preserve.
type peerState struct {
	applied   uint64
	lastToken uint64
	locks     []core.Lock
	records   []ApplyRecord
}

func stateOf(p *Peer) peerState {
	sm := p.StateMachine()
	return peerState{
		applied:   sm.AppliedIndex(),
		lastToken: sm.LastToken(),
		locks:     sm.Range("", "", 0),
		records:   p.Applies().Records(),
	}
}

// testRestartAll: every node is stopped and restarted from its data dir
// (snapshots plus log); locks, last token and applied index come back as
// they were, replayed entries give the same results, and no token is reissued.
func testRestartAll(t *testing.T, open Factory) {
	ctx := testContext(t)
	c := NewCluster(t, open)
	c.Tune = func(cfg *backends.Config) { cfg.SnapshotThreshold, cfg.TrailingLogs = 16, 4 }
	c.Start(3)
	c.WaitLeader()
	// Through whichever node leads: on a loaded machine leadership may move
	// while the table is filled. A retried Grant is idempotent (same owner);
	// a retried Release finds its lock gone (NotFound) when the first try
	// committed, which the check below tells apart from a lock left held.
	for i := 0; i < 45; i++ {
		key := fmt.Sprintf("k%02d", i)
		res, err := c.Propose(ctx, grant(key))
		if err != nil || res.Outcome != core.OutcomeGranted {
			t.Fatalf("grant %s: %+v, %v", key, res, err)
		}
		if i%3 == 0 {
			rel, err := c.Propose(ctx, core.Release(key, res.Token))
			if err != nil || (rel.Outcome != core.OutcomeReleased && rel.Outcome != core.OutcomeNotFound) {
				t.Fatalf("release %s: %+v, %v", key, rel, err)
			}
		}
	}
	c.EnsureSame()
	for i := 0; i < 45; i += 3 {
		if key := fmt.Sprintf("k%02d", i); len(c.Live()[0].StateMachine().Holders(key)) != 0 {
			t.Fatalf("%s still held after its release", key)
		}
	}
	before := map[string]peerState{}
	for _, p := range c.Live() {
		before[p.ID] = stateOf(p)
		c.Kill(p)
	}
	for _, p := range c.Peers() {
		c.Restart(p)
	}
	nl := c.WaitLeader()
	for _, p := range c.Peers() {
		c.WaitApplied(before[p.ID].applied, p)
	}
	c.EnsureSame()
	for _, p := range c.Peers() {
		was, now := before[p.ID], stateOf(p)
		if now.lastToken != was.lastToken {
			t.Fatalf("%s: last token %d after restart, was %d", p.ID, now.lastToken, was.lastToken)
		}
		if !slices.Equal(now.locks, was.locks) {
			t.Fatalf("%s: locks after restart differ:\n now %+v\n was %+v", p.ID, now.locks, was.locks)
		}
		old := map[uint64]ApplyRecord{}
		for _, r := range was.records {
			old[r.Index] = r
		}
		for _, r := range now.records {
			if r.Index <= was.applied {
				if r != old[r.Index] {
					t.Fatalf("%s: entry %d replayed as %+v, was %+v", p.ID, r.Index, r, old[r.Index])
				}
			} else if r.Cmd.Op != core.OpNoop {
				t.Fatalf("%s: unexpected new entry %+v after restart", p.ID, r)
			}
		}
	}
	if tok := mustGrant(ctx, t, nl.Node(), "after-restart"); tok != before[nl.ID].lastToken+1 {
		t.Fatalf("first grant after restart got token %d, want %d", tok, before[nl.ID].lastToken+1)
	}
}

// testSnapshotInstall: a follower that was down while the leader compacted its
// log catches up by snapshot install (it never applies the compacted entries
// one by one, yet ends with the same state).
func testSnapshotInstall(t *testing.T, open Factory) {
	ctx := testContext(t)
	c := NewCluster(t, open)
	c.Tune = func(cfg *backends.Config) { cfg.SnapshotThreshold, cfg.TrailingLogs = 20, 5 }
	c.Start(3)
	l := c.WaitLeader()
	n := l.Node()
	for i := 0; i < 5; i++ {
		mustGrant(ctx, t, n, fmt.Sprintf("up-%d", i))
	}
	f := follower(c, l)
	c.Kill(f)
	for i := 0; i < 80; i++ {
		mustGrant(ctx, t, n, fmt.Sprintf("down-%02d", i))
	}
	var downIndex uint64
	for _, r := range l.Applies().Records() {
		if r.Cmd.Key == "down-00" {
			downIndex = r.Index
		}
	}
	if downIndex == 0 {
		t.Fatal("leader did not record applying down-00")
	}
	c.Restart(f)
	c.WaitApplied(l.StateMachine().AppliedIndex(), f)
	c.EnsureSame()
	for _, r := range f.Applies().Records() {
		if r.Index == downIndex {
			t.Fatalf("%s applied compacted entry %d from the log; want a snapshot install", f.ID, downIndex)
		}
	}
	if _, ok := f.StateMachine().Get("down-00"); !ok {
		t.Fatalf("%s: down-00 not held after catching up", f.ID)
	}
	checkInstallRestore(t, f, downIndex)
}

// checkInstallRestore asserts that OnRestore fired on f for the snapshot it
// installed: at an index past downIndex (the compacted entry it never
// applied), with the state machine already restored to that index, and
// between applies (every OnApply before it is below its index, every one
// after it above).
func checkInstallRestore(t *testing.T, f *Peer, downIndex uint64) {
	t.Helper()
	recs := f.Applies().Records()
	for _, r := range f.Applies().Restores() {
		if r.Index < downIndex {
			continue // the node's own snapshot restored at start
		}
		if r.AppliedIndex != r.Index {
			t.Fatalf("%s: OnRestore(%d) called with the state machine at %d; want it restored first", f.ID, r.Index, r.AppliedIndex)
		}
		for i, a := range recs {
			if i < r.Applies && a.Index > r.Index {
				t.Fatalf("%s: OnApply(%d) before OnRestore(%d)", f.ID, a.Index, r.Index)
			}
			if i >= r.Applies && a.Index <= r.Index {
				t.Fatalf("%s: OnApply(%d) after OnRestore(%d)", f.ID, a.Index, r.Index)
			}
		}
		return
	}
	t.Fatalf("%s installed a snapshot past index %d but OnRestore was not called (restores %+v)", f.ID, downIndex, f.Applies().Restores())
}

// testPartitionLeader: the leader is cut off; the majority elects a leader and
// makes progress; the old leader's proposal fails (not-leader or timeout,
// never success); after healing every node converges to identical snapshots.
func testPartitionLeader(t *testing.T, open Factory) {
	ctx := testContext(t)
	c := NewCluster(t, open)
	c.Start(3)
	l := c.WaitLeader()
	var acks []ack
	for i := 0; i < 5; i++ {
		key := fmt.Sprintf("before-%d", i)
		acks = append(acks, ack{key, mustGrant(ctx, t, l.Node(), key)})
	}
	c.Partition(l)
	isolated := make(chan error, 1)
	go func() {
		pctx, cancel := context.WithTimeout(ctx, 4*ElectionTimeout)
		defer cancel()
		_, err := l.Node().Propose(pctx, grant("isolated"))
		isolated <- err
	}()
	nl := c.WaitNewLeader(l)
	for i := 0; i < 10; i++ {
		key := fmt.Sprintf("majority-%d", i)
		acks = append(acks, ack{key, mustGrant(ctx, t, nl.Node(), key)})
	}
	err := <-isolated
	if err == nil || !(errors.Is(err, core.ErrNotLeader) || errors.Is(err, context.DeadlineExceeded)) {
		t.Fatalf("proposal on the partitioned leader: %v, want not-leader or deadline", err)
	}
	c.Heal()
	res, err := c.Propose(ctx, grant("after-heal"))
	if err != nil || res.Outcome != core.OutcomeGranted {
		t.Fatalf("grant after heal: %+v, %v", res, err)
	}
	acks = append(acks, ack{"after-heal", res.Token})
	c.WaitLeader()
	c.EnsureSame()
	for _, p := range c.Live() {
		checkAcked(t, p, acks)
		if _, ok := p.StateMachine().Get("isolated"); ok {
			t.Fatalf("%s holds the lock proposed on the partitioned leader", p.ID)
		}
	}
	checkLeaderEvents(t, c)
}

// testTransferLeadership: leadership moves to a named voter, then to any
// other voter; each new leader reports ready and serves writes.
func testTransferLeadership(t *testing.T, open Factory) {
	ctx := testContext(t)
	c := NewCluster(t, open)
	c.Start(3)
	l := c.WaitLeader()
	mustGrant(ctx, t, l.Node(), "before")
	target := follower(c, l)
	if err := l.Node().TransferLeadership(ctx, target.ID); err != nil {
		t.Fatalf("transfer %s -> %s: %v", l.ID, target.ID, err)
	}
	if got := c.WaitNewLeader(l); got != target {
		t.Fatalf("leader after transfer to %s is %s", target.ID, got.ID)
	}
	if err := c.WaitLeader().Node().ReadIndex(ctx); err != nil {
		t.Fatalf("ReadIndex on %s: %v", target.ID, err)
	}
	if _, ok := target.StateMachine().Get("before"); !ok {
		t.Fatalf("%s lost the grant made before the transfer", target.ID)
	}
	mustGrant(ctx, t, target.Node(), "after-named")
	if err := target.Node().TransferLeadership(ctx, ""); err != nil {
		t.Fatalf("transfer from %s to any: %v", target.ID, err)
	}
	next := c.WaitNewLeader(target)
	mustGrant(ctx, t, next.Node(), "after-any")
	c.EnsureSame()
	checkLeaderEvents(t, c)
}

// testMembershipUnderLoad: under concurrent proposals a fourth voter is added,
// a follower removed, and leadership transferred; no acknowledged grant is
// lost and no token is issued twice.
func testMembershipUnderLoad(t *testing.T, open Factory) {
	ctx := testContext(t)
	c := NewCluster(t, open)
	c.Start(3)
	c.WaitLeader()

	var mu sync.Mutex
	var acks []ack
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acks) }
	// The load stops when the test ends, however it ends, before the cluster
	// is closed: the proposers report through t.
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	stop := func() { stopLoad(); wg.Wait() }
	defer stop()
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; loadCtx.Err() == nil; i++ {
				key := fmt.Sprintf("w%d-%04d", w, i)
				res, err := c.Propose(loadCtx, grant(key))
				if loadCtx.Err() != nil {
					return
				}
				if err != nil || res.Outcome != core.OutcomeGranted {
					t.Errorf("grant %s: %+v, %v", key, res, err)
					return
				}
				mu.Lock()
				acks = append(acks, ack{key, res.Token})
				mu.Unlock()
			}
		}()
	}
	progress := func(n int) {
		t.Helper()
		target := count() + n
		if !poll(WaitTimeout, func() bool { return count() >= target }) {
			t.Fatalf("load stalled at %d grants, want %d", count(), target)
		}
	}
	progress(20)

	p4 := c.Join()
	if err := c.OnLeader(ctx, func(ctx context.Context, n Node) error { return n.AddVoter(ctx, p4.Member()) }); err != nil {
		t.Fatalf("add voter %s: %v", p4.ID, err)
	}
	c.WaitApplied(c.WaitLeader().StateMachine().AppliedIndex(), p4)
	progress(20)

	leader := c.WaitLeader()
	var victim *Peer
	for _, p := range c.Live() {
		if p != leader && p != p4 {
			victim = p
			break
		}
	}
	if err := c.OnLeader(ctx, func(ctx context.Context, n Node) error { return n.RemoveServer(ctx, victim.ID) }); err != nil {
		t.Fatalf("remove server %s: %v", victim.ID, err)
	}
	c.Kill(victim)
	progress(20)

	old := c.WaitLeader()
	if err := old.Node().TransferLeadership(ctx, ""); err != nil {
		t.Fatalf("transfer leadership from %s: %v", old.ID, err)
	}
	nl := c.WaitNewLeader(old)
	progress(20)
	stop()
	if t.Failed() {
		return
	}

	if err := c.OnLeader(ctx, func(ctx context.Context, n Node) error { return n.ReadIndex(ctx) }); err != nil {
		t.Fatalf("ReadIndex: %v", err)
	}
	nl = c.WaitLeader()
	checkAcked(t, nl, acks)
	seen := map[uint64]string{}
	for _, a := range acks {
		if k, dup := seen[a.token]; dup {
			t.Fatalf("token %d issued to %s and %s", a.token, k, a.key)
		}
		seen[a.token] = a.key
	}
	var ids []string
	for _, m := range nl.Node().Status().Members {
		ids = append(ids, m.ID)
	}
	var want []string
	for _, p := range c.Peers() {
		if p != victim {
			want = append(want, p.ID)
		}
	}
	if !slices.Equal(ids, want) {
		t.Fatalf("members %v, want %v", ids, want)
	}
	c.EnsureSame()
	checkLeaderEvents(t, c)
}

// testBarrierBeforeReady: a new leader reports IsLeader=true only once its
// state machine has applied everything committed in earlier terms: every
// grant acknowledged by the old leader, whose followers may not have learnt
// the last commit index yet when it dies.
func testBarrierBeforeReady(t *testing.T, open Factory) {
	ctx := testContext(t)
	c := NewCluster(t, open)
	c.Start(3)
	l := c.WaitLeader()
	oldRec, _ := l.Leaders().Last()

	var mu sync.Mutex
	acked := map[string]uint64{}
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				key := fmt.Sprintf("w%02d-%d", w, i)
				res, err := l.Node().Propose(ctx, grant(key))
				if err != nil {
					t.Errorf("grant %s: %v", key, err)
					return
				}
				mu.Lock()
				acked[key] = res.Token
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	c.Kill(l)
	if t.Failed() {
		return
	}
	var maxToken, maxIndex uint64
	for _, r := range l.Applies().Records() {
		if tok, ok := acked[r.Cmd.Key]; ok && r.Res.Token == tok {
			maxToken, maxIndex = max(maxToken, tok), max(maxIndex, r.Index)
		}
	}
	nl := c.WaitNewLeader(l)
	var ready *LeaderRecord
	for _, r := range nl.Leaders().Records() {
		if r.Event.IsLeader && r.Event.Term > oldRec.Event.Term {
			ready = &r
			break
		}
	}
	if ready == nil {
		t.Fatalf("%s never reported IsLeader=true after term %d", nl.ID, oldRec.Event.Term)
	}
	if ready.AppliedIndex < maxIndex || ready.LastToken < maxToken {
		t.Fatalf("%s reported ready at applied %d, last token %d; old leader had acknowledged index %d, token %d",
			nl.ID, ready.AppliedIndex, ready.LastToken, maxIndex, maxToken)
	}
	checkLeaderEvents(t, c)
}
