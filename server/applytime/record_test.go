package applytime_test

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/server/applytime"
)

// testHost is a host clock moved by hand, with the same time on both sides
// (Config.Now reads it too), in an epoch the test names.
type testHost struct {
	mu    sync.Mutex
	epoch string
	since time.Duration
}

var base = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func (h *testHost) Epoch() (string, error) { h.mu.Lock(); defer h.mu.Unlock(); return h.epoch, nil }

func (h *testHost) Since() (time.Duration, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.since, nil
}

func (h *testHost) now() time.Time { h.mu.Lock(); defer h.mu.Unlock(); return base.Add(h.since) }

func (h *testHost) advance(d time.Duration) { h.mu.Lock(); h.since += d; h.mu.Unlock() }

// fresh returns the path of a record in a new dir and a host clock at an
// hour into epoch boot-1.
func fresh(t *testing.T) (string, *testHost) {
	return filepath.Join(t.TempDir(), applytime.FileName), &testHost{epoch: "boot-1", since: time.Hour}
}

func open(t *testing.T, path string, h *testHost, keep bool) *applytime.Record {
	t.Helper()
	r, err := applytime.Open(applytime.Config{Path: path, Span: time.Second, Host: h, Now: h.now, Keep: keep})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// at returns At(index) as a time since base.
func at(t *testing.T, r *applytime.Record, index uint64) (time.Duration, bool) {
	t.Helper()
	got, ok := r.At(index)
	return got.Sub(base), ok
}

// TestRecordSurvivesRestart: a record reopened in the same epoch answers for
// every index an earlier run applied with the end of the bucket it applied
// in: never before the apply (a lease is never short), at most one bucket
// after it; an index no earlier run applied gets no answer.
func TestRecordSurvivesRestart(t *testing.T) {
	path, h := fresh(t)
	r := open(t, path, h, false)
	_, ok := r.At(1)
	assert.False(t, ok, "a fresh record answers nothing")
	applies := map[uint64]time.Duration{}
	for i := uint64(1); i <= 40; i++ {
		applies[i] = h.since
		r.Applied(i)
		h.advance(3 * time.Millisecond)
	}
	_, ok = r.At(1)
	assert.False(t, ok, "this run's applies answer only the next run")
	require.NoError(t, r.Close())

	h.advance(5 * time.Second) // down for a while
	r2 := open(t, path, h, true)
	for i, applied := range applies {
		got, ok := at(t, r2, i)
		require.True(t, ok, "index %d", i)
		assert.Greater(t, got, applied, "index %d: the record's time must be after the apply", i)
		assert.LessOrEqual(t, got-applied, applytime.Bucket, "index %d: at most one bucket late", i)
	}
	_, ok = r2.At(41)
	assert.False(t, ok, "an index no earlier run applied")

	// The second run replays from 1 and goes on; a third run still has
	// the first run's times for the old indexes.
	for i := uint64(1); i <= 45; i++ {
		r2.Applied(i)
	}
	replayed := h.since
	require.NoError(t, r2.Close())
	h.advance(time.Second / 2)
	r3 := open(t, path, h, true)
	got, ok := at(t, r3, 7)
	require.True(t, ok)
	assert.LessOrEqual(t, got-applies[7], applytime.Bucket, "the first run's time, not the replay's")
	got, ok = at(t, r3, 43)
	require.True(t, ok)
	assert.Greater(t, got, replayed, "an index first applied in the second run")
	assert.LessOrEqual(t, got-replayed, applytime.Bucket)
}

// TestRecordVoid: a record of another epoch (the host rebooted: its
// monotonic clock restarted), or found in a data dir without Raft state
// (Keep false: another log), answers nothing.
func TestRecordVoid(t *testing.T) {
	for _, tc := range []struct {
		name  string
		epoch string
		keep  bool
	}{{"another epoch", "boot-2", true}, {"no raft state", "boot-1", false}} {
		t.Run(tc.name, func(t *testing.T) {
			path, h := fresh(t)
			r := open(t, path, h, true)
			r.Applied(5)
			require.NoError(t, r.Close())
			h.epoch = tc.epoch
			h.advance(time.Second)
			r2 := open(t, path, h, tc.keep)
			_, ok := r2.At(5)
			assert.False(t, ok)
		})
	}
}

// TestRecordOlderThanRing: an index applied longer ago than the ring spans
// (Config.Span, the longest lease) is answered with the oldest bucket the
// ring still holds: after the apply (never short), and long enough ago that
// any lease from it has run out.
func TestRecordOlderThanRing(t *testing.T) {
	path, h := fresh(t)
	r := open(t, path, h, false)
	r.Applied(1)
	first := h.since
	for i := uint64(2); i <= 400; i++ {
		h.advance(applytime.Bucket)
		r.Applied(i)
	}
	require.NoError(t, r.Close())
	r2 := open(t, path, h, true)
	got, ok := at(t, r2, 1)
	require.True(t, ok)
	assert.Greater(t, got, first)
	assert.LessOrEqual(t, got, h.since-time.Second+2*applytime.Bucket, "the oldest bucket of a ring spanning a second")
}

// TestRecordDamaged: a file of the wrong size or header is reset, not read.
func TestRecordDamaged(t *testing.T) {
	path, h := fresh(t)
	r := open(t, path, h, true)
	r.Applied(9)
	require.NoError(t, r.Close())
	require.NoError(t, os.Truncate(path, 100))
	r2 := open(t, path, h, true)
	_, ok := r2.At(9)
	assert.False(t, ok)
}

// TestRecordLocked: a second open of the same file while the first is open
// (two processes on one data dir) fails; after Close it succeeds.
func TestRecordLocked(t *testing.T) {
	path, h := fresh(t)
	r := open(t, path, h, true)
	_, err := applytime.Open(applytime.Config{Path: path, Span: time.Second, Host: h, Now: h.now, Keep: true})
	require.Error(t, err)
	require.NoError(t, r.Close())
	open(t, path, h, true)
}

// TestAppliedFault: a store into the mapping that faults (SIGBUS: here
// the file truncated underneath by another process, which the lock does
// not prevent) stops the record and is reported once through OnFault,
// instead of ending the process with a crash dump; what earlier runs
// recorded is still answered, and Close works.
func TestAppliedFault(t *testing.T) {
	path, h := fresh(t)
	r := open(t, path, h, false)
	r.Applied(4)
	require.NoError(t, r.Close())
	var faults []error
	r, err := applytime.Open(applytime.Config{Path: path, Span: time.Second, Host: h, Now: h.now, Keep: true,
		OnFault: func(err error) { faults = append(faults, err) }})
	require.NoError(t, err)
	defer r.Close()
	r.Applied(5)
	require.NoError(t, os.Truncate(path, 0))
	h.advance(applytime.Bucket)
	r.Applied(6)
	r.Applied(7)
	require.Len(t, faults, 1, "one report")
	assert.ErrorContains(t, faults[0], path)
	_, ok := r.At(4)
	assert.True(t, ok, "an earlier run's apply is still answered")
	require.NoError(t, r.Close())
}

// TestHostClock: on this host the real clock has an epoch and runs with
// time.Now: a record kept on it maps times back within the reads' gap.
func TestHostClock(t *testing.T) {
	path := filepath.Join(t.TempDir(), applytime.FileName)
	r, err := applytime.Open(applytime.Config{Path: path, Span: time.Second, Host: applytime.HostClock(), Now: time.Now})
	require.NoError(t, err)
	applied := time.Now()
	r.Applied(3)
	require.NoError(t, r.Close())
	r2, err := applytime.Open(applytime.Config{Path: path, Span: time.Second, Host: applytime.HostClock(), Now: time.Now, Keep: true})
	require.NoError(t, err)
	defer r2.Close()
	got, ok := r2.At(3)
	require.True(t, ok)
	assert.True(t, got.After(applied), "never before the apply")
	assert.Less(t, got.Sub(applied), applytime.Bucket+time.Second, "close to the apply")
}

// BenchmarkApplied: the cost one apply pays for the record (docs/design.md#leases).
func BenchmarkApplied(b *testing.B) {
	path := filepath.Join(b.TempDir(), applytime.FileName)
	r, err := applytime.Open(applytime.Config{Path: path, Span: 10 * time.Minute, Host: applytime.HostClock(), Now: time.Now})
	if err != nil {
		b.Skip(err)
	}
	defer r.Close()
	b.ReportAllocs()
	for i := range b.N {
		r.Applied(uint64(i + 1))
	}
}
