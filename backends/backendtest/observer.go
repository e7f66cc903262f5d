package backendtest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ticketd/ticketd/backends"
)

// recordingObserver is a backends.Observer that counts what it is told.
type recordingObserver struct {
	mu               sync.Mutex
	appends, entries int
	snapshots        int
	snapBytes        int64
	proposed         int
	applied          int
}

func (o *recordingObserver) Proposed(time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.proposed++
}

func (o *recordingObserver) Applied(entries int, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.applied += entries
}

func (o *recordingObserver) LogAppended(entries int, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.appends++
	o.entries += entries
}

func (o *recordingObserver) SnapshotTaken(bytes int64, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.snapshots++
	o.snapBytes += bytes
}

func (o *recordingObserver) counts() (appends, entries, snapshots int, snapBytes int64, proposed, applied int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.appends, o.entries, o.snapshots, o.snapBytes, o.proposed, o.applied
}

// testObserver: Config.Observer hears of the leader's durable log appends
// (at least one entry per proposal), the snapshots it takes, every
// successful proposal and the applied entries.
func testObserver(t *testing.T, open Factory) {
	ctx := testContext(t)
	c := NewCluster(t, open)
	obs := map[string]*recordingObserver{}
	c.Tune = func(cfg *backends.Config) {
		cfg.SnapshotThreshold, cfg.TrailingLogs = 8, 4
		o := &recordingObserver{}
		obs[cfg.ID] = o
		cfg.Observer = o
	}
	c.Start(3)
	l := c.WaitLeader()
	for i := 0; i < 20; i++ {
		mustGrant(ctx, t, l.Node(), fmt.Sprintf("k%02d", i))
	}
	c.EnsureSame()
	c.waitFor("the leader's observer to hear of appends and a snapshot", func() bool {
		appends, entries, snaps, bytes, proposed, applied := obs[l.ID].counts()
		return appends > 0 && entries >= 20 && snaps > 0 && bytes > 0 && proposed >= 20 && applied >= 20
	})
}
