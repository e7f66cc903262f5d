package watch_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/core"
	"github.com/ticketd/ticketd/server/watch"
)

// table applies commands to a real core.StateMachine and feeds the hub, as
// a node's apply hook does.
type table struct {
	t   *testing.T
	sm  *core.StateMachine
	hub *watch.Hub
	idx uint64
}

func newTable(t *testing.T, cfg watch.Config) *table {
	t.Helper()
	tb := &table{t: t, sm: core.NewStateMachine()}
	cfg.Applied = tb.sm.AppliedIndex
	h, err := watch.New(cfg)
	require.NoError(t, err)
	tb.hub = h
	t.Cleanup(h.Close)
	return tb
}

func (tb *table) apply(cmd core.Command) core.Result {
	tb.idx++
	res, err := tb.sm.Apply(tb.idx, cmd)
	require.NoError(tb.t, err)
	tb.hub.Apply(tb.idx, cmd, res)
	return res
}

// drain returns the watcher's backlog and everything buffered now.
func drain(w *watch.Watcher) []watch.Event {
	out := append([]watch.Event(nil), w.Backlog()...)
	for {
		select {
		case ev := <-w.Events():
			out = append(out, ev)
		default:
			return out
		}
	}
}

func TestEventOf(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		cmd  core.Command
		res  core.Result
		want watch.Event
		ok   bool
	}{
		{"created_grant", core.Grant("a", 1000, "o"), core.Result{Outcome: core.OutcomeGranted, Token: 3, LeaseMS: 1000, Created: true},
			watch.Event{Type: watch.Granted, Key: "a", Token: 3, Owner: "o", LeaseMS: 1000, Index: 7}, true},
		{"retry_grant_is_renewed", core.Grant("a", 1000, "o"), core.Result{Outcome: core.OutcomeGranted, Token: 3, LeaseMS: 1000},
			watch.Event{Type: watch.Renewed, Key: "a", Token: 3, LeaseMS: 1000, Index: 7}, true},
		{"rejected_grant", core.Grant("a", 1000, "o"), core.Result{Outcome: core.OutcomeGrantRejected, Token: 3}, watch.Event{}, false},
		{"renew", core.Renew("a", 3), core.Result{Outcome: core.OutcomeRenewed, LeaseMS: 500},
			watch.Event{Type: watch.Renewed, Key: "a", Token: 3, LeaseMS: 500, Index: 7}, true},
		{"release", core.Release("a", 3), core.Result{Outcome: core.OutcomeReleased},
			watch.Event{Type: watch.Released, Key: "a", Token: 3, Index: 7}, true},
		{"release_not_found", core.Release("a", 3), core.Result{Outcome: core.OutcomeNotFound}, watch.Event{}, false},
		{"expire", core.Expire("a", 3), core.Result{Outcome: core.OutcomeExpired, Existed: true},
			watch.Event{Type: watch.Expired, Key: "a", Token: 3, Index: 7}, true},
		{"late_expire", core.Expire("a", 3), core.Result{Outcome: core.OutcomeExpired}, watch.Event{}, false},
		{"noop", core.Noop(), core.Result{Outcome: core.OutcomeNoop}, watch.Event{}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, ok := watch.EventOf(7, c.cmd, c.res)
			assert.Equal(t, c.ok, ok)
			assert.Equal(t, c.want, got)
		})
	}
}

func TestWatchSeesEveryChangeOnceInOrder(t *testing.T) {
	t.Parallel()
	tb := newTable(t, watch.DefaultConfig())
	w, err := tb.hub.Watch(watch.Request{Prefix: "jobs/"})
	require.NoError(t, err)
	defer w.Close()
	g := tb.apply(core.Grant("jobs/a", 1000, "o1"))
	tb.apply(core.Grant("other", 1000, "o2"))
	tb.apply(core.Grant("jobs/a", 1000, "o1")) // retry: renewed
	tb.apply(core.Renew("jobs/a", g.Token))
	tb.apply(core.Release("jobs/a", g.Token))
	tb.apply(core.Release("jobs/a", g.Token)) // not held: no event
	g2 := tb.apply(core.Grant("jobs/b", 1000, "o3"))
	tb.apply(core.Expire("jobs/b", g2.Token))

	var got []string
	for _, ev := range drain(w) {
		got = append(got, fmt.Sprintf("%d %s %s %d", ev.Index, ev.Type, ev.Key, ev.Token))
	}
	assert.Equal(t, []string{
		"1 GRANTED jobs/a 1", "3 RENEWED jobs/a 1", "4 RENEWED jobs/a 1",
		"5 RELEASED jobs/a 1", "7 GRANTED jobs/b 3", "8 EXPIRED jobs/b 3",
	}, got)
}

