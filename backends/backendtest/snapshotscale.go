package backendtest

import (
	"fmt"
	"testing"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/core"
)

// testSnapshotsScaleWithTable (backends.SnapshotDue, the Raft thesis'
// expansion-factor rule of §5.1.1; docs/design.md#storage-and-recovery):
// once the table is big, a snapshot waits until the log since the last one
// is half as big as it (SnapshotLogPercent), instead of coming every
// SnapshotThreshold entries — and still after a restart on the same data.
// 100 locks with 200-byte keys make a ~25 KB snapshot and each renewal a
// ~220-byte entry, so 400 renewals take about eight snapshots, not
// 400/16 = 25. The count is of snapshots, not of time.
func testSnapshotsScaleWithTable(t *testing.T, open Factory) {
	ctx := testContext(t)
	c := NewCluster(t, open)
	obs := &recordingObserver{}
	c.Tune = func(cfg *backends.Config) {
		cfg.SnapshotThreshold, cfg.TrailingLogs = 16, 4
		cfg.Observer = obs
	}
	p := c.Start(1)[0]
	l := c.WaitLeader()
	const locks, renewals, threshold = 100, 400, 16
	keys := make([]string, locks)
	tokens := make([]uint64, locks)
	for i := range keys {
		keys[i] = fmt.Sprintf("%03d/%0200d", i, 0)
		res, err := l.Node().Propose(ctx, core.Grant(keys[i], leaseMS, "o"))
		if err != nil || res.Outcome != core.OutcomeGranted {
			t.Fatalf("grant %s: %+v, %v", keys[i], res, err)
		}
		tokens[i] = res.Token
	}
	snapshots := func() int {
		_, _, n, _, _, _ := obs.counts()
		return n
	}
	c.waitFor("a snapshot of the filled table", func() bool { return snapshots() > 0 })

	renew := func(n Node) {
		t.Helper()
		before := snapshots()
		for i := 0; i < renewals; i++ {
			res, err := n.Propose(ctx, core.Renew(keys[i%locks], tokens[i%locks]))
			if err != nil || res.Outcome != core.OutcomeRenewed {
				t.Fatalf("renew %s: %+v, %v", keys[i%locks], res, err)
			}
		}
		// A snapshot asked for by the last renewals may still be written:
		// wait until the count is at least the lower bound, then compare.
		c.waitFor("the log to be compacted during the renewals", func() bool { return snapshots()-before >= 2 })
		taken := snapshots() - before
		t.Logf("%d snapshots in %d renewals of a table of %d locks", taken, renewals, locks)
		if taken > 14 {
			t.Fatalf("%d snapshots in %d renewals: a snapshot of the whole table every %d entries, not once the log is half as big as it",
				taken, renewals, threshold)
		}
	}
	renew(l.Node())

	c.Kill(p)
	c.Restart(p)
	renew(c.WaitLeader().Node())
}
