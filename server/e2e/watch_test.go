package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/sdk"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/ticketdtest"
)

// recorder collects the events of one SDK watch in a goroutine.
type recorder struct {
	mu     sync.Mutex
	events []sdk.Event
	err    error
	done   chan struct{}
}

// watchOn starts an SDK watch of prefix through endpoints (the first one is
// watched first) and records what it yields until the test ends.
func watchOn(t *testing.T, c *ticketdtest.Cluster, endpoints []int, prefix string, opts ...sdk.WatchOption) *recorder {
	t.Helper()
	return watchWith(t, c, nil, endpoints, prefix, opts...)
}

// watchWith is watchOn with client options (the protocol).
func watchWith(t *testing.T, c *ticketdtest.Cluster, copts []sdk.Option, endpoints []int, prefix string, opts ...sdk.WatchOption) *recorder {
	t.Helper()
	var addrs []string
	for _, i := range endpoints {
		addrs = append(addrs, c.Node(i).APIAddr)
	}
	cl, err := sdk.New(addrs, append([]sdk.Option{sdk.WithBackoff(20*time.Millisecond, 200*time.Millisecond)}, copts...)...)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	r := &recorder{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for ev, err := range cl.Watch(ctx, prefix, opts...) {
			r.mu.Lock()
			if err != nil {
				r.err = err
			} else {
				r.events = append(r.events, ev)
			}
			r.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-r.done
		_ = cl.Close()
	})
	return r
}

// snapshot returns the events recorded so far.
func (r *recorder) snapshot() []sdk.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sdk.Event(nil), r.events...)
}

// waitFor waits until r has recorded n events and returns them.
func (r *recorder) waitFor(t *testing.T, n int, what string) []sdk.Event {
	t.Helper()
	eventually(t, func() bool { return len(r.snapshot()) >= n }, what)
	return r.snapshot()
}

// nextIndex returns the index after the cluster's current read index
// (ListLocks' read_index): a watch from it sees every change made after.
func nextIndex(t *testing.T, c *ticketdtest.Cluster) uint64 {
	t.Helper()
	res, err := c.Lock(c.Leader(t)).ListLocks(ctxT(t), &ticketv1.ListLocksRequest{PageSize: 1})
	require.NoError(t, err)
	require.NotZero(t, res.GetReadIndex())
	return res.GetReadIndex() + 1
}

// describe renders events as "TYPE key token" lines, without indexes.
func describe(evs []sdk.Event) []string {
	out := make([]string, 0, len(evs))
	for _, ev := range evs {
		out = append(out, fmt.Sprintf("%s %s %d", ev.Type, ev.Key, ev.Token))
	}
	return out
}

// requireInOrder checks that indexes strictly increase (each change once).
func requireInOrder(t *testing.T, evs []sdk.Event) {
	t.Helper()
	for i := 1; i < len(evs); i++ {
		require.Greater(t, evs[i].Index, evs[i-1].Index, "event %d (%v) after %v", i, evs[i], evs[i-1])
	}
}

// churn makes changes under prefix through the leader: per key a grant and
// a release, plus one grant left to expire (lease 300 ms), and a change
// outside the prefix. It returns the events a watcher of prefix must see.
func churn(t *testing.T, c *ticketdtest.Cluster, prefix string, keys int) []string {
	t.Helper()
	ctx := ctxT(t)
	var want []string
	for i := range keys {
		key := fmt.Sprintf("%sk%d", prefix, i)
		l := c.Leader(t)
		g, err := c.Lock(l).Acquire(ctx, &ticketv1.AcquireRequest{Key: key, LeaseMs: 60_000, Owner: key})
		require.NoError(t, err)
		_, err = c.Lock(l).Acquire(ctx, &ticketv1.AcquireRequest{Key: "outside/" + key, LeaseMs: 60_000, Owner: key})
		require.NoError(t, err)
		_, err = c.Lock(l).Release(ctx, &ticketv1.ReleaseRequest{Key: key, Token: g.GetToken()})
		require.NoError(t, err)
		want = append(want, fmt.Sprintf("GRANTED %s %d", key, g.GetToken()), fmt.Sprintf("RELEASED %s %d", key, g.GetToken()))
	}
	key := prefix + "short"
	g, err := c.Lock(c.Leader(t)).Acquire(ctx, &ticketv1.AcquireRequest{Key: key, LeaseMs: 300, Owner: "short"})
	require.NoError(t, err)
	return append(want, fmt.Sprintf("GRANTED %s %d", key, g.GetToken()), fmt.Sprintf("EXPIRED %s %d", key, g.GetToken()))
}

