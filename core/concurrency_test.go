package core_test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/core"
)

// concurrentSequence returns n commands over 16 keys from a fixed seed, with
// release, renew and expire tokens that are usually a holder's, so locks
// come and go, get renewed and leave lock-delay records; keys are exclusive,
// shared or semaphores (the kind is fixed per key), and sessions open, hold
// locks and end.
func concurrentSequence(t *testing.T, n int) []core.Command {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	sm := core.NewStateMachine()
	cmds := make([]core.Command, 0, n)
	for range n {
		k := rng.IntN(16)
		key := fmt.Sprintf("k%02d", k)
		var c core.Command
		switch rng.IntN(11) {
		case 0, 1, 2, 3, 4:
			c = core.Grant(key, int64(1000+rng.IntN(3)), fmt.Sprintf("o%d", rng.IntN(3))).
				WithLockDelay(int64(rng.IntN(2) * 500))
			switch k % 4 {
			case 1:
				c = c.WithMode(core.ModeShared)
			case 2:
				c = c.WithLimit(2)
			}
			if ids := sessionIDs(sm); len(ids) > 0 && rng.IntN(3) == 0 {
				c = c.WithSession(ids[rng.IntN(len(ids))])
			}
		case 5, 6, 7, 8:
			token := uint64(rng.IntN(int(sm.LastToken()) + 2))
			if hs := sm.Holders(key); len(hs) > 0 && rng.IntN(4) > 0 {
				token = hs[rng.IntN(len(hs))].Token
			}
			switch rng.IntN(4) {
			case 0:
				c = core.Release(key, token)
			case 1:
				c = core.Renew(key, token)
			case 2:
				c = core.Expire(key, token)
			default:
				held, _ := sm.Holder(key, token)
				c = core.ExpireSeen(key, token, held.ModIndex)
			}
		case 9:
			ids := sessionIDs(sm)
			switch {
			case len(ids) == 0 || rng.IntN(3) == 0:
				c = core.CreateSession(3000)
			case rng.IntN(2) == 0:
				c = core.KeepAliveSession(ids[rng.IntN(len(ids))])
			default:
				c = core.CloseSession(ids[rng.IntN(len(ids))])
			}
		default:
			c = core.SetMember(fmt.Sprintf("n%d", rng.IntN(3)), fmt.Sprintf("127.0.0.1:%d", 7000+rng.IntN(3)))
		}
		applyAll(t, sm, c)
		cmds = append(cmds, c)
	}
	return cmds
}

