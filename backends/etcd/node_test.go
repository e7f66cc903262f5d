package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/backendtest"
	"github.com/ticketd/ticketd/backends/etcd"
	"github.com/ticketd/ticketd/core"
)

// single is one bootstrapped single-voter node in dir, with its recorders.
type single struct {
	n       *etcd.Node
	sm      *core.StateMachine
	mu      sync.Mutex
	events  []core.LeaderEvent
	applied []uint64
}

func (s *single) leaderEvents() []core.LeaderEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]core.LeaderEvent(nil), s.events...)
}

func singleConfig(dir, addr string, s *single) backends.Config {
	cfg := backends.DefaultConfig()
	cfg.ID = "solo"
	cfg.RaftAddr = addr
	cfg.DataDir = dir
	cfg.Bootstrap = []core.Member{{ID: "solo", RaftAddr: addr}}
	cfg.StateMachine = s.sm
	cfg.HeartbeatInterval = backendtest.HeartbeatInterval
	cfg.ElectionTimeout = backendtest.ElectionTimeout
	cfg.OnLeaderChange = func(ev core.LeaderEvent) {
		s.mu.Lock()
		s.events = append(s.events, ev)
		s.mu.Unlock()
	}
	cfg.OnApply = func(index uint64, _ core.Command, _ core.Result) {
		s.mu.Lock()
		s.applied = append(s.applied, index)
		s.mu.Unlock()
	}
	return cfg
}

// openSingle opens the single node of dir and waits until it is the ready leader.
func openSingle(t *testing.T, dir, addr string, tune func(*backends.Config)) *single {
	t.Helper()
	s := &single{sm: core.NewStateMachine()}
	cfg := singleConfig(dir, addr, s)
	if tune != nil {
		tune(&cfg)
	}
	n, err := etcd.New(cfg)
	require.NoError(t, err)
	s.n = n
	t.Cleanup(func() { _ = n.Close() })
	require.Eventually(t, func() bool {
		evs := s.leaderEvents()
		return len(evs) > 0 && evs[len(evs)-1].IsLeader
	}, backendtest.WaitTimeout, 5*time.Millisecond, "single node never became the ready leader")
	return s
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), backendtest.WaitTimeout)
	t.Cleanup(cancel)
	return ctx
}

func TestSingleNode(t *testing.T) {
	ctx := testCtx(t)
	addr := backendtest.FreeAddr(t)
	s := openSingle(t, t.TempDir(), addr, nil)

	ev := s.leaderEvents()[0]
	require.True(t, ev.IsLeader)
	require.Equal(t, core.Member{ID: "solo", RaftAddr: addr, Voter: true}, ev.Leader)

	res, err := s.n.Propose(ctx, core.Grant("a", 1000, "o1"))
	require.NoError(t, err)
	require.Equal(t, core.Result{Outcome: core.OutcomeGranted, Token: 1, LeaseMS: 1000, Created: true}, res)
	res, err = s.n.Propose(ctx, core.Grant("a", 1000, "o2"))
	require.NoError(t, err)
	require.Equal(t, core.OutcomeGrantRejected, res.Outcome)
	require.NoError(t, s.n.ReadIndex(ctx))

	st := s.n.Status()
	require.Equal(t, "etcd", st.Backend)
	require.Equal(t, "solo", st.ID)
	require.Equal(t, "solo", st.Leader.ID)
	require.Equal(t, []core.Member{{ID: "solo", RaftAddr: addr, Voter: true}}, st.Members)
	require.Equal(t, s.sm.AppliedIndex(), st.AppliedIndex)
	require.GreaterOrEqual(t, st.CommitIndex, st.AppliedIndex)
	require.NotZero(t, st.Term)
	m, ok := s.n.Leader()
	require.True(t, ok)
	require.Equal(t, "solo", m.ID)

	_, err = s.n.Propose(ctx, core.Command{Op: core.Op(99)})
	require.ErrorIs(t, err, core.ErrInvalidArgument)

	require.NoError(t, s.n.Close())
	require.NoError(t, s.n.Close(), "Close is idempotent")
	_, err = s.n.Propose(ctx, core.Grant("b", 1000, "o"))
	require.ErrorIs(t, err, core.ErrStopped)
	require.ErrorIs(t, s.n.ReadIndex(ctx), core.ErrStopped)
}

