package backendtest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ticketd/ticketd/backends"
)

// progressObserver is a backends.PeerObserver that keeps the last
// FollowerProgress report per peer.
type progressObserver struct {
	recordingObserver
	mu      sync.Mutex
	reports int
	last    map[string]followerReport
}

// followerReport is one FollowerProgress call.
type followerReport struct {
	lag     uint64
	contact time.Time
}

var _ backends.PeerObserver = (*progressObserver)(nil)

func (o *progressObserver) FollowerProgress(peer string, lag uint64, contact time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reports++
	if o.last == nil {
		o.last = map[string]followerReport{}
	}
	o.last[peer] = followerReport{lag: lag, contact: contact}
}

func (o *progressObserver) PeerTransportError(string, string) {}

// snapshot returns the report count and a copy of the last reports.
func (o *progressObserver) snapshot() (int, map[string]followerReport) {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make(map[string]followerReport, len(o.last))
	for k, v := range o.last {
		out[k] = v
	}
	return o.reports, out
}

// RunFollowerProgress checks a backend's backends.PeerObserver reports
// (docs/operations.md#health-and-monitoring): on a real three-node cluster the
// leader reports each follower, caught up (lag 0) with a last contact;
// followers report nothing; once a follower is killed, the leader keeps
// reporting it with a growing lag and a last contact that stops while the
// other follower's advances. Each backend's progress_test.go runs it.
func RunFollowerProgress(t *testing.T, open Factory) {
	ctx := testContext(t)
	c := NewCluster(t, open)
	obs := map[string]*progressObserver{}
	var mu sync.Mutex
	c.Tune = func(cfg *backends.Config) {
		o := &progressObserver{}
		mu.Lock()
		obs[cfg.ID] = o
		mu.Unlock()
		cfg.Observer = o
	}
	c.Start(3)
	l := c.WaitLeader()
	mustGrant(ctx, t, l.Node(), "progress")
	followers := c.Followers(l)
	c.waitFor("the leader to report both followers caught up and heard from", func() bool {
		_, last := obs[l.ID].snapshot()
		for _, f := range followers {
			r, ok := last[f.ID]
			if !ok || r.lag != 0 || r.contact.IsZero() {
				return false
			}
		}
		return len(last) == 2
	})
	// Followers report nothing while the leader reports at least twice more.
	before := map[string]int{}
	for _, f := range followers {
		before[f.ID], _ = obs[f.ID].snapshot()
	}
	n0, _ := obs[l.ID].snapshot()
	c.waitFor("two more rounds of leader reports", func() bool {
		n, _ := obs[l.ID].snapshot()
		return n >= n0+4
	})
	if c.Leader() == l {
		for _, f := range followers {
			n, _ := obs[f.ID].snapshot()
			if n != before[f.ID] {
				t.Fatalf("follower %s reported follower progress %d times", f.ID, n-before[f.ID])
			}
		}
	}

	dead, alive := followers[0], followers[1]
	c.Kill(dead)
	for i := range 5 {
		mustGrant(ctx, t, l.Node(), fmt.Sprintf("after-%d", i))
	}
	c.waitFor("the dead follower's lag to grow and its last contact to stop", func() bool {
		_, last := obs[l.ID].snapshot()
		d, a := last[dead.ID], last[alive.ID]
		return d.lag >= 5 && a.lag == 0 && a.contact.Sub(d.contact) > time.Second
	})
}
