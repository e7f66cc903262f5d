package applytime

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime/debug"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// FileName is the record's file in a node's data dir.
const FileName = "apply-times"

// Bucket is the width of one slot: a replayed lease is measured from at most
// this long after this node first applied its last Grant or Renew.
const Bucket = 10 * time.Millisecond

// ErrUnsupported: this host offers no boot id or shared file mapping; the
// node runs without the record.
var ErrUnsupported = errors.New("applytime: not supported on this host")

// Host is a clock that keeps running across restarts of the process.
type Host interface {
	// Epoch names the clock's epoch (the host's boot): readings of another
	// epoch are not comparable, so a record made in one is void in another.
	Epoch() (string, error)
	// Since returns the time elapsed since the epoch began. It must advance
	// no faster than the clock Config.Now reads (the same clock, or one that
	// stops while that one stops), so that a lease measured on it is never
	// short.
	Since() (time.Duration, error)
}

// Config configures Open.
type Config struct {
	// Path is the record's file (FileName in the data dir, which exists).
	Path string
	// Span is the longest lease the record must cover (lease.max_ms): the
	// ring holds Span/Bucket slots, so an index older than the ring belongs
	// to a lease that has run out.
	Span time.Duration
	// Host is the clock the record is kept on (HostClock()).
	Host Host
	// Now is the clock the caller measures leases with (time.Now for the
	// lessor's real clock). At returns times on it.
	Now func() time.Time
	// Keep says the data dir holds Raft state: false discards any record
	// found (its indexes named another log).
	Keep bool
	// OnFault, if set, hears once, from Applied's goroutine, that a store
	// into the mapping faulted (SIGBUS): the file was truncated underneath
	// (by another process; the lock does not stop truncate(2)), or its file
	// system could not back the page (a copy-on-write file system such as
	// btrfs reserves a new block when a written-back page is written
	// again, preallocated or not, and on a full disk has none), or a disk
	// error. The record then records nothing more: the next run measures
	// leases applied since from its replay, later, never early, as without
	// the record.
	OnFault func(error)
}

// Record is the apply-time record of one data dir. Applied must be called
// from one goroutine (the apply path); At and Close from any. A nil *Record
// records nothing and answers nothing.
type Record struct {
	f     *os.File
	mem   []byte   // the whole file, mapped shared
	words []uint64 // the slots in mem: bucket, index; bucket, index; ...
	slots uint64
	now   func() time.Time

	// Mapping between Now's readings and the host clock, read around one
	// instant g0: h0 before it, h1 after. toHost uses h1 (a later host time:
	// "applied by" stays true), fromHost h0 (a later Now time: never early).
	g0     time.Time
	h0, h1 time.Duration

	// What earlier runs recorded, read at Open: buckets in time order and,
	// for each, the highest index recorded up to it.
	prevBuckets []uint64
	prevMax     []uint64

	// mu guards the mapping against Close: Applied holds it shared (an
	// apply racing a shutdown must not touch unmapped memory).
	mu     sync.RWMutex
	closed bool

	onFault func(error) // Config.OnFault
	faulted bool        // a store faulted: Applied records nothing more (Applied's goroutine only)
}

// header is the file's first headerSize bytes: magic, bucket width (ns),
// slot count, epoch (up to maxEpoch bytes). Slots follow in host byte
// order: the record never leaves its host, whose boot it belongs to.
const (
	headerSize = 128
	maxEpoch   = headerSize - 24
	slotSize   = 16
)

var magic = [8]byte{'t', 'k', 'd', 'a', 'p', 't', '1', '\n'}

// Open opens the record at cfg.Path, creating it or resetting it when it is
// missing, of another epoch or layout, or cfg.Keep is false, and reads what
// earlier runs of this epoch recorded. The file is locked for this process
// until Close, and every block of it is allocated before it is mapped
// (allocate.go), so that no load or store of the mapping needs space.
// Errors: ErrUnsupported, a lock held by another process, the file
// system's; when the file system has no room for the whole file, an error
// naming the file and wrapping syscall.ENOSPC (or EDQUOT); a record being
// kept keeps its slots through it, for an Open once space is freed.
func Open(cfg Config) (*Record, error) {
	if !supported {
		return nil, ErrUnsupported
	}
	epoch, err := cfg.Host.Epoch()
	if err != nil {
		return nil, fmt.Errorf("applytime: clock epoch: %w", err)
	}
	if len(epoch) == 0 || len(epoch) > maxEpoch {
		return nil, fmt.Errorf("applytime: clock epoch %q: want 1 to %d bytes", epoch, maxEpoch)
	}
	slots := uint64(cfg.Span/Bucket) + 2
	size := headerSize + int64(slots)*slotSize
	f, err := os.OpenFile(cfg.Path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("applytime: %w", err)
	}
	if err := lockFile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("applytime: %s is in use by another process: %w", cfg.Path, err)
	}
	want := make([]byte, headerSize)
	copy(want, magic[:])
	binary.LittleEndian.PutUint64(want[8:], uint64(Bucket))
	binary.LittleEndian.PutUint64(want[16:], slots)
	copy(want[24:], epoch)
	got := make([]byte, headerSize)
	_, rerr := f.ReadAt(got, 0)
	fi, serr := f.Stat()
	valid := cfg.Keep && rerr == nil && serr == nil && fi.Size() == size && bytes.Equal(got, want)
	if valid {
		// Kept as it is, but with every block allocated (allocate.go): an
		// older binary left the file sparse, and a copy may be sparse.
		err = allocate(f, size)
	} else {
		err = resetFile(f, want, size)
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("applytime: %w", err)
	}
	mem, err := mapFile(f, int(size))
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("applytime: map %s: %w", cfg.Path, err)
	}
	r := &Record{f: f, mem: mem, slots: slots, now: cfg.Now, onFault: cfg.OnFault}
	r.words = unsafe.Slice((*uint64)(unsafe.Pointer(&mem[headerSize])), 2*slots)
	if r.h0, err = cfg.Host.Since(); err == nil {
		r.g0 = cfg.Now()
		r.h1, err = cfg.Host.Since()
	}
	if err != nil {
		_ = r.Close()
		return nil, fmt.Errorf("applytime: read the host clock: %w", err)
	}
	if valid {
		r.load(uint64(r.h1 / Bucket))
	}
	return r, nil
}

