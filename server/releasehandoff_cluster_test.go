package server_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/internal/nodetest"
)

// handoffWaiters and handoffRounds size TestPipelinedHandoffOneCommit: N = 8
// clients on one key, each acquiring (with wait) and releasing it
// handoffRounds times.
const (
	handoffWaiters = 8
	handoffRounds  = 12
)

// TestPipelinedHandoffOneCommit (docs/design.md#handoff) runs contended
// handoffs through the real Connect API on a real three-node cluster of each
// backend (badger in temp dirs, loopback TCP): 8 clients on one key, each
// looping Acquire-with-wait then Release. Every Release with waiters hands the
// turn to the head waiter as it is submitted (core.Submitter), so the waiter's
// Grant enters the log behind it and is never rejected: the leader's log
// grows by exactly two entries (one Release, one Grant) per handoff, the
// leader counts pipelined handoffs and no rejected grant
// (ticketd_handoffs_pipelined_total, ticketd_handoff_grants_rejected_total).
// A run whose leader changed is retried (a new term may drop a Release and
// let its Grant commit, rejected, in the next one: allowed, not measured).
func TestPipelinedHandoffOneCommit(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{config.BackendHashicorp, config.BackendEtcd} {
		t.Run(backend, func(t *testing.T) {
			c := nodetest.Start(t, 3, nodetest.WithBackend(backend))
			for attempt := 1; ; attempt++ {
				l := c.Leader(t)
				waitMembersRecorded(t, l)
				before := status(t, l)
				pipelinedBefore := counter(t, l.Addr, "ticketd_handoffs_pipelined_total")
				rejectedBefore := counter(t, l.Addr, "ticketd_handoff_grants_rejected_total")
				key := fmt.Sprintf("hot-%d", attempt)
				handoffs := contend(t, l, key, handoffWaiters, handoffRounds)
				after := status(t, l)
				if after.GetTerm() != before.GetTerm() || after.GetLeaderId() != before.GetLeaderId() {
					require.Less(t, attempt, 3, "leader changed in every attempt")
					t.Logf("attempt %d: leader changed (term %d -> %d); again", attempt, before.GetTerm(), after.GetTerm())
					continue
				}
				entries := after.GetCommitIndex() - before.GetCommitIndex()
				require.Equal(t, 2*uint64(handoffs), entries,
					"log entries for %d handoffs: %.2f per handoff, want 2.00 (one Release, one Grant)", handoffs, float64(entries)/float64(handoffs))
				require.Zero(t, counter(t, l.Addr, "ticketd_handoff_grants_rejected_total")-rejectedBefore, "pipelined grants rejected")
				require.Positive(t, counter(t, l.Addr, "ticketd_handoffs_pipelined_total")-pipelinedBefore, "no handoff was pipelined")
				return
			}
		})
	}
}

// contend runs clients goroutines, each acquiring key with wait and
// releasing it rounds times through in's API, and returns the number of
// grants (clients × rounds). Every call must succeed.
func contend(t *testing.T, in *nodetest.Instance, key string, clients, rounds int) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var (
		wg      sync.WaitGroup
		granted atomic.Int64
		errs    = make(chan error, clients)
	)
	for w := range clients {
		hc := nodetest.H2CClient()
		defer hc.CloseIdleConnections()
		lock := ticketv1connect.NewLockServiceClient(hc, "http://"+in.Addr)
		owner := fmt.Sprintf("%s/client-%d", key, w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				res, err := lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: key, LeaseMs: 30_000, Owner: owner, Wait: true})
				if err != nil {
					errs <- fmt.Errorf("%s: acquire: %w", owner, err)
					return
				}
				granted.Add(1)
				if _, err := lock.Release(ctx, &ticketv1.ReleaseRequest{Key: key, Token: res.GetToken()}); err != nil {
					errs <- fmt.Errorf("%s: release: %w", owner, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return int(granted.Load())
}

// status is in's ClusterService.Status.
func status(t *testing.T, in *nodetest.Instance) *ticketv1.StatusResponse {
	t.Helper()
	st, err := in.Cluster.Status(context.Background(), &ticketv1.StatusRequest{})
	require.NoError(t, err)
	return st
}

// waitMembersRecorded waits until the leader's member directory holds every
// member's API address: the leader proposes those entries after its
// promotion, and they must not land inside a measured run.
func waitMembersRecorded(t *testing.T, in *nodetest.Instance) {
	t.Helper()
	require.Eventually(t, func() bool {
		st := status(t, in)
		for _, m := range st.GetMembers() {
			if m.GetApiAddr() == "" {
				return false
			}
		}
		return len(st.GetMembers()) > 0 && st.GetAppliedIndex() == st.GetCommitIndex()
	}, 10*time.Second, 10*time.Millisecond)
}

// counter returns the value of the unlabelled counter name on addr's /metrics.
func counter(t *testing.T, addr, name string) float64 {
	t.Helper()
	res, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			return f
		}
	}
	require.NoError(t, sc.Err())
	t.Fatalf("%s: no counter %s", addr, name)
	return 0
}
