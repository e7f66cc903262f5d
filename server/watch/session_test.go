package watch_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/core"
	"github.com/ticketd/ticketd/server/watch"
)

// TestSessionEndEventPerHolder: a session's end sends one event per holder
// it removed (RELEASED when closed, EXPIRED when its lease ran out), all with
// the ending entry's index, filtered by prefix, live and in the history; a
// grant's event carries the key's mode, limit and the session.
func TestSessionEndEventPerHolder(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		end  func(id uint64) core.Command
		typ  watch.Type
	}{
		{"close", core.CloseSession, watch.Released},
		{"expire", func(id uint64) core.Command { return core.ExpireSession(id, 0) }, watch.Expired},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tb := newTable(t, watch.DefaultConfig())
			w, err := tb.hub.Watch(watch.Request{Prefix: "jobs/"})
			require.NoError(t, err)
			defer w.Close()
			id := tb.apply(core.CreateSession(1000)).Session                                 // 1
			tb.apply(core.Grant("jobs/a", 0, "o").WithSession(id).WithMode(core.ModeShared)) // 2: token 1
			tb.apply(core.Grant("jobs/b", 0, "o").WithSession(id).WithLimit(3))              // 3: token 2
			tb.apply(core.Grant("other", 0, "o").WithSession(id))                            // 4: token 3
			tb.apply(core.Grant("jobs/a", 500, "p").WithMode(core.ModeShared))               // 5: token 4, no session
			tb.apply(core.KeepAliveSession(id))                                              // 6: no event
			tb.apply(c.end(id))                                                              // 7

			var got []string
			for _, ev := range drain(w) {
				got = append(got, fmt.Sprintf("%d %s %s %d %s/%d s%d", ev.Index, ev.Type, ev.Key, ev.Token, ev.Mode, ev.Limit, ev.Session))
			}
			end := c.typ.String()
			assert.Equal(t, []string{
				"2 GRANTED jobs/a 1 shared/0 s1",
				"3 GRANTED jobs/b 2 exclusive/3 s1",
				"5 GRANTED jobs/a 4 shared/0 s0",
				"7 " + end + " jobs/a 1 shared/0 s1",
				"7 " + end + " jobs/b 2 exclusive/3 s1",
			}, got)

			resumed, err := tb.hub.Watch(watch.Request{StartIndex: 7})
			require.NoError(t, err)
			defer resumed.Close()
			var keys []string
			for _, ev := range drain(resumed) {
				keys = append(keys, fmt.Sprintf("%d %s %s", ev.Index, ev.Type, ev.Key))
			}
			assert.Equal(t, []string{"7 " + end + " jobs/a", "7 " + end + " jobs/b", "7 " + end + " other"}, keys)
		})
	}
}

// TestAppendEventsOfLateSessionExpiry: an ExpireSession that did not end its
// session (kept alive since) sends nothing.
func TestAppendEventsOfLateSessionExpiry(t *testing.T) {
	t.Parallel()
	got := watch.AppendEvents(nil, 9, core.ExpireSession(4, 3), core.Result{Outcome: core.OutcomeExpired})
	assert.Empty(t, got)
}
