package etcd_test

import (
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/backendtest"
	"github.com/ticketd/ticketd/core"
)

// snapshotCounter is a backends.Observer that counts the snapshots a node
// takes.
type snapshotCounter struct{ taken atomic.Int64 }

func (o *snapshotCounter) LogAppended(int, time.Duration)     {}
func (o *snapshotCounter) SnapshotTaken(int64, time.Duration) { o.taken.Add(1) }
func (o *snapshotCounter) Proposed(time.Duration)             {}
func (o *snapshotCounter) Applied(int, time.Duration)         {}

// TestApplyGoesOnWhileSnapshotIsWritten (docs/design.md#storage-and-recovery):
// the snapshot is written from a copy-on-write copy of the state machine on
// a goroutine of its own, so with its writer blocked, proposals still
// commit and apply. A crash at that point (an image of the live data dir)
// and a clean restart after the snapshot and its compaction both come back
// with every acknowledged grant; on both log stores.
func TestApplyGoesOnWhileSnapshotIsWritten(t *testing.T) {
	for _, store := range backends.LogStores() {
		t.Run(store, func(t *testing.T) {
			ctx := testCtx(t)
			dir, addr := t.TempDir(), backendtest.FreeAddr(t)
			obs := &snapshotCounter{}
			tune := func(cfg *backends.Config) {
				cfg.LogStore = store
				cfg.SnapshotThreshold, cfg.TrailingLogs = 16, 4
				cfg.Observer = obs
			}
			s := openSingle(t, dir, addr, tune)
			entered := make(chan uint64, 1)
			release := make(chan struct{})
			unblock := sync.OnceFunc(func() { close(release) })
			t.Cleanup(unblock) // before the node's Close (cleanups run last first)
			var blocked atomic.Bool
			s.n.SetSnapshotHook(func(index uint64) {
				if blocked.CompareAndSwap(false, true) {
					entered <- index
					<-release
				}
			})

			acked := map[string]uint64{}
			grant := func(key string) {
				res, err := s.n.Propose(ctx, core.Grant(key, 60_000, "owner"))
				require.NoError(t, err, "grant %s", key)
				require.Equal(t, core.OutcomeGranted, res.Outcome, "grant %s", key)
				acked[key] = res.Token
			}
			var snapAt uint64
			for i := 0; snapAt == 0; i++ {
				require.Less(t, i, 10_000, "no snapshot started")
				grant(fmt.Sprintf("before/%05d", i))
				select {
				case snapAt = <-entered:
				default:
				}
			}
			// The snapshot's writer is blocked: the loop commits and applies.
			const during = 200
			for i := 0; i < during; i++ {
				grant(fmt.Sprintf("during/%05d", i))
			}
			require.GreaterOrEqual(t, s.sm.AppliedIndex(), snapAt+during)
			require.Zero(t, obs.taken.Load(), "no snapshot finished while its writer was blocked")
			img := filepath.Join(t.TempDir(), "crash")
			backendtest.CrashImage(t, dir, img)

			unblock()
			require.Eventually(t, func() bool { return obs.taken.Load() >= 2 }, backendtest.WaitTimeout, 5*time.Millisecond,
				"the blocked snapshot and the one due after it were written")
			grant("after")
			require.NoError(t, s.n.Close())

			for _, d := range []string{dir, img} {
				r := openSingle(t, d, addr, func(cfg *backends.Config) { cfg.LogStore = store })
				require.NoError(t, r.n.ReadIndex(ctx))
				for key, tok := range acked {
					if d == img && key == "after" {
						continue
					}
					lk, ok := r.sm.Get(key)
					require.True(t, ok && lk.Token == tok, "%s: restarted without acknowledged grant %s token %d (%+v)", d, key, tok, lk)
				}
				require.NoError(t, r.n.Close())
			}
		})
	}
}
