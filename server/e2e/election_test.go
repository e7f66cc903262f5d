package e2e_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/sdk"
)

// fencedResource stands for what an elected leader guards: it records the
// terms it is told about and who is leader now.
type fencedResource struct {
	mu      sync.Mutex
	current string   // candidate acting as leader, "" if none
	terms   []uint64 // terms in the order leaders took over
	overlap []string // takeovers while another candidate still acted as leader
}

func (r *fencedResource) takeOver(who string, term uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.current != "" {
		r.overlap = append(r.overlap, fmt.Sprintf("%s took term %d while %s led", who, term, r.current))
	}
	r.current = who
	r.terms = append(r.terms, term)
}

func (r *fencedResource) stepDown(who string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.current == who {
		r.current = ""
	}
}

func (r *fencedResource) termsSoFar() []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]uint64(nil), r.terms...)
}

// TestElectionOneLeaderUnderLeaderKill: three candidates campaign in a loop,
// each leading for a short while then resigning; the cluster's Raft leader
// is killed midway. At most one candidate acts as leader at any time (a
// leader stops at once when its leadership's Done closes), the terms
// strictly increase, and an observer sees the same increasing terms.
func TestElectionOneLeaderUnderLeaderKill(t *testing.T) {
	t.Parallel() // one backend, its own cluster: beside the others (see matrix)
	c := start(t, backends()[0])
	var addrs []string
	for i := range c.Len() {
		addrs = append(addrs, c.Node(i).APIAddr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := &fencedResource{}
	var wg sync.WaitGroup
	for i := range 3 {
		cl, err := sdk.New(addrs, sdk.WithBackoff(20*time.Millisecond, 300*time.Millisecond))
		require.NoError(t, err)
		defer cl.Close()
		el := sdk.NewElection(cl, time.Second)
		who := fmt.Sprintf("cand-%d", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				ld, err := el.Campaign(ctx, "elect/x", who)
				if err != nil {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				res.takeOver(who, ld.Term())
				select {
				case <-ld.Done():
				case <-time.After(150 * time.Millisecond):
				case <-ctx.Done():
				}
				res.stepDown(who) // stop acting as leader before resigning
				rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
				_ = ld.Resign(rctx)
				rcancel()
			}
		}()
	}

	obsClient, err := sdk.New(addrs, sdk.WithBackoff(20*time.Millisecond, 300*time.Millisecond))
	require.NoError(t, err)
	defer obsClient.Close()
	var obsMu sync.Mutex
	var observed []uint64
	obsDone := make(chan struct{})
	go func() {
		defer close(obsDone)
		for ld, err := range sdk.NewElection(obsClient, time.Second).Observe(ctx, "elect/x") {
			if err != nil {
				return
			}
			if ld.Term != 0 {
				obsMu.Lock()
				observed = append(observed, ld.Term)
				obsMu.Unlock()
			}
		}
	}()

	eventually(t, func() bool { return len(res.termsSoFar()) >= 3 }, "three terms before the kill")
	c.Kill(c.Leader(t))
	c.WaitLeader(t, safety)
	n := len(res.termsSoFar())
	eventually(t, func() bool { return len(res.termsSoFar()) >= n+3 }, "three more terms after the kill")
	cancel()
	wg.Wait()
	<-obsDone

	terms := res.termsSoFar()
	assert.Empty(t, res.overlap, "one leader at a time")
	for i := 1; i < len(terms); i++ {
		require.Greater(t, terms[i], terms[i-1], "terms strictly increase: %v", terms)
	}
	obsMu.Lock()
	defer obsMu.Unlock()
	require.NotEmpty(t, observed)
	for i := 1; i < len(observed); i++ {
		require.Greater(t, observed[i], observed[i-1], "observed terms strictly increase: %v", observed)
	}
}
