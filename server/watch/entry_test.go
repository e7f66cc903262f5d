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

// openSession applies a CreateSession and n grants under it (keys
// prefix+"0".., one event each) and returns the session's id.
func openSession(tb *table, prefix string, n int) uint64 {
	id := tb.apply(core.CreateSession(1000)).Session
	for i := range n {
		tb.apply(core.Grant(fmt.Sprintf("%s%d", prefix, i), 0, "o").WithSession(id))
	}
	return id
}

// lines renders events as "index TYPE key" lines.
func lines(evs []watch.Event) []string {
	out := make([]string, 0, len(evs))
	for _, ev := range evs {
		out = append(out, fmt.Sprintf("%d %s %s", ev.Index, ev.Type, ev.Key))
	}
	return out
}

// TestEntryDeliveredWholeOrNotAtAll: an entry (a session's end) whose events
// under a watcher's prefix do not all fit in the watcher's free buffer ends
// the watcher with ErrSlow before the first of them, so the watcher holds no
// part of it; a watch resumed at the entry's index gets it whole. Events
// outside the prefix take no room.
func TestEntryDeliveredWholeOrNotAtAll(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		buffer   int
		prefix   string
		grants   int // locks under the session, keys "jobs/0".. (one GRANTED event each)
		outside  int // more locks under it outside "jobs/"
		buffered int // GRANTED events the watcher has not read when the session ends
		ended    bool
	}{
		{name: "fits_in_free_buffer", buffer: 8, prefix: "jobs/", grants: 3, buffered: 3, ended: false},
		{name: "larger_than_free_buffer", buffer: 8, prefix: "jobs/", grants: 5, buffered: 5, ended: true},
		{name: "larger_than_whole_buffer", buffer: 4, prefix: "jobs/", grants: 6, buffered: 0, ended: true},
		{name: "only_events_under_prefix_count", buffer: 4, prefix: "jobs/", grants: 2, outside: 7, buffered: 2, ended: false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg := watch.DefaultConfig()
			cfg.BufferEvents = c.buffer
			tb := newTable(t, cfg)
			id := tb.apply(core.CreateSession(1000)).Session
			w, err := tb.hub.Watch(watch.Request{Prefix: c.prefix})
			require.NoError(t, err)
			defer w.Close()
			granted := []string{}
			for i := range c.grants {
				key := fmt.Sprintf("jobs/%d", i)
				tb.apply(core.Grant(key, 0, "o").WithSession(id))
				if i >= c.grants-c.buffered {
					granted = append(granted, fmt.Sprintf("%d GRANTED %s", tb.idx, key))
					continue
				}
				<-w.Events() // read: keep only the last c.buffered unread
			}
			for i := range c.outside {
				tb.apply(core.Grant(fmt.Sprintf("other/%d", i), 0, "o").WithSession(id))
			}
			tb.apply(core.CloseSession(id))
			end := tb.idx
			var released []string
			for i := range c.grants {
				released = append(released, fmt.Sprintf("%d RELEASED jobs/%d", end, i))
			}

			got := lines(drain(w))
			if c.ended {
				require.ErrorIs(t, w.Err(), watch.ErrSlow)
				assert.Equal(t, granted, got, "the watcher holds nothing of the entry at %d", end)
				assert.Equal(t, uint64(1), tb.hub.Dropped())
			} else {
				require.NoError(t, w.Err())
				assert.Equal(t, append(granted, released...), got)
			}

			resumed, err := tb.hub.Watch(watch.Request{Prefix: c.prefix, StartIndex: end})
			require.NoError(t, err)
			defer resumed.Close()
			assert.Equal(t, released, lines(drain(resumed)), "resuming at the entry's index gets it whole")
		})
	}
}

// TestHistoryKeepsOrDropsWholeEntries: the history drops the oldest entries
// with all their events, never part of one, and keeps the newest entry whole
// even beyond its bounds, so a watcher ended in it can resume at its index.
func TestHistoryKeepsOrDropsWholeEntries(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		set  func(*watch.Config)
	}{
		{"event_bound", func(cfg *watch.Config) { cfg.MaxHistoryEntries = 4 }},
		{"byte_bound", func(cfg *watch.Config) { cfg.MaxHistoryBytes = 4 * 70 }}, // four events of keys "k/N"
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg := watch.DefaultConfig()
			c.set(&cfg)
			tb := newTable(t, cfg)
			id := openSession(tb, "k/", 6)  // 1: session; 2..7: grants
			tb.apply(core.CloseSession(id)) // 8: six events, more than the bounds
			tb.apply(core.Noop())           // 9: no event; entry 8 is still the newest with events
			assert.Equal(t, uint64(8), tb.hub.OldestIndex(), "the newest entry is kept whole")
			w, err := tb.hub.Watch(watch.Request{StartIndex: 8})
			require.NoError(t, err)
			assert.Len(t, drain(w), 6)
			w.Close()

			tb.apply(core.Grant("k/x", 1000, "o")) // 10: entry 8 goes, all of it
			assert.Equal(t, uint64(9), tb.hub.OldestIndex())
			_, err = tb.hub.Watch(watch.Request{StartIndex: 8})
			var ce *watch.CompactedError
			require.True(t, errors.As(err, &ce), "got %v", err)
			assert.Equal(t, uint64(9), ce.OldestIndex)
			w, err = tb.hub.Watch(watch.Request{StartIndex: 9})
			require.NoError(t, err)
			defer w.Close()
			assert.Equal(t, []string{"10 GRANTED k/x"}, lines(drain(w)))
		})
	}
}