// TestConcurrentReadsDuringApply runs the read methods (Get, Range, Ascend,
// Len, LastToken, Members, Snapshot().WriteTo) from several goroutines while
// one goroutine applies a log, as the server does. Run it with -race. Every
// snapshot a reader takes must be exactly the state at its AppliedIndex: its
// bytes equal those of a sequential run stopped at that index.
func TestConcurrentReadsDuringApply(t *testing.T) {
	const n = 3000
	cmds := concurrentSequence(t, n)
	want := make([][sha256.Size]byte, n+1) // snapshot digest after index i
	seq := core.NewStateMachine()
	want[0] = sha256.Sum256(snapshotBytes(t, seq))
	for i, c := range cmds {
		applyAll(t, seq, c)
		want[i+1] = sha256.Sum256(snapshotBytes(t, seq))
	}

	sm := core.NewStateMachine()
	var (
		done atomic.Bool
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []string
		fail = func(format string, args ...any) {
			mu.Lock()
			errs = append(errs, fmt.Sprintf(format, args...))
			mu.Unlock()
		}
		readers atomic.Int64
	)
	wg.Go(func() {
		defer done.Store(true)
		for i, c := range cmds {
			if _, err := sm.Apply(uint64(i+1), c); err != nil {
				fail("apply %d: %v", i+1, err)
				return
			}
		}
	})
	for r := range 3 {
		wg.Go(func() {
			var lastApplied uint64
			var buf bytes.Buffer
			for rounds := 0; !done.Load() || rounds == 0; rounds++ {
				readers.Add(1)
				sn := sm.Snapshot()
				buf.Reset()
				if _, err := sn.WriteTo(&buf); err != nil {
					fail("reader %d: write snapshot: %v", r, err)
					return
				}
				if got := sha256.Sum256(buf.Bytes()); got != want[sn.AppliedIndex()] {
					fail("reader %d: snapshot at index %d is not the state at that index", r, sn.AppliedIndex())
				}
				if r == 0 { // a restore from a snapshot taken mid-apply works
					if err := core.NewStateMachine().Restore(bytes.NewReader(buf.Bytes())); err != nil {
						fail("reader %d: restore: %v", r, err)
					}
				}
				applied := sm.AppliedIndex()
				if applied < lastApplied {
					fail("reader %d: AppliedIndex went back from %d to %d", r, lastApplied, applied)
				}
				lastApplied = applied
				key := fmt.Sprintf("k%02d", rounds%16)
				if l, ok := sm.Get(key); ok && (l.Key != key || l.Token == 0 || l.Token > sm.LastToken()) {
					fail("reader %d: Get(%q) = %+v with LastToken %d", r, key, l, sm.LastToken())
				}
				locks := sm.Range("k", "", 0)
				for i := 1; i < len(locks); i++ {
					a, b := locks[i-1], locks[i]
					if a.Key > b.Key || (a.Key == b.Key && a.Token >= b.Token) {
						fail("reader %d: Range out of order: %q/%d then %q/%d", r, a.Key, a.Token, b.Key, b.Token)
					}
				}
				if sm.Len() > 16 {
					fail("reader %d: %d keys held of 16", r, sm.Len())
				}
				for _, h := range sm.Holders(key) {
					if h.Key != key || h.Token > sm.LastToken() {
						fail("reader %d: Holders(%q) has %+v", r, key, h)
					}
					_, _ = sm.Holder(key, h.Token)
				}
				sm.AscendSessions(func(se core.Session) bool {
					_ = se.ID
					return true
				})
				if ids := sessionIDs(sm); len(ids) > 0 {
					_ = sm.SessionLocks(ids[0])
				}
				count := 0
				sm.Ascend(func(core.Lock) bool { count++; return count < 4 })
				if d, ok := sm.LockDelay(key); ok && (d.Key != key || d.LockDelayMS <= 0 || d.Index > sm.AppliedIndex()) {
					fail("reader %d: LockDelay(%q) = %+v", r, key, d)
				}
				sm.AscendLockDelays(func(core.LockDelay) bool { return false })
				_ = sm.Members()
				_, _ = sm.MemberAPIAddr("n1")
			}
		})
	}
	wg.Wait()
	require.Empty(t, errs)
	require.Equal(t, uint64(n), sm.AppliedIndex())
	require.Equal(t, want[n], sha256.Sum256(snapshotBytes(t, sm)))
	t.Logf("%d reader rounds during %d applies", readers.Load(), n)
}

// TestSnapshotWriteDuringApply writes one Snapshot while Apply keeps changing
// the state machine it was taken from (hashicorp FSMSnapshot.Persist runs
// concurrently with Apply). Run it with -race.
func TestSnapshotWriteDuringApply(t *testing.T) {
	sm := core.NewStateMachine()
	for i := range 2000 {
		applyAll(t, sm, core.Grant(fmt.Sprintf("k%04d", i), 1000, "o"))
	}
	want := snapshotBytes(t, sm)
	sn := sm.Snapshot()
	var wg sync.WaitGroup
	var got bytes.Buffer
	var err error
	wg.Go(func() { _, err = sn.WriteTo(&got) })
	for i := range 2000 {
		applyAll(t, sm, core.Release(fmt.Sprintf("k%04d", i), uint64(i+1)), core.Grant(fmt.Sprintf("k%04d/x", i), 1000, "o"))
	}
	wg.Wait()
	require.NoError(t, err)
	require.Equal(t, want, got.Bytes())
}
