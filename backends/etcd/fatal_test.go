package etcd_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/backendtest"
	"github.com/ticketd/ticketd/core"
)

// TestLoopPanicStopsTheNode (fail-stop, docs/design.md#storage-and-recovery):
// a panic inside the raft loop (in the wild, raft's "tocommit(510) is out of
// range [lastIndex(485)]") must not leave a zombie that keeps its listener and
// answers as if alive: the loop recovers it, tells Config.OnFatal once, and
// every later call fails with core.ErrStopped; the other nodes elect a new
// leader. The panic is injected through the DropMessage hook, which the loop
// calls for every message it sends.
func TestLoopPanicStopsTheNode(t *testing.T) {
	var victim atomic.Value // id of the node whose loop panics
	victim.Store("")
	var mu sync.Mutex
	fatal := map[string][]error{}
	c := backendtest.NewCluster(t, newNode)
	c.Tune = func(cfg *backends.Config) {
		id, drop := cfg.ID, cfg.DropMessage
		cfg.DropMessage = func(from, to string) bool {
			if from == id && victim.Load() == id {
				panic("tocommit(510) is out of range [lastIndex(485)]. Was the raft log corrupted, truncated, or lost?")
			}
			return drop(from, to)
		}
		cfg.OnFatal = func(err error) {
			mu.Lock()
			fatal[id] = append(fatal[id], err)
			mu.Unlock()
		}
	}
	c.Start(3)
	l := c.WaitLeader()
	ctx := testCtx(t)
	_, err := l.Node().Propose(ctx, core.Grant("before", 1000, "o"))
	require.NoError(t, err)

	victim.Store(l.ID)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(fatal[l.ID]) > 0
	}, backendtest.WaitTimeout, 5*time.Millisecond, "OnFatal was not called after the loop panicked")
	mu.Lock()
	errs := fatal[l.ID]
	mu.Unlock()
	require.Len(t, errs, 1)
	require.True(t, strings.Contains(errs[0].Error(), "tocommit(510)"), "OnFatal names the panic: %v", errs[0])

	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = l.Node().Propose(pctx, core.Grant("after", 1000, "o"))
	require.ErrorIs(t, err, core.ErrStopped)
	require.ErrorIs(t, l.Node().ReadIndex(pctx), core.ErrStopped)
	require.ErrorIs(t, l.Node().AddVoter(pctx, core.Member{ID: "x", RaftAddr: "127.0.0.1:1"}), core.ErrStopped)

	var others []*backendtest.Peer
	for _, p := range c.Live() {
		if p != l {
			others = append(others, p)
		}
	}
	nl := c.WaitLeader(others...)
	_, err = nl.Node().Propose(ctx, core.Grant("on-new-leader", 1000, "o"))
	require.NoError(t, err)
}
