package watermark

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"go.uber.org/zap"
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
	// ErrMissing: the data dir holds Raft state but no usable watermark
	// (missing, empty or unreadable file); the error is a *MissingError.
	ErrMissing = errors.New("watermark: no usable watermark beside a raft log")
)

// Why a watermark file holds no usable mark (MissingError.Cause).
var (
	errNoFile    = errors.New("is missing")
	errEmptyFile = errors.New("is empty (0 bytes)")
)

// ReplaceMember is how to recover a member whose log cannot be trusted,
// for the errors that refuse a start ("recover by " + ReplaceMember): the
// leader's copy replaces its log (Raft thesis §4.2: a new server catches
// up from the leader before it counts).
const ReplaceMember = "replacing the member: remove it from the cluster " +
	"(RemoveMember), move its data dir away, and add it back as a new member (AddMember) with an empty data dir, so it copies the log " +
	"from the leader"

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
		"shorter log can lose acknowledged writes. Recover by "+ReplaceMember,
		e.Found, e.Recorded, e.Found+1, e.Recorded)
}

// Is reports whether target is ErrLogShortened.
func (e *GapError) Is(target error) bool { return target == ErrLogShortened }

// MissingError says that DataDir holds Raft state up to index Last but no
// usable watermark, for the reason Cause. errors.Is(err, ErrMissing) is
// true for it, and errors.Is(err, ErrCorrupt) for a damaged file.
type MissingError struct {
	DataDir string
	Last    uint64
	Cause   error
}

// Error says what is missing and the two ways to recover.
func (e *MissingError) Error() string {
	why := e.Cause.Error()
	if !errors.Is(e.Cause, errNoFile) && !errors.Is(e.Cause, errEmptyFile) {
		why = "is unreadable (" + why + ")"
	}
	return fmt.Sprintf("watermark: data dir %s holds a raft log or snapshot (up to index %d) but its %s file %s: "+
		"without it this node cannot tell whether its storage lost acknowledged entries, so it refuses to start "+
		"(rejoining with a shorter log can lose acknowledged writes). Recover by %s; or, only if you know this log is complete "+
		"(for example a data dir written by a version without watermarks), start the node once with "+
		"--accept-missing-watermark (config key accept_missing_watermark), which logs the decision and writes a fresh watermark at the log's end",
		e.DataDir, e.Last, FileName, why, ReplaceMember)
}

// HoleError says that the Raft stores in DataDir cannot be as Raft wrote
// them (What says why): part of the log or the stable state was lost.
// errors.Is(err, ErrLogShortened) is true for it.
type HoleError struct {
	DataDir, What string
}

// Error says what is missing and how to recover.
func (e *HoleError) Error() string {
	return fmt.Sprintf("watermark: data dir %s: %s (a file of the raft log was lost or damaged); refusing to start, "+
		"because rejoining with it can lose acknowledged writes. Recover by %s", e.DataDir, e.What, ReplaceMember)
}

// Is reports whether target is ErrLogShortened.
func (e *HoleError) Is(target error) bool { return target == ErrLogShortened }

// Is reports whether target is ErrMissing.
func (e *MissingError) Is(target error) bool { return target == ErrMissing }

// Unwrap returns Cause.
func (e *MissingError) Unwrap() error { return e.Cause }

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

// Log is what Open checks the watermark against: the node's Raft log
// store together with its stable (term, vote) and snapshot stores, whatever
// their implementation. Each backend adapts its Raft library's storage
// interfaces to it once, so every log store it can be given is checked the
// same way.
type Log interface {
	// Extent returns what the stores hold.
	Extent() (Extent, error)
}

// Extent is what a node's Raft stores hold, as far as Open checks it.
type Extent struct {
	// Snapshot is the index of the newest snapshot the node can restore
	// (0: none).
	Snapshot uint64
	// First and Last are the indexes of the first and last log entries
	// (both 0 when the log is empty).
	First, Last uint64
	// Term is the stored current term (0: none stored).
	Term uint64
	// LastTerm is the term of the last entry, or of the snapshot when the
	// log is empty.
	LastTerm uint64
}