// resetFile empties f and gives it size bytes, every block allocated
// (allocate), header first and zero slots after (a zero slot is empty). Not
// synced: a record lost to a power cut is void after the reboot anyway.
func resetFile(f *os.File, header []byte, size int64) error {
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	if err := allocate(f, size); err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	if _, err := f.WriteAt(header, 0); err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	return nil
}

// load reads the slots earlier runs wrote (up to the current bucket now)
// into prevBuckets and prevMax.
func (r *Record) load(now uint64) {
	type rec struct{ bucket, index uint64 }
	var recs []rec
	for k := uint64(0); k < r.slots; k++ {
		b := atomic.LoadUint64(&r.words[2*k])
		j := atomic.LoadUint64(&r.words[2*k+1])
		if j == 0 || b%r.slots != k || b > now {
			continue // empty, or not a slot this layout wrote
		}
		recs = append(recs, rec{b, j})
	}
	sort.Slice(recs, func(a, b int) bool { return recs[a].bucket < recs[b].bucket })
	var high uint64
	for _, x := range recs {
		high = max(high, x.index)
		r.prevBuckets = append(r.prevBuckets, x.bucket)
		r.prevMax = append(r.prevMax, high)
	}
}

// Applied records that this node applied index now. Two atomic stores into
// the mapping at most; call it from the apply path, after the entry applied.
// A store that faults (Config.OnFault) is recovered from, not a crash:
// every block is allocated (Open), so no store needs space on a file system
// that overwrites in place, but a fault remains possible where Open cannot
// prevent it, and losing the record costs the lease bound at most, never
// a lease's safety.
func (r *Record) Applied(index uint64) {
	if r == nil {
		return
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed || r.faulted {
		return
	}
	// A fault in this goroutine becomes a panic, recovered by
	// stopFault, instead of a crash (runtime/debug.SetPanicOnFault).
	defer r.stopFault(debug.SetPanicOnFault(true))
	b := uint64(r.toHost(r.now()) / Bucket)
	k := (b % r.slots) * 2
	// Bucket first: a kill between the stores leaves an index this node
	// applied before the new bucket, which the slot still truly covers.
	if atomic.LoadUint64(&r.words[k]) != b {
		atomic.StoreUint64(&r.words[k], b)
		atomic.StoreUint64(&r.words[k+1], index)
		return
	}
	if atomic.LoadUint64(&r.words[k+1]) < index {
		atomic.StoreUint64(&r.words[k+1], index)
	}
}

// stopFault ends Applied: it gives the goroutine back its fault setting
// (was) and, if a store into the mapping faulted, stops the record and
// tells Config.OnFault. Any other panic goes on.
func (r *Record) stopFault(was bool) {
	debug.SetPanicOnFault(was)
	e := recover()
	if e == nil {
		return
	}
	fault, ok := e.(interface{ Addr() uintptr })
	if !ok {
		panic(e)
	}
	r.faulted = true
	if r.onFault != nil {
		r.onFault(fmt.Errorf("applytime: a store into %s faulted (SIGBUS at %#x): the record stops recording", r.f.Name(), fault.Addr()))
	}
}

// At returns a time, on Config.Now's clock, by which an earlier run of this
// node had applied index, and true; false when no earlier run recorded it
// (then the caller's apply now is the first). The time is the end of the
// earliest bucket that covers index: after the entry existed, so a lease
// measured from it is never short, and at most Bucket after that run applied
// it (or, for an index older than the ring, the oldest bucket's end).
func (r *Record) At(index uint64) (time.Time, bool) {
	if r == nil || len(r.prevMax) == 0 || index > r.prevMax[len(r.prevMax)-1] {
		return time.Time{}, false
	}
	k := sort.Search(len(r.prevMax), func(i int) bool { return r.prevMax[i] >= index })
	return r.fromHost(time.Duration(r.prevBuckets[k]+1) * Bucket), true
}

// toHost maps t (Now's clock) onto the host clock, never before the true
// host reading at t.
func (r *Record) toHost(t time.Time) time.Duration { return r.h1 + t.Sub(r.g0) }

// fromHost maps a host reading onto Now's clock, never before the true time.
func (r *Record) fromHost(h time.Duration) time.Time { return r.g0.Add(h - r.h0) }

// Close unmaps and unlocks the record; later Applied calls do nothing.
// Safe to call twice.
func (r *Record) Close() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	err := unmapFile(r.mem)
	if cerr := r.f.Close(); err == nil && !errors.Is(cerr, fs.ErrClosed) {
		err = cerr
	}
	return err
}
