//go:build unix

package backendtest

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/core"
)

// The workload of RunDiskBound: a table of diskBoundLocks locks whose keys
// are padded to about diskBoundKeyBytes, so that its snapshot (~1.5 MB) is
// above badger's 1 MiB ValueThreshold as a real million-lock table's is,
// then diskBoundRounds rounds of renewing every lock: tens of snapshot
// cycles on either backend, and ~90 MB of log, past the point where badger
// compacts its level-0 tables and drops the deleted entries.
const (
	diskBoundLocks     = 2000
	diskBoundKeyBytes  = 700
	diskBoundRounds    = 56
	diskBoundWorkers   = 32
	diskBoundThreshold = 256 // Config.SnapshotThreshold
	diskBoundTrailing  = 256 // Config.TrailingLogs
	// diskBoundEntryOverhead is what a log store adds to an entry's data
	// on disk, in bytes, at most: a key or frame header, a CRC, the index,
	// term and type.
	diskBoundEntryOverhead = 64
)

// diskBoundFixed is, per log store, the disk space a data dir holds
// whatever the table, in bytes, beyond what it holds right after the
// bootstrap (which the test measures: preallocated write-ahead log
// segments, badger's files): for badger, the memtable write-ahead log
// being written, the level-0 tables it is flushed to, up to five
// (badger's NumLevelZeroTables) before a compaction merges them and drops
// the deleted entries, and the tables that merge writes: eight 16 MiB
// memtables' worth (backends.BadgerOptions) — measured, the data dir
// saws between ~9 MB and ~84 MB; for the write-ahead logs,
// the next segment, which etcd's WAL preallocates in the background, and
// one more segment than the retained entries need, since compaction drops
// whole segments (16 MiB on both backends: etcd's and raft-wal's).
var diskBoundFixed = map[string]int64{
	backends.LogStoreBadger: 8 * (16 << 20),
	backends.LogStoreWAL:    2 * (16 << 20),
}

// RunDiskBound (docs/design.md#storage-and-recovery) renews a table of
// locks on a one-node cluster for several snapshot cycles and checks after
// every round that the data dir's allocated size stays within
// 3 × (snapshot + retained log) + the store's fixed overhead: superseded
// snapshots and compacted entries are reclaimed, whatever the log store.
// The retained log is at most the log a snapshot waits for
// (backends.SnapshotLogPercent of the snapshot, and at least
// SnapshotThreshold entries) plus TrailingLogs entries. Sizes are measured
// in allocated blocks (du), so sparse and preallocated files count for
// what they hold on disk. It is not timed.
func RunDiskBound(t *testing.T, open Factory) {
	ctx := workloadContext(t)
	c := NewCluster(t, open)
	obs := &recordingObserver{}
	c.Tune = func(cfg *backends.Config) {
		cfg.SnapshotThreshold, cfg.TrailingLogs = diskBoundThreshold, diskBoundTrailing
		cfg.Observer = obs
	}
	p := c.Start(1)[0]
	l := c.WaitLeader()
	store, err := backends.ReadLogStore(p.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	base, _ := diskUsage(t, p.DataDir)

	keys := make([]string, diskBoundLocks)
	tokens := make([]uint64, diskBoundLocks)
	for i := range keys {
		keys[i] = fmt.Sprintf("disk/%05d/%s", i, strings.Repeat("k", diskBoundKeyBytes))
	}
	inParallel(ctx, t, diskBoundLocks, func(ctx context.Context, i int) error {
		res, err := l.Node().Propose(ctx, core.Grant(keys[i], leaseMS, "owner"))
		if err == nil && res.Outcome != core.OutcomeGranted {
			err = fmt.Errorf("outcome %v", res.Outcome)
		}
		tokens[i] = res.Token
		return err
	})
	snapBytes, err := l.StateMachine().Snapshot().WriteTo(io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	renew, err := core.Encode(core.Renew(keys[0], tokens[0]))
	if err != nil {
		t.Fatal(err)
	}
	entryBytes := int64(len(renew)) + diskBoundEntryOverhead
	retainedLog := backends.SnapshotLogPercent*snapBytes/100 + (diskBoundThreshold+diskBoundTrailing)*entryBytes
	bound := 3*(snapBytes+retainedLog) + base + diskBoundFixed[store]
	t.Logf("%s: snapshot %d bytes, renew entry about %d bytes, retained log up to %d bytes, bootstrap data dir %d bytes: bound %d bytes",
		store, snapBytes, entryBytes, retainedLog, base, bound)

	var peak int64
	for round := 0; round < diskBoundRounds; round++ {
		inParallel(ctx, t, diskBoundLocks, func(ctx context.Context, i int) error {
			res, err := l.Node().Propose(ctx, core.Renew(keys[i], tokens[i]))
			if err == nil && res.Outcome != core.OutcomeRenewed {
				err = fmt.Errorf("outcome %v", res.Outcome)
			}
			return err
		})
		alloc, apparent := diskUsage(t, p.DataDir)
		peak = max(peak, alloc)
		_, _, snaps, _, _, _ := obs.counts()
		t.Logf("round %d: applied %d, %d snapshots, data dir %d bytes allocated (%d apparent)",
			round, l.StateMachine().AppliedIndex(), snaps, alloc, apparent)
		if alloc > bound {
			t.Fatalf("round %d: the data dir holds %d bytes, above the bound %d = 3 × (snapshot %d + retained log %d) + %d fixed; "+
				"superseded snapshots or compacted entries are not reclaimed", round, alloc, bound, snapBytes, retainedLog, base+diskBoundFixed[store])
		}
	}
	if _, _, snaps, _, _, _ := obs.counts(); snaps < 3 {
		t.Fatalf("%d snapshots in %d renewals; the test wants several snapshot cycles", snaps, diskBoundRounds*diskBoundLocks)
	}
	t.Logf("%s: peak data dir %d bytes allocated, bound %d; load average %s", store, peak, bound, loadAverage())
}

// workloadContext bounds a long workload by the test binary's own limit
// (go test -timeout) less a minute for cleanup, not by a fixed budget: the
// 112,000 renewals of RunDiskBound take about 15 s on a quiet 2-core
// machine and over 40 s on a starved one, and how long they take is not
// what the test checks. Without a -timeout, the workload is not bounded.
func workloadContext(t *testing.T) context.Context {
	dl, ok := t.Deadline()
	if !ok {
		return context.Background()
	}
	ctx, cancel := context.WithDeadline(context.Background(), dl.Add(-time.Minute))
	t.Cleanup(cancel)
	return ctx
}

// inParallel calls fn(ctx, i) for every i in [0, n) from diskBoundWorkers
// goroutines and fails t with the first error.
func inParallel(ctx context.Context, t *testing.T, n int, fn func(ctx context.Context, i int) error) {
	t.Helper()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  int
	)
	for range diskBoundWorkers {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				stop := first != nil || i >= n
				mu.Unlock()
				if stop {
					return
				}
				if err := fn(ctx, i); err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("item %d: %w", i, err)
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		t.Fatal(first)
	}
}

// diskUsage is backends.DiskUsage of dir; an error ends the test.
func diskUsage(t *testing.T, dir string) (allocated, apparent int64) {
	t.Helper()
	allocated, apparent, err := backends.DiskUsage(dir)
	if err != nil {
		t.Fatal(err)
	}
	return allocated, apparent
}

// loadAverage returns the 1, 5 and 15 minute load averages of the machine
// (/proc/loadavg), or "unknown": a size measured on a busy machine says so.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