// HasState reports whether the stores hold any Raft state: a log entry, a
// term, or a snapshot.
func (e Extent) HasState() bool { return e.Snapshot > 0 || e.Last > 0 || e.Term > 0 }

// LastIndex returns the highest index the stores reach: the last entry's,
// or the snapshot's when that is later.
func (e Extent) LastIndex() uint64 { return max(e.Last, e.Snapshot) }

// whole returns a *HoleError when the stores cannot have been written by
// Raft as they are: entries between the snapshot and the first entry are
// missing (the node could never apply past the hole), or the stored term is
// below the last entry's (the term and vote were lost, so the node could
// vote twice in one term; Raft thesis §3.8 requires both to be on stable
// storage before it answers). Both happen when a file holding the older
// part of the log or the stable state is lost, while the newest entries
// survive in another.
func (e Extent) whole(dataDir string) error {
	switch {
	case e.Last > 0 && e.First > e.Snapshot+1:
		return &HoleError{DataDir: dataDir, What: fmt.Sprintf(
			"its log starts at index %d but its newest readable snapshot ends at index %d: entries %d-%d are missing",
			e.First, e.Snapshot, e.Snapshot+1, e.First-1)}
	case e.Term < e.LastTerm:
		return &HoleError{DataDir: dataDir, What: fmt.Sprintf(
			"its stored current term %d is below the term %d of its last entry: its term and vote were lost", e.Term, e.LastTerm)}
	}
	return nil
}

// Options tune Open.
type Options struct {
	// AcceptMissing starts a node whose stores hold Raft state although its
	// watermark file is missing, empty or unreadable: Open writes a fresh
	// mark at the log's current end and logs the decision at warn level
	// (ticketd's --accept-missing-watermark). Without it Open refuses with a
	// *MissingError.
	AcceptMissing bool
	// Logger receives the warn-level audit line of AcceptMissing; nil
	// means zap.NewNop().
	Logger *zap.Logger
}

// Open opens the watermark file in dataDir, checks it against log and
// returns it with the Mark of the previous run:
//
//   - a readable mark: log must reach mark.LastIndex (Check), else a
//     *GapError;
//   - no usable mark (the file is missing, empty or unreadable) and log
//     empty: a new data dir; a zero mark is written, synced, and returned;
//   - no usable mark and log holding state: a *MissingError (errors.Is
//     ErrMissing; also ErrCorrupt for a damaged file), because the check
//     above cannot be made without the mark and a node that lost the end of
//     its log would otherwise rejoin with it (a file that comes back empty
//     after a crash, a lost directory entry, a data dir copied without it),
//     unless opts.AcceptMissing, which writes a fresh mark at the log's
//     end and logs that it did.
//
// The mark is a file of its own rather than a key written in the log's own
// batches: badger drops the damaged tail of its write-ahead log without an
// error, and a mark written in the same batch would be dropped with the
// entries whose loss it must reveal (see the package doc).
//
// Errors: *GapError, *MissingError, or the file system's and log's.
func Open(dataDir string, log Log, opts Options) (*File, Mark, error) {
	ext, err := log.Extent()
	if err != nil {
		return nil, Mark{}, fmt.Errorf("watermark: read the raft stores of %s: %w; recover by %s", dataDir, err, ReplaceMember)
	}
	if err := ext.whole(dataDir); err != nil {
		return nil, Mark{}, err
	}
	hasState, last := ext.HasState(), ext.LastIndex()
	w, mark, problem, err := openFile(dataDir, !hasState)
	if err != nil {
		return nil, Mark{}, err
	}
	closeFile := func() {
		if w != nil {
			_ = w.f.Close()
		}
	}
	if problem == nil {
		if err := Check(mark, last); err != nil {
			_ = w.f.Close()
			return nil, Mark{}, err
		}
		w.mark = mark
		w.startAsync()
		return w, mark, nil
	}
	fresh := Mark{}
	if hasState {
		missing := &MissingError{DataDir: dataDir, Last: last, Cause: problem}
		if !opts.AcceptMissing {
			closeFile()
			return nil, Mark{}, missing
		}
		if w == nil {
			if w, _, _, err = openFile(dataDir, true); err != nil {
				return nil, Mark{}, err
			}
		}
		logger := opts.Logger
		if logger == nil {
			logger = zap.NewNop()
		}
		fresh.LastIndex = last
		logger.Warn("AUDIT: starting without a usable watermark because --accept-missing-watermark is set; "+
			"entries this node's storage lost before this start go unnoticed; a fresh watermark is written at the log's end",
			zap.String("data_dir", dataDir), zap.String("watermark", problem.Error()), zap.Uint64("log_last_index", last))
	}
	if err := w.reset(fresh); err != nil {
		closeFile()
		return nil, Mark{}, err
	}
	if err := syncDir(dataDir); err != nil {
		closeFile()
		return nil, Mark{}, err
	}
	w.startAsync()
	return w, fresh, nil
}