func TestResumeFromIndex(t *testing.T) {
	t.Parallel()
	tb := newTable(t, watch.DefaultConfig())
	for i := range 5 {
		tb.apply(core.Grant(fmt.Sprintf("k%d", i), 1000, "o"))
	}
	w, err := tb.hub.Watch(watch.Request{StartIndex: 3})
	require.NoError(t, err)
	defer w.Close()
	tb.apply(core.Grant("k5", 1000, "o"))
	var idx []uint64
	for _, ev := range drain(w) {
		idx = append(idx, ev.Index)
	}
	assert.Equal(t, []uint64{3, 4, 5, 6}, idx)
}

func TestStartIndexZeroMeansFromNow(t *testing.T) {
	t.Parallel()
	tb := newTable(t, watch.DefaultConfig())
	tb.apply(core.Grant("a", 1000, "o"))
	w, err := tb.hub.Watch(watch.Request{})
	require.NoError(t, err)
	defer w.Close()
	assert.Equal(t, uint64(2), w.StartIndex())
	assert.Empty(t, drain(w))
}

func TestCompactedBelowRetainedHistory(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		cfg    watch.Config
		oldest uint64
	}{
		{"by_entries", watch.Config{MaxHistoryEntries: 3, MaxHistoryBytes: 1 << 20, BufferEvents: 8}, 8},
		{"by_bytes", watch.Config{MaxHistoryEntries: 100, MaxHistoryBytes: 2 * (64 + 3 + 1), BufferEvents: 8}, 9},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tb := newTable(t, c.cfg)
			for i := range 10 {
				tb.apply(core.Grant(fmt.Sprintf("k%02d", i), 1000, "o"))
			}
			require.Equal(t, c.oldest, tb.hub.OldestIndex())
			_, err := tb.hub.Watch(watch.Request{StartIndex: c.oldest - 1})
			var ce *watch.CompactedError
			require.ErrorAs(t, err, &ce)
			assert.ErrorIs(t, err, watch.ErrCompacted)
			assert.Equal(t, c.oldest, ce.OldestIndex)
			w, err := tb.hub.Watch(watch.Request{StartIndex: c.oldest})
			require.NoError(t, err)
			defer w.Close()
			assert.Len(t, drain(w), 10-int(c.oldest)+1)
		})
	}
}

func TestNothingFedYetStartsAfterApplied(t *testing.T) {
	t.Parallel()
	sm := core.NewStateMachine()
	_, err := sm.Apply(41, core.Grant("a", 1000, "o")) // as if restored from a snapshot
	require.NoError(t, err)
	cfg := watch.DefaultConfig()
	cfg.Applied = sm.AppliedIndex
	h, err := watch.New(cfg)
	require.NoError(t, err)
	defer h.Close()
	_, err = h.Watch(watch.Request{StartIndex: 41})
	var ce *watch.CompactedError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, uint64(42), ce.OldestIndex)
	w, err := h.Watch(watch.Request{StartIndex: 42})
	require.NoError(t, err)
	w.Close()
}

func TestSlowWatcherIsEndedAndApplyGoesOn(t *testing.T) {
	t.Parallel()
	tb := newTable(t, watch.Config{MaxHistoryEntries: 1000, MaxHistoryBytes: 1 << 20, BufferEvents: 2})
	slow, err := tb.hub.Watch(watch.Request{})
	require.NoError(t, err)
	defer slow.Close()
	fast, err := tb.hub.Watch(watch.Request{})
	require.NoError(t, err)
	defer fast.Close()
	var fastGot []watch.Event
	for i := range 10 {
		tb.apply(core.Grant(fmt.Sprintf("k%d", i), 1000, "o")) // returns: never waits for slow
		fastGot = append(fastGot, drain(fast)...)
	}
	<-slow.Done()
	assert.ErrorIs(t, slow.Err(), watch.ErrSlow)
	got := drain(slow)
	require.Len(t, got, 2)
	assert.Len(t, fastGot, 10)
	assert.Equal(t, uint64(1), tb.hub.Dropped())
	assert.Equal(t, 1, tb.hub.Watchers())

	// It resumes from the index after its last event, without a gap.
	again, err := tb.hub.Watch(watch.Request{StartIndex: got[len(got)-1].Index + 1})
	require.NoError(t, err)
	defer again.Close()
	assert.Len(t, drain(again), 8)
}

