package watermark

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// Sentinel errors of package watermark. Compare with errors.Is.
var (
	// ErrLogShortened: the node's log ends before an index it had durably
	// recorded as appended; its storage lost acknowledged entries. The error
	// is a *GapError.
	ErrLogShortened = errors.New("watermark: log shorter than recorded")
	// ErrCorrupt: the watermark file itself is damaged (bad size or checksum).
	ErrCorrupt = errors.New("watermark: damaged watermark file")
	// ErrClosed: Store after Close.
	ErrClosed = errors.New("watermark: closed")
)

// FileName is the watermark file's name inside a node's data dir.
const FileName = "watermark"

// recordSize is the file's size: LastIndex, Applied (8 bytes each, big
// endian) and a CRC-32C of both (4 bytes).
const recordSize = 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Mark is what a node durably recorded about its log (see the package doc).
type Mark struct {
	// LastIndex is the highest log index durably appended (lowered before a
	// suffix truncation).
	LastIndex uint64
	// Applied is the highest log index applied to the state machine when the
	// mark was written.
	Applied uint64
}

// GapError says that the log ends at Found although the node had durably
// recorded index Recorded: entries (Found, Recorded] are lost. errors.Is(err,
// ErrLogShortened) is true for it.
type GapError struct {
	Recorded, Found uint64
}

// Error names the gap and the way to recover.
func (e *GapError) Error() string {
	return fmt.Sprintf("watermark: log ends at index %d but this node had durably appended up to index %d: "+
		"entries %d-%d were lost by its storage (damaged log files); refusing to start, because rejoining with a "+
		"shorter log can lose acknowledged writes. Recover by replacing the member: remove it from the cluster "+
		"(RemoveMember), move its data dir away, and add it back as a new member (AddMember) so it copies the log "+
		"from the leader",
		e.Found, e.Recorded, e.Found+1, e.Recorded)
}

// Is reports whether target is ErrLogShortened.
func (e *GapError) Is(target error) bool { return target == ErrLogShortened }

// Check returns a *GapError when last, the last index of the log (or of the
// latest snapshot when that is later), is below m.LastIndex, and nil
// otherwise.
func Check(m Mark, last uint64) error {
	if last < m.LastIndex {
		return &GapError{Recorded: m.LastIndex, Found: last}
	}
	return nil
}

// File is an open watermark file. Its methods are safe for concurrent use.
type File struct {
	// mu guards the file and every field below it up to pmu; it is held
	// during each write.
	mu     sync.Mutex
	f      *os.File
	mark   Mark
	buf    [recordSize]byte
	closed bool

	// pmu guards the mark Advance asks for (see advance.go); it is never
	// held during a write, so Advance never waits for the disk. Order: mu
	// before pmu.
	pmu  sync.Mutex
	pend pending
	// async is the background writer (Open starts it, Close stops it).
	async asyncWriter
}

// Open opens the watermark file in dataDir (creating it, synced, with a zero
// Mark when missing) and returns it with the Mark it holds. Errors: ErrCorrupt
// for a damaged file, or the file system's.
func Open(dataDir string) (*File, Mark, error) {
	path := filepath.Join(dataDir, FileName)
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, Mark{}, fmt.Errorf("watermark: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_DSYNC, 0o600)
	if err != nil {
		return nil, Mark{}, fmt.Errorf("watermark: %w", err)
	}
	w := &File{f: f}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, Mark{}, fmt.Errorf("watermark: %w", err)
	}
	if fi.Size() == 0 {
		if err := w.write(Mark{}); err != nil {
			_ = f.Close()
			return nil, Mark{}, err
		}
		if err := syncDir(dataDir); err != nil {
			_ = f.Close()
			return nil, Mark{}, err
		}
		w.startAsync()
		return w, Mark{}, nil
	}
	var rec [recordSize]byte
	if _, err := f.ReadAt(rec[:], 0); err != nil && !errors.Is(err, io.EOF) {
		_ = f.Close()
		return nil, Mark{}, fmt.Errorf("watermark: read %s: %w", path, err)
	}
	m, err := decode(rec[:], fi.Size())
	if err != nil {
		_ = f.Close()
		return nil, Mark{}, fmt.Errorf("%s: %w", path, err)
	}
	w.mark = m
	w.startAsync()
	return w, m, nil
}

func decode(rec []byte, size int64) (Mark, error) {
	if size != recordSize {
		return Mark{}, fmt.Errorf("%w: %d bytes, want %d", ErrCorrupt, size, recordSize)
	}
	if crc32.Checksum(rec[:16], castagnoli) != binary.BigEndian.Uint32(rec[16:]) {
		return Mark{}, fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	return Mark{LastIndex: binary.BigEndian.Uint64(rec[:8]), Applied: binary.BigEndian.Uint64(rec[8:16])}, nil
}

// Mark returns the last Mark stored (or read by Open).
func (w *File) Mark() Mark {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mark
}

// Store durably records m (one synced 20-byte write) unless it equals the
// mark already stored; a mark Advance asked for and not yet written is
// dropped. Errors: ErrClosed, the background writer's (see Advance), or the
// file system's; on error the caller must stop the node, as the watermark
// may no longer be durable.
func (w *File) Store(m Mark) error {
	return w.Update(func(Mark) Mark { return m })
}

// Update durably records change(current mark) as one atomic read-modify-
// write, so that writers from several goroutines (log appends, a periodic
// record of the applied index) never undo each other's change. The current
// mark includes what Advance last asked for, written or not, so a
// synchronous change (lowering LastIndex before a suffix is deleted) is
// never undone by a later background write. Errors are Store's.
func (w *File) Update(change func(Mark) Mark) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	cur, err := w.takePending()
	if err != nil {
		return err
	}
	m := change(cur)
	if m == w.mark {
		return nil
	}
	return w.write(m)
}

// RaiseApplied durably records applied as the mark's Applied when it is
// higher; LastIndex is unchanged. Errors are Store's.
func (w *File) RaiseApplied(applied uint64) error {
	return w.Update(func(m Mark) Mark {
		m.Applied = max(m.Applied, applied)
		return m
	})
}

// write stores m; w.mu is held (or w is not shared yet).
func (w *File) write(m Mark) error {
	binary.BigEndian.PutUint64(w.buf[:8], m.LastIndex)
	binary.BigEndian.PutUint64(w.buf[8:16], m.Applied)
	binary.BigEndian.PutUint32(w.buf[16:], crc32.Checksum(w.buf[:16], castagnoli))
	if _, err := w.f.WriteAt(w.buf[:], 0); err != nil {
		return fmt.Errorf("watermark: write: %w", err)
	}
	w.mark = m
	return nil
}

// Close writes the mark Advance last asked for, if any, stops the
// background writer and closes the file; later calls fail with ErrClosed.
// Safe to call twice. Errors: the last write's or the file system's.
func (w *File) Close() error {
	w.async.stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	m, err := w.takePending()
	if err == nil && m != w.mark {
		err = w.write(m)
	}
	w.pmu.Lock()
	w.pend.err = ErrClosed // later Advances fail
	w.pmu.Unlock()
	w.closed = true
	return errors.Join(err, w.f.Close())
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("watermark: %w", err)
	}
	defer func() { _ = d.Close() }()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("watermark: sync %s: %w", dir, err)
	}
	return nil
}