// openFile opens the watermark file in dataDir, creating it only when
// create is set (a refused start leaves the data dir as it was). problem
// says why it holds no usable mark (missing, empty or damaged); it is nil
// when mark was read from it. w is nil when the file is missing and create
// is unset. err is a failure to open the file.
func openFile(dataDir string, create bool) (w *File, mark Mark, problem, err error) {
	path := filepath.Join(dataDir, FileName)
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, Mark{}, nil, fmt.Errorf("watermark: %w", err)
	}
	flags := os.O_RDWR | syscall.O_DSYNC
	if create {
		flags |= os.O_CREATE
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if errors.Is(err, fs.ErrNotExist) && !create {
		return nil, Mark{}, errNoFile, nil
	}
	if err != nil {
		return nil, Mark{}, nil, fmt.Errorf("watermark: %w", err)
	}
	w = &File{f: f}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, Mark{}, nil, fmt.Errorf("watermark: %w", err)
	}
	if fi.Size() == 0 {
		return w, Mark{}, errEmptyFile, nil
	}
	var rec [recordSize]byte
	if _, err := f.ReadAt(rec[:], 0); err != nil && !errors.Is(err, io.EOF) {
		return w, Mark{}, fmt.Errorf("%w: read %s: %w", ErrCorrupt, path, err), nil
	}
	m, err := decode(rec[:], fi.Size())
	if err != nil {
		return w, Mark{}, err, nil
	}
	return w, m, nil, nil
}

// reset replaces the file's content with m alone (cutting off whatever a
// damaged file held past the record); w is not shared yet.
func (w *File) reset(m Mark) error {
	if err := w.f.Truncate(0); err != nil {
		return fmt.Errorf("watermark: %w", err)
	}
	return w.write(m)
}

// Create writes a new watermark file holding m into dataDir, replacing any,
// and syncs it and the directory: for a data dir whose Raft state this
// process has just written from scratch (a restore from a snapshot), so
// that the next Open finds the mark. Errors: the file system's.
func Create(dataDir string, m Mark) error {
	w, _, _, err := openFile(dataDir, true)
	if err != nil {
		return err
	}
	err = w.reset(m)
	if cerr := w.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("watermark: %w", cerr)
	}
	if err != nil {
		return err
	}
	return syncDir(dataDir)
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

// Read returns the mark durably stored in dataDir's watermark file without
// opening it for writing (a running node may hold it): what a crash at this
// moment would leave. Errors: the file is missing or unreadable, or holds no
// valid record (ErrCorrupt).
func Read(dataDir string) (Mark, error) {
	path := filepath.Join(dataDir, FileName)
	rec, err := os.ReadFile(path)
	if err != nil {
		return Mark{}, fmt.Errorf("watermark: %w", err)
	}
	if len(rec) < recordSize {
		return Mark{}, fmt.Errorf("%w: %s holds %d bytes, want %d", ErrCorrupt, path, len(rec), recordSize)
	}
	return decode(rec[:recordSize], int64(len(rec)))
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