// TestWatchEveryChangeOnceInOrder: watchers on the leader and on both
// followers, over Connect, gRPC and gRPC-Web, see every change under the
// prefix once, in order, with the same indexes, and nothing outside it.
func TestWatchEveryChangeOnceInOrder(t *testing.T) {
	matrix(t, func(t *testing.T, backend string) {
		c := start(t, backend)
		from := nextIndex(t, c)
		var recs []*recorder
		for i := range c.Len() {
			recs = append(recs, watchOn(t, c, []int{i}, "w/", sdk.WithStartIndex(from)))
		}
		// The same stream over gRPC and gRPC-Web (Connect above).
		recs = append(recs,
			watchWith(t, c, []sdk.Option{sdk.WithGRPC()}, []int{0}, "w/", sdk.WithStartIndex(from)),
			watchWith(t, c, []sdk.Option{sdk.WithConnectOptions(connect.WithGRPCWeb())}, []int{1}, "w/", sdk.WithStartIndex(from)))
		want := churn(t, c, "w/", 5)
		var first []sdk.Event
		for i, r := range recs {
			got := r.waitFor(t, len(want), fmt.Sprintf("node %d's watcher sees %d events", i, len(want)))
			require.Equal(t, want, describe(got[:len(want)]), "node %d", i)
			requireInOrder(t, got)
			if i == 0 {
				first = got
			} else {
				assert.Equal(t, first, got, "node %d reports the same events with the same indexes", i)
			}
		}
		time.Sleep(100 * time.Millisecond) // nothing more arrives (no duplicates)
		for i, r := range recs {
			assert.Len(t, r.snapshot(), len(want), "node %d", i)
		}
		assert.GreaterOrEqual(t, metric(t, c, 0, "ticketd_watchers"), 2.0, "node 0 serves the Connect and gRPC watchers")
		assert.GreaterOrEqual(t, metric(t, c, 0, "ticketd_watch_events_sent_total"), float64(2*len(want)))
	})
}

// TestWatchResumesAfterNodeKill: the node serving a watch is killed (kill
// -9) half way; the SDK resumes on another node from the last index, with
// no gap and no duplicate.
func TestWatchResumesAfterNodeKill(t *testing.T) {
	t.Parallel() // its own cluster, ports and data dirs: beside the others (see matrix)
	c := start(t, backends()[0])
	f := follower(t, c)
	order := []int{f}
	for _, i := range c.Running() {
		if i != f {
			order = append(order, i)
		}
	}
	r := watchOn(t, c, order, "r/", sdk.WithStartIndex(nextIndex(t, c)))
	want := churn(t, c, "r/a", 3)
	r.waitFor(t, len(want), "first half")
	c.Kill(f)
	want = append(want, churn(t, c, "r/b", 3)...)
	got := r.waitFor(t, len(want), "second half, after the kill")
	require.Equal(t, want, describe(got))
	requireInOrder(t, got)
}

// TestWatchOutOfRangeThenRelist: with a history of 3 events, a watch from
// index 1 fails with OutOfRange and names the oldest retained index; the SDK
// then re-lists (an EventReset and the held locks) and converges with the
// lock table.
func TestWatchOutOfRangeThenRelist(t *testing.T) {
	t.Parallel() // its own cluster, ports and data dirs: beside the others (see matrix)
	c := start(t, backends()[0], "--limits-watch-history-entries=3")
	ctx := ctxT(t)
	l := c.Leader(t)
	for i := range 8 {
		_, err := c.Lock(l).Acquire(ctx, &ticketv1.AcquireRequest{Key: fmt.Sprintf("o/k%d", i), LeaseMs: 60_000, Owner: "o"})
		require.NoError(t, err)
	}
	f := follower(t, c)
	stream, err := c.Lock(f).Watch(ctx, &ticketv1.WatchRequest{Prefix: "o/", StartIndex: 1})
	require.NoError(t, err)
	require.False(t, stream.Receive())
	requireCode(t, connect.CodeOutOfRange, stream.Err())
	var ce *connect.Error
	require.True(t, errors.As(stream.Err(), &ce))
	var hint *ticketv1.WatchOutOfRange
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if h, ok := v.(*ticketv1.WatchOutOfRange); ok {
				hint = h
			}
		}
	}
	require.NotNil(t, hint, "OutOfRange carries the oldest retained index")
	assert.Greater(t, hint.GetOldestIndex(), uint64(1))
	_ = stream.Close()

	r := watchOn(t, c, []int{f}, "o/", sdk.WithStartIndex(1))
	got := r.waitFor(t, 9, "reset and the 8 held locks")
	assert.Equal(t, sdk.EventReset, got[0].Type)
	held := map[string]bool{}
	for _, ev := range got[1:9] {
		assert.True(t, ev.Existing)
		held[ev.Key] = true
	}
	_, err = c.Lock(l).Acquire(ctx, &ticketv1.AcquireRequest{Key: "o/new", LeaseMs: 60_000, Owner: "o"})
	require.NoError(t, err)
	got = r.waitFor(t, 10, "the change after the relist")
	assert.Equal(t, "o/new", got[9].Key)
	assert.False(t, got[9].Existing)
	held[got[9].Key] = true
	list, err := c.Lock(l).ListLocks(ctx, &ticketv1.ListLocksRequest{Prefix: "o/"})
	require.NoError(t, err)
	assert.Len(t, held, len(list.GetLocks()), "relist + watch converge with the table")
	assert.NotZero(t, list.GetReadIndex())
}

// TestWatchEndsOnShutdown: a node shutting down (SIGTERM) ends its watch
// streams with Unavailable instead of holding the shutdown.
func TestWatchEndsOnShutdown(t *testing.T) {
	t.Parallel() // its own cluster, ports and data dirs: beside the others (see matrix)
	c := start(t, backends()[0])
	f := follower(t, c)
	ctx := ctxT(t)
	stream, err := c.Lock(f).Watch(ctx, &ticketv1.WatchRequest{Prefix: "s/", StartIndex: nextIndex(t, c)})
	require.NoError(t, err)
	_, err = c.Lock(c.Leader(t)).Acquire(ctx, &ticketv1.AcquireRequest{Key: "s/a", LeaseMs: 60_000, Owner: "s"})
	require.NoError(t, err)
	require.True(t, stream.Receive(), "%v", stream.Err())
	c.Terminate(f)
	for stream.Receive() {
	}
	requireCode(t, connect.CodeUnavailable, stream.Err())
	_ = stream.Close()
}