func TestMaxWatchers(t *testing.T) {
	t.Parallel()
	tb := newTable(t, watch.Config{MaxHistoryEntries: 10, MaxHistoryBytes: 1 << 20, BufferEvents: 1, MaxWatchers: 1})
	w, err := tb.hub.Watch(watch.Request{})
	require.NoError(t, err)
	_, err = tb.hub.Watch(watch.Request{})
	require.ErrorIs(t, err, watch.ErrTooManyWatchers)
	w.Close()
	w.Close() // twice is fine
	w2, err := tb.hub.Watch(watch.Request{})
	require.NoError(t, err)
	w2.Close()
}

func TestCloseEndsWatchers(t *testing.T) {
	t.Parallel()
	tb := newTable(t, watch.DefaultConfig())
	w, err := tb.hub.Watch(watch.Request{})
	require.NoError(t, err)
	tb.hub.Close()
	<-w.Done()
	assert.ErrorIs(t, w.Err(), watch.ErrClosed)
	_, err = tb.hub.Watch(watch.Request{})
	assert.ErrorIs(t, err, watch.ErrClosed)
}

func TestTokenGapResetsHistory(t *testing.T) {
	t.Parallel()
	tb := newTable(t, watch.DefaultConfig())
	tb.apply(core.Grant("a", 1000, "o"))
	w, err := tb.hub.Watch(watch.Request{StartIndex: 1})
	require.NoError(t, err)
	defer w.Close()
	// Entries 2..9 reach the state machine but not the hub (a snapshot
	// installed from the leader); the next grant's token shows the gap.
	for i := range 8 {
		tb.idx++
		_, err := tb.sm.Apply(tb.idx, core.Grant(fmt.Sprintf("s%d", i), 1000, "o"))
		require.NoError(t, err)
	}
	tb.apply(core.Grant("b", 1000, "o"))
	<-w.Done()
	assert.ErrorIs(t, w.Err(), watch.ErrCompacted)
	assert.Equal(t, uint64(10), tb.hub.OldestIndex())
	_, err = tb.hub.Watch(watch.Request{StartIndex: 2})
	assert.True(t, errors.Is(err, watch.ErrCompacted))
}

func TestRestoredResetsHistory(t *testing.T) {
	t.Parallel()
	tb := newTable(t, watch.DefaultConfig())
	tb.apply(core.Grant("a", 1000, "o"))
	tb.hub.Restored(20)
	assert.Equal(t, uint64(21), tb.hub.OldestIndex())
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	require.NoError(t, watch.DefaultConfig().Validate())
	bad := watch.DefaultConfig()
	bad.BufferEvents = 0
	assert.ErrorIs(t, bad.Validate(), core.ErrInvalidArgument)
	_, err := watch.New(bad)
	assert.ErrorIs(t, err, core.ErrInvalidArgument)
}

func TestSnapshotThenEventsWithoutOverlap(t *testing.T) {
	t.Parallel()
	tb := newTable(t, watch.DefaultConfig())
	tb.apply(core.Grant("a", 1000, "o"))
	tb.apply(core.Grant("b", 1000, "o"))
	var listed []core.Lock
	w, err := tb.hub.Watch(watch.Request{StartIndex: 1, Snapshot: func() uint64 {
		listed = tb.sm.Range("", "", 0)
		return tb.sm.AppliedIndex()
	}})
	require.NoError(t, err)
	defer w.Close()
	assert.Len(t, listed, 2)
	assert.Equal(t, uint64(3), w.StartIndex())
	tb.apply(core.Grant("c", 1000, "o"))
	got := drain(w)
	require.Len(t, got, 1)
	assert.Equal(t, "c", got[0].Key)
}

// TestEndAllEndsEveryWatcherAndKeepsServing: after a policy reload every open
// watch ends with the given error (each client must be authorized again), and
// new watches are still accepted.
func TestEndAllEndsEveryWatcherAndKeepsServing(t *testing.T) {
	tb := newTable(t, watch.Config{MaxHistoryEntries: 100, MaxHistoryBytes: 1 << 20, BufferEvents: 16})
	w1, err := tb.hub.Watch(watch.Request{Prefix: "a/"})
	require.NoError(t, err)
	w2, err := tb.hub.Watch(watch.Request{Prefix: ""})
	require.NoError(t, err)

	tb.hub.EndAll(watch.ErrCredentialsChanged)
	for _, w := range []*watch.Watcher{w1, w2} {
		<-w.Done()
		assert.ErrorIs(t, w.Err(), watch.ErrCredentialsChanged)
	}
	assert.Zero(t, tb.hub.Watchers())

	w3, err := tb.hub.Watch(watch.Request{Prefix: "a/"})
	require.NoError(t, err, "the hub keeps serving after EndAll")
	tb.apply(core.Grant("a/1", 1000, "o"))
	assert.Len(t, drain(w3), 1)
}