func TestProposeHonoursContext(t *testing.T) {
	s := openSingle(t, t.TempDir(), backendtest.FreeAddr(t), nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.n.Propose(ctx, core.Grant("a", 1000, "o"))
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, s.n.ReadIndex(ctx), context.Canceled)
}

// TestGroupCommit: many concurrent proposals all apply, with distinct
// consecutive tokens.
func TestGroupCommit(t *testing.T) {
	ctx := testCtx(t)
	s := openSingle(t, t.TempDir(), backendtest.FreeAddr(t), nil)
	const workers, each = 32, 20
	var wg sync.WaitGroup
	tokens := make(chan uint64, workers*each)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				res, err := s.n.Propose(ctx, core.Grant(fmt.Sprintf("k%d-%d", w, i), 1000, "o"))
				if err != nil {
					t.Errorf("propose: %v", err)
					return
				}
				tokens <- res.Token
			}
		}()
	}
	wg.Wait()
	close(tokens)
	seen := map[uint64]bool{}
	for tok := range tokens {
		require.False(t, seen[tok], "token %d issued twice", tok)
		seen[tok] = true
	}
	require.Len(t, seen, workers*each)
	require.Equal(t, uint64(workers*each), s.sm.LastToken())
}

// TestRestartFromDisk: a single node restarted from its data dir (snapshots
// plus log, with compaction) comes back with the same state and keeps issuing
// tokens after the last one.
func TestRestartFromDisk(t *testing.T) {
	ctx := testCtx(t)
	dir, addr := t.TempDir(), backendtest.FreeAddr(t)
	tune := func(cfg *backends.Config) { cfg.SnapshotThreshold, cfg.TrailingLogs = 10, 3 }
	s := openSingle(t, dir, addr, tune)
	for i := 0; i < 37; i++ {
		_, err := s.n.Propose(ctx, core.Grant(fmt.Sprintf("k%02d", i), 1000, "o"))
		require.NoError(t, err)
	}
	_, err := s.n.Propose(ctx, core.Release("k00", 1))
	require.NoError(t, err)
	before := s.sm.Range("", "", 0)
	applied, last := s.sm.AppliedIndex(), s.sm.LastToken()
	require.NoError(t, s.n.Close())

	s2 := openSingle(t, dir, addr, tune)
	require.Eventually(t, func() bool { return s2.sm.AppliedIndex() >= applied }, backendtest.WaitTimeout, 5*time.Millisecond)
	require.Equal(t, before, s2.sm.Range("", "", 0))
	require.Equal(t, last, s2.sm.LastToken())
	res, err := s2.n.Propose(ctx, core.Grant("after", 1000, "o"))
	require.NoError(t, err)
	require.Equal(t, last+1, res.Token)
}

func TestNewRefusesBadConfig(t *testing.T) {
	_, err := etcd.New(backends.Config{ID: "x"})
	require.ErrorIs(t, err, backends.ErrInvalidConfig)
}

// TestMembershipErrors: the membership calls' edge cases on a single node.
func TestMembershipErrors(t *testing.T) {
	ctx := testCtx(t)
	s := openSingle(t, t.TempDir(), backendtest.FreeAddr(t), nil)
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"remove_unknown_is_a_no_op", func() error { return s.n.RemoveServer(ctx, "nobody") }, nil},
		{"remove_last_voter", func() error { return s.n.RemoveServer(ctx, "solo") }, core.ErrInvalidArgument},
		{"re_add_self_is_a_no_op", func() error {
			return s.n.AddVoter(ctx, core.Member{ID: "solo", RaftAddr: s.n.Status().Leader.RaftAddr})
		}, nil},
		{"add_without_address", func() error { return s.n.AddVoter(ctx, core.Member{ID: "x"}) }, core.ErrInvalidArgument},
		{"transfer_to_unknown", func() error { return s.n.TransferLeadership(ctx, "nobody") }, etcd.ErrUnknownMember},
		{"transfer_with_no_other_voter", func() error { return s.n.TransferLeadership(ctx, "") }, etcd.ErrUnknownMember},
		{"transfer_to_self", func() error { return s.n.TransferLeadership(ctx, "solo") }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if tt.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.want)
		})
	}
}

