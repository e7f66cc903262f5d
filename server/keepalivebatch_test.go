package server_test

import (
	"context"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/core"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/internal/nodetest"
)

// countKeepAlives counts the KeepAliveSession entries applied from now on.
func countKeepAlives(mem interface {
	SetApplyHook(func(uint64, core.Command, core.Result))
}) *atomic.Int32 {
	var n atomic.Int32
	mem.SetApplyHook(func(_ uint64, cmd core.Command, _ core.Result) {
		if cmd.Op == core.OpKeepAliveSession {
			n.Add(1)
		}
	})
	return &n
}

// TestKeepAlivesShareEntries: concurrent KeepAlives of one session write
// one entry in flight at a time; those that arrive while one is in flight
// do not take its answer (it may have committed before they were sent) but
// all share the next entry. 32 KeepAlives write 2 entries, and the client
// of the first going away fails none of the others (unmerged, 16
// connections on one session write 700–1600 entries a second).
func TestKeepAlivesShareEntries(t *testing.T) {
	t.Parallel()
	in, mem := memNode(t)
	ctx := ctxT(t)
	id := createSession(t, in, 10_000)
	entries := countKeepAlives(mem)
	keepAlive := func(ctx context.Context, out chan<- error) {
		res, err := in.Lock.KeepAlive(ctx, &ticketv1.KeepAliveRequest{Session: id})
		if err == nil && res.GetTtlMs() != 10_000 {
			err = assert.AnError
		}
		out <- err
	}

	mem.HoldProposals(true)
	firstCtx, cancelFirst := context.WithCancel(ctx)
	first := make(chan error, 1)
	go keepAlive(firstCtx, first)
	eventually(t, func() bool { return len(mem.Log()) == 1 }, "the first KeepAlive's entry in flight")

	const n = 32
	rest := make(chan error, n-1)
	for range n - 1 {
		go keepAlive(ctx, rest)
	}
	// One of them opens the next round, the others join it.
	eventually(t, func() bool { return metric(t, in, "ticketd_session_keepalives_merged_total") == n-2 }, "every KeepAlive arrived")
	require.Len(t, mem.Log(), 1, "one entry of the session in flight")
	cancelFirst()
	requireCode(t, connect.CodeCanceled, <-first)

	mem.Commit(1)
	mem.Apply(1)
	eventually(t, func() bool { return len(mem.Log()) == 1 }, "the next round's entry in flight")
	select {
	case err := <-rest:
		t.Fatalf("a KeepAlive that arrived while the first entry was in flight was answered by it (%v)", err)
	default:
	}
	mem.HoldProposals(false)
	for range n - 1 {
		require.NoError(t, <-rest)
	}
	assert.Equal(t, int32(2), entries.Load(), "KeepAliveSession entries for %d KeepAlives", n)

	// Alone, a KeepAlive still writes its own entry at once.
	_, err := in.Lock.KeepAlive(ctx, &ticketv1.KeepAliveRequest{Session: id})
	require.NoError(t, err)
	assert.Equal(t, int32(3), entries.Load())
}

// TestKeepAliveRoundOfEndedSession: KeepAlives that share a round whose
// session was closed before its entry applied all get NotFound.
func TestKeepAliveRoundOfEndedSession(t *testing.T) {
	t.Parallel()
	in, mem := memNode(t)
	ctx := ctxT(t)
	id := createSession(t, in, 10_000)
	mem.HoldProposals(true)
	out := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := in.Lock.KeepAlive(ctx, &ticketv1.KeepAliveRequest{Session: id})
			out <- err
		}()
	}
	eventually(t, func() bool { return len(mem.Log()) == 1 }, "a KeepAlive entry in flight")
	closed := make(chan error, 1)
	go func() {
		_, err := in.Lock.CloseSession(ctx, &ticketv1.CloseSessionRequest{Session: id})
		closed <- err
	}()
	eventually(t, func() bool { return len(mem.Log()) == 2 }, "the CloseSession in flight behind it")
	mem.Commit(-1)
	mem.Apply(-1)
	require.NoError(t, <-closed)
	// The round after the first is proposed once the first applied: apply it
	// too (still step by step: switching holding off while it is being
	// proposed could leave it held).
	eventually(t, func() bool {
		mem.Commit(-1)
		mem.Apply(-1)
		return len(out) == 3
	}, "every KeepAlive answered")
	mem.HoldProposals(false)
	ok, notFound := 0, 0
	for range 3 {
		switch err := <-out; {
		case err == nil:
			ok++
		case connect.CodeOf(err) == connect.CodeNotFound:
			notFound++
		default:
			t.Fatalf("KeepAlive: %v", err)
		}
	}
	// The entry in flight applied before the close; the others shared the
	// round after it, or came later and found the session gone.
	assert.Equal(t, 1, ok)
	assert.Equal(t, 2, notFound)
}

// TestKeepAlivesShareEntriesOnBackends: on a real backend (its default log
// store in t.TempDir()), bursts of 64 concurrent KeepAlives of one session
// write fewer log entries than KeepAlives, counted as the applied index's
// advance (anything else applied meanwhile could only raise it). Without
// merging every burst writes exactly 64. How many a burst shares depends on
// how the 64 goroutines are scheduled against the commits (on a quiet
// machine a fast single-node commit may finish before the next KeepAlive
// arrives), so the test sends up to 10 bursts and asks that one of them
// shares entries; the exact merging is TestKeepAlivesShareEntries' job.
func TestKeepAlivesShareEntriesOnBackends(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{config.BackendHashicorp, config.BackendEtcd} {
		t.Run(backend, func(t *testing.T) {
			c := nodetest.Start(t, 1, nodetest.WithBackend(backend))
			in := c.Leader(t)
			ctx := ctxT(t)
			id := createSession(t, in, 10_000)

			const n, bursts = 64, 10
			shared := false
			for b := 0; b < bursts && !shared; b++ {
				before := state(t, in).AppliedIndex
				out := make(chan error, n)
				for range n {
					go func() {
						_, err := in.Lock.KeepAlive(ctx, &ticketv1.KeepAliveRequest{Session: id})
						out <- err
					}()
				}
				for range n {
					require.NoError(t, <-out)
				}
				entries := state(t, in).AppliedIndex - before
				t.Logf("%s: burst %d: %d KeepAlives wrote %d entries", backend, b+1, n, entries)
				require.GreaterOrEqual(t, entries, uint64(1))
				shared = entries < n
			}
			assert.True(t, shared, "no burst of %d KeepAlives shared an entry: one entry per KeepAlive", n)
		})
	}
}