// TestThreeNodes: a bootstrapped three-node cluster elects a ready leader,
// followers answer with the leader's identity, leadership moves to a named
// voter, and a node added later learns the cluster from the leader.
func TestThreeNodes(t *testing.T) {
	ctx := testCtx(t)
	c := backendtest.NewCluster(t, func(cfg backends.Config) (backendtest.Node, error) { return etcd.New(cfg) })
	c.Tune = func(cfg *backends.Config) { cfg.SnapshotThreshold, cfg.TrailingLogs = 8, 2 }
	c.Start(3)
	l := c.WaitLeader()
	for i := 0; i < 20; i++ {
		_, err := l.Node().Propose(ctx, core.Grant(fmt.Sprintf("k%d", i), 1000, "o"))
		require.NoError(t, err)
	}
	for _, p := range c.Live() {
		if p == l {
			continue
		}
		_, err := p.Node().Propose(ctx, core.Grant("x", 1000, "o"))
		var nl *core.NotLeaderError
		require.True(t, errors.As(err, &nl), "got %v", err)
		require.Equal(t, l.ID, nl.Leader.ID)
		require.Equal(t, l.Addr, nl.Leader.RaftAddr)
		require.ErrorAs(t, p.Node().AddVoter(ctx, core.Member{ID: "n9", RaftAddr: "127.0.0.1:1"}), &nl)
		require.ErrorAs(t, p.Node().TransferLeadership(ctx, ""), &nl)
	}

	// Transfer to a named follower.
	var target *backendtest.Peer
	for _, p := range c.Live() {
		if p != l {
			target = p
			break
		}
	}
	require.NoError(t, l.Node().TransferLeadership(ctx, target.ID))
	require.Equal(t, target, c.WaitLeader())

	// A joiner with an empty data dir catches up by snapshot (the log was
	// compacted) and knows every member's address.
	j := c.Join()
	require.NoError(t, target.Node().AddVoter(ctx, j.Member()))
	c.WaitApplied(target.StateMachine().AppliedIndex(), j)
	c.EnsureSame()
	// Status is published after each Ready, a moment after the state
	// machine moves: wait for it to show the snapshot's configuration.
	var st core.Status
	require.Eventually(t, func() bool {
		st = j.Node().Status()
		return len(st.Members) == 4
	}, backendtest.WaitTimeout, 5*time.Millisecond, "joiner's members: %+v", st.Members)
	for _, m := range st.Members {
		p := c.Peer(m.ID)
		require.NotNil(t, p, "member %+v", m)
		require.Equal(t, p.Addr, m.RaftAddr)
		require.True(t, m.Voter)
	}
	// Leadership can move to the joiner.
	require.NoError(t, target.Node().TransferLeadership(ctx, j.ID))
	require.Equal(t, j, c.WaitLeader())
	_, err := j.Node().Propose(ctx, core.Grant("from-joiner", 1000, "o"))
	require.NoError(t, err)
	c.EnsureSame()
}

// TestConcurrentReadIndex: many readers at once (served by shared raft
// ReadIndex requests) each see every write acknowledged before their call.
func TestConcurrentReadIndex(t *testing.T) {
	ctx := testCtx(t)
	s := openSingle(t, t.TempDir(), backendtest.FreeAddr(t), nil)
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				key := fmt.Sprintf("r%d-%d", w, i)
				res, err := s.n.Propose(ctx, core.Grant(key, 1000, "o"))
				if err != nil {
					t.Errorf("propose: %v", err)
					return
				}
				if err := s.n.ReadIndex(ctx); err != nil {
					t.Errorf("read index: %v", err)
					return
				}
				if lk, ok := s.sm.Get(key); !ok || lk.Token != res.Token {
					t.Errorf("after ReadIndex %s is %+v held=%v, want token %d", key, lk, ok, res.Token)
					return
				}
			}
		}()
	}
	wg.Wait()
}
